"""Shared fixtures and helpers: compile test programs with the system cc, run the real CLI, wait for
a condition, read and check an interval log."""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable, Optional, Union

import pytest
from hypothesis import settings

# CI draws the same examples on every run (.ci/run sets PHASESCOPE_HYPOTHESIS=ci): a red CI is then a
# defect anyone can replay, not a draw; a developer's runs keep exploring new examples.
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile(os.environ.get("PHASESCOPE_HYPOTHESIS", "default"))

from phasescope.formats.log import log_records

# The stop signals as a terminal gives them: a suite started in the background of a script (`cmd &`,
# nohup) inherits SIGINT and SIGQUIT (nohup: SIGHUP) ignored, which phasescope, as the program it traces, then keeps
# ignoring (stop 47), and the tests that send them would test that case instead. Set here, a
# handler becomes the default in every process the tests start (exec resets caught signals).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
for _sig in (signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):  # nohup ignores SIGHUP
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, signal.SIG_DFL)

PROGRAMS = Path(__file__).parent / "programs"


def _refuse_processes(monkeypatch, nodeid: str) -> None:
    """Make every way a test could start a process (subprocess, fork, spawn, Frida's devices, which
    spawn and inject) fail, saying which test should be marked slow."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"{nodeid} starts a process: mark it @pytest.mark.slow (the fast lane, "
                             "pytest -m 'not slow', runs only tests that start none)")
    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse)
    try:
        import frida
    except ImportError:
        return
    for name in ("get_device_manager", "get_local_device", "get_remote_device", "get_usb_device", "get_device",
                 "attach", "spawn"):
        if hasattr(frida, name):
            monkeypatch.setattr(frida, name, refuse)


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per core and half as many again. Most slow tests wait on the
    processes they start (the whole suite used 318 s of CPU in a 563 s run on 2 workers), so a
    third worker on 2 cores shortens the run (docs/performance.md has the measurements)."""
    return max(2, (os.cpu_count() or 1) * 3 // 2)


@pytest.fixture(autouse=True)
def fast_lane_starts_no_process(request, monkeypatch):
    """A test not marked slow must start no process, so the fast lane stays fast and needs no
    Frida, perf, cc or tmux: one that does fails here, in either lane."""
    if request.node.get_closest_marker("slow") is None:
        _refuse_processes(monkeypatch, request.node.nodeid)
    yield


def _programs_under(base: str) -> set:
    """Pids of the processes running a program that lies under ``base`` (a test's compiled ones)."""
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/exe").startswith(base):
                    pids.add(int(entry))
            except OSError:
                pass
    return pids


@pytest.fixture(autouse=True)
def no_program_left_running(request, tmp_path_factory):
    """A test that failed or timed out while a program it compiled ran (a target phasescope spawned,
    or one the test started) left it spinning through the rest of the suite and after it: such
    programs, started during the test, are killed when it ends."""
    if request.node.get_closest_marker("slow") is None:
        yield
        return
    base = str(tmp_path_factory.getbasetemp())
    before = _programs_under(base)
    yield
    left = _programs_under(base) - before
    for pid in left:
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
    end = time.monotonic() + 2
    while left and (left := _programs_under(base) & left) and time.monotonic() < end:  # the kill lands
        time.sleep(0.01)


@pytest.fixture(scope="session")
def build(tmp_path_factory):
    """build("name.c", *flags) -> path of tests/programs/name.c compiled with cc (cached per flags)."""
    out_dir = tmp_path_factory.mktemp("bin")
    cache = {}

    def _build(source: str, *flags: str, name: str = None) -> str:
        key = (source, flags, name)
        if key not in cache:
            # A stable name: the module's name is part of every block key (its tag), so a name that
            # changed per run (Python's salted hash()) would move blocks between tracker buckets.
            tag = hashlib.sha1("\0".join(flags).encode()).hexdigest()[:8]
            exe = out_dir / (name or (Path(source).stem + ("_" + tag if flags else "")))
            cmd = ["cc", "-O1", "-g", "-o", str(exe), str(PROGRAMS / source), *flags]
            subprocess.run(cmd, check=True, capture_output=True, timeout=300)
            cache[key] = str(exe)
        return cache[key]

    return _build


def cli_command(*args: str) -> list:
    """The command line running phasescope's CLI from this interpreter."""
    return [sys.executable, "-m", "phasescope.cli", *args]


def run_cli(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """Run phasescope to completion, capturing text output."""
    env = dict(os.environ, COLUMNS="120")
    return subprocess.run(cli_command(*args), capture_output=True, text=True, timeout=timeout, env=env, **kw)


def wait_for(predicate: Callable, timeout: float = 30.0, what: Union[str, Callable[[], str]] = "condition",
             every: float = 0.05):
    """Poll ``predicate`` every ``every`` seconds until it returns something true, and return that;
    fail the test after ``timeout`` seconds, saying ``what`` was awaited (a callable: called then,
    for the state at that time)."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what() if callable(what) else what}")
        time.sleep(every)


def end_process(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """Kill a process the test started (if it still runs) and reap it within ``timeout`` s; a
    process that cannot be reaped fails the test, naming its tracers, instead of hanging it."""
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        from phasescope.sources.stopped import stuck_helpers
        raise AssertionError(f"pid {proc.pid} killed but not reapable after {timeout:g} s; "
                             f"frida helpers tracing it: {stuck_helpers(proc.pid)}") from None


_HOLD = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(0x4206, int(sys.argv[1]), None, None) != 0:  # PTRACE_SEIZE: the thread runs on, held
    print(f"errno {ctypes.get_errno()}", flush=True)
    sys.exit(1)
print("held", flush=True)
sys.stdin.read()  # until the test closes stdin; the thread is let go as this process ends
"""


@contextlib.contextmanager
def held_by_another_tracer(tid: int):
    """Thread ``tid`` ptrace-seized by another process for the block (it runs on, but no other
    tracer can attach to it: Stalker cannot stop it). Skips where Yama refuses the seize."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tid)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([holder.stdout], [], [], 60)  # a loaded machine starts python3 slowly
        assert ready, "the holder said nothing within 60 s"
        seized = holder.stdout.readline().strip()
        if seized == f"errno {errno.EPERM}":
            pytest.skip("this machine refuses a ptrace of a sibling's thread (Yama ptrace_scope)")
        assert seized == "held", seized
        yield
    finally:
        holder.stdin.close()
        end_process(holder)


def thread_states(pid: int) -> list:
    """(tid, name, state, kernel wait channel) of each thread of ``pid``, in the order of their tids."""
    out = []
    for task in sorted(glob.glob(f"/proc/{pid}/task/*"), key=lambda t: int(t.rsplit("/", 1)[1])):
        try:
            state = open(f"{task}/stat").read().rsplit(")", 1)[1].split()[0]
            out.append((task.rsplit("/", 1)[1], open(f"{task}/comm").read().strip(), state,
                        open(f"{task}/wchan").read()))
        except OSError:
            pass
    return out


def synthetic_log(path) -> str:
    """An interval log by construction at ``path`` (its name returned): two threads of 30 intervals,
    each alternating two blocks' code (phases 0 and 1) every 5 intervals."""
    recs, seq, t = [], 0, 1_700_000_000_000_000_000
    for thread in (11, 12):
        for i in range(30):
            key = 1000 if (i // 5) % 2 == 0 else 5000
            recs.append({"seq": seq, "thread": thread, "thread_seq": i, "instructions": 100000, "partial": False,
                         "phase": 0 if key == 1000 else 1, "start_ns": t, "end_ns": t + 1_000_000 + (i % 3) * 1000,
                         "wall_ns": 1_000_000 + (i % 3) * 1000, "os": {"cpu_ns": 900_000},
                         "blocks": [[key, 70000], [key + 7, 30000]]})
            seq += 1
            t += 1_000_000
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(path)


def log_lines(path) -> int:
    """Complete lines in a file so far (0 while it does not exist)."""
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def read_records(path) -> list:
    """Every record of a phasescope interval log, as dicts, read by the package's reader. A log
    whose last line was cut short fails the test (the reader would skip it with a warning)."""
    text = Path(path).read_text()
    assert not text or text.endswith("\n"), f"{path}: the last record is cut short"
    return [rec for _, rec in log_records(str(path))]


def check_thread_streams(records: list, summary: dict, last_shipped: bool = True) -> None:
    """Each thread's records are numbered upwards from 0, with gaps only for the records the agent
    reported dropping (``session.dropped_records``: its buffer full while the host lagged), and only a
    thread's last record may be partial. The agent ships a thread's last interval as partial even when
    it is empty (the thread had just cut a full one: agent/threads.c ps_thread_close), and the engine
    skips an empty interval, logging nothing and counting it in the summary's ``skipped_empty``: so
    each thread's stream ends with a partial record, but for at most ``skipped_empty`` of them.
    ``last_shipped`` False: the run could not ship its last intervals (the target was killed, or the
    agent did not answer its stop), so its streams may end anywhere."""
    by_thread: dict = {}
    for rec in records:
        by_thread.setdefault(rec["thread"], []).append(rec)
    missing = 0
    for tid, recs in by_thread.items():
        seqs = [r["thread_seq"] for r in recs]
        assert seqs == sorted(set(seqs)) and seqs[0] >= 0, f"thread {tid}'s records out of order"
        missing += seqs[-1] + 1 - len(seqs)
        assert not any(r["partial"] for r in recs[:-1]), f"partial interval before the end of thread {tid}"
    dropped = summary["session"]["dropped_records"]
    assert missing <= dropped, f"{missing} records missing from the threads' streams, {dropped} reported dropped"
    if not last_shipped:
        return
    skipped_empty = summary["skipped_empty"]
    unended = [tid for tid, recs in by_thread.items() if not recs[-1]["partial"]]
    assert len(unended) <= skipped_empty + dropped, (
        f"threads {unended} end without a partial record, and the engine skipped {skipped_empty} empty "
        f"intervals ({dropped} dropped)")


class Tmux:
    """A real terminal: phasescope runs in a tmux pane; tests read its screen."""

    def __init__(self, width: int, height: int, command: list):
        self.name = f"psq-{uuid.uuid4().hex[:8]}"
        self._socket_dir = tempfile.mkdtemp(prefix=self.name)
        # the shell outlives a Ctrl-C sent to the pane (trap), so that the exit status can be read
        shell = "trap : INT; " + " ".join(shlex.quote(c) for c in command) + "; echo EXIT=$?; sleep 60"
        try:
            self._tmux("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
                       "env", "-u", "COLUMNS", "-u", "LINES", "TERM=xterm-256color", "sh", "-c", shell)
        except BaseException:
            self.close()
            raise

    def _tmux(self, *args, check: bool = True) -> str:
        """One tmux command on this terminal's own server (-S): test workers that start or kill
        the shared default server at the same moment make tmux fail with "server exited
        unexpectedly" (a CI run of stop 38)."""
        r = subprocess.run(["tmux", "-S", os.path.join(self._socket_dir, "socket"), *args], capture_output=True,
                           text=True, timeout=300)
        assert not check or r.returncode == 0, f"tmux {args[0]} failed ({r.returncode}): {r.stderr.strip()}"
        return r.stdout

    def send_keys(self, *keys: str):
        """Type ``keys`` (tmux key names such as ``C-c``) into the pane."""
        self._tmux("send-keys", "-t", self.name, *keys)

    def screen(self) -> str:
        """The visible pane; -J joins lines the terminal wrapped (long paths in the final message)."""
        return self._tmux("capture-pane", "-p", "-J", "-t", self.name)

    def history(self) -> str:
        """Everything the pane printed, scrolled-off lines included (a long report pushes the
        program's own output off a 40-line screen)."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.name)

    def wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        """The screen once ``pattern`` is on it."""
        def shown():
            text = self.screen()
            return text if re.search(pattern, text) else None
        return wait_for(shown, timeout, lambda: f"{pattern!r} on screen; last screen:\n{self.screen()}", every=0.2)

    def close(self):
        self._tmux("kill-server", check=False)
        shutil.rmtree(self._socket_dir, ignore_errors=True)


@pytest.fixture
def tmux():
    sessions = []

    def start(width, height, command):
        sessions.append(Tmux(width, height, command))
        return sessions[-1]

    yield start
    for s in sessions:
        s.close()


@contextlib.contextmanager
def loopback_http_server():
    """A plain HTTP server on loopback, which is no frida-server (``-H`` at it must fail in one
    line): yields its port; killed and reaped on the way out."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening():
        with socket.socket() as c:
            return c.connect_ex(("127.0.0.1", port)) == 0
    try:
        wait_for(listening, 30, "the HTTP server")
        yield port
    finally:
        end_process(proc)
