"""A target's life around phasescope: stopped (SIGSTOP) before the attach or during the detach,
killed while stopped, forking while traced, attached and detached again and again. Short versions
of bench/lifecycle.py's stress loops (which run them hundreds of times under CPU hogs)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

import pytest

from phasescope.sources.stopped import end_stuck_helpers, is_stopped, stuck_helpers, tracer

from conftest import cli_command, end_process, log_lines, run_cli, thread_states, wait_for

pytestmark = pytest.mark.slow

PTRACE_ATTACH, PTRACE_DETACH, WALL = 16, 17, 0x40000000


def start_workers(build, *args) -> subprocess.Popen:
    proc = subprocess.Popen([build("workers3.c", "-pthread"), *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("ready")
    return proc


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_attach_to_a_stopped_target_leaves_it_stopped(build, mode):
    """As strace -p and perf -p: nothing is traced while the target is stopped, and it stays so."""
    target = start_workers(build, "tick")
    try:
        os.kill(target.pid, signal.SIGSTOP)
        wait_for(lambda: is_stopped(target.pid), 10, "the target to stop")
        r = run_cli("--mode", mode, "--no-dashboard", "--duration", "2", "-p", str(target.pid), timeout=90)
        assert r.returncode == 0, r.stderr
        lines = r.stderr.strip().splitlines()
        assert f"pid {target.pid} is stopped; tracing starts when it continues" in lines[0], lines
        assert "stayed stopped; nothing traced (--duration 2s reached)" in lines[-1], lines
        assert is_stopped(target.pid)
    finally:
        end_process(target)


def test_a_stopped_target_is_traced_once_continued(build, tmp_path):
    target = start_workers(build, "tick")
    log = tmp_path / "log.jsonl"
    try:
        os.kill(target.pid, signal.SIGSTOP)
        wait_for(lambda: is_stopped(target.pid), 10, "the target to stop")
        mon = subprocess.Popen(cli_command("--no-dashboard", "--interval", "1000000", "--log", str(log),
                                           "--duration", "30", "-p", str(target.pid)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            line = mon.stderr.readline()
            assert "is stopped; tracing starts when it continues" in line, line
            assert is_stopped(target.pid) and log_lines(log) == 0
            os.kill(target.pid, signal.SIGCONT)
            wait_for(lambda: log_lines(log) >= 5, 60, "intervals once the target runs")
            mon.send_signal(signal.SIGINT)
            _, stderr = mon.communicate(timeout=60)
        finally:
            end_process(mon)
        assert mon.returncode == 0, stderr
        assert not is_stopped(target.pid) and target.poll() is None
    finally:
        end_process(target)


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_a_target_stopped_while_traced_is_said_to_be_stopped(build, mode):
    """The status said "tracing" while the target sat stopped and nothing came (stop 47); it says
    so, and "tracing" again once the target continues."""
    target = start_workers(build, "tick")
    try:
        mon = subprocess.Popen(cli_command("--mode", mode, "--no-dashboard", "--status-every", "0.3", "--duration", "60",
                                           "-p", str(target.pid)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            def line_with(text: str) -> str:
                for line in mon.stderr:
                    if text in line:
                        return line
                raise AssertionError(f"no line with {text!r}")
            line_with("] tracing:")
            os.kill(target.pid, signal.SIGSTOP)
            assert f"] target stopped (kill -CONT {target.pid} continues it):" in line_with("target stopped")
            os.kill(target.pid, signal.SIGCONT)
            line_with("] tracing:")
            mon.send_signal(signal.SIGINT)
            mon.communicate(timeout=60)
        finally:
            end_process(mon)
        assert mon.returncode == 0
    finally:
        end_process(target)


def test_a_stop_counts_while_a_tracer_holds_the_main_thread(build):
    """What the detach sees when a SIGSTOP lands while Frida's helper holds the main thread: that
    thread in ptrace stop (``t``), the rest stopped (``T``). Here this test is the tracer."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    target = start_workers(build, "tick")
    try:
        assert libc.ptrace(PTRACE_ATTACH, target.pid, None, None) == 0, os.strerror(ctypes.get_errno())
        try:
            os.waitpid(target.pid, WALL)  # the attach's stop
            os.kill(target.pid, signal.SIGSTOP)
            states = lambda: [state for _, _, state, _ in thread_states(target.pid)]  # noqa: E731
            wait_for(lambda: states()[1:] and set(states()[1:]) == {"T"}, 10,
                     lambda: f"the other threads to stop: {thread_states(target.pid)}")
            assert states()[0] == "t"  # the main thread, lowest tid
            assert is_stopped(target.pid)
        finally:
            libc.ptrace(PTRACE_DETACH, target.pid, None, None)
    finally:
        end_process(target)


@pytest.mark.parametrize("when", ["before", "during", "helper"])
def test_stopped_around_the_detach_then_killed_is_reaped(build, tmp_path, when):
    """Stopped before or during the detach, then killed while stopped: no Frida helper is left
    tracing it, and its parent (this test) reaps it. ``helper``: stopped while Frida's helper holds
    its main thread (the detach sends the hot loop's thread through Stalker's dispatcher): the
    main thread's state is then ``t``, not ``T``, and the target was never continued (a race that
    the 50 ms of ``during`` hit now and then)."""
    target = start_workers(build, "tick")
    log = tmp_path / "log.jsonl"
    try:
        mon = subprocess.Popen(cli_command("--no-dashboard", "--interval", "1000000", "--log", str(log),
                                           "-p", str(target.pid)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: log_lines(log) >= 5, 60, "the first intervals")
            if when == "before":
                os.kill(target.pid, signal.SIGSTOP)
                mon.send_signal(signal.SIGINT)
            elif when == "during":
                mon.send_signal(signal.SIGINT)
                time.sleep(0.05)
                os.kill(target.pid, signal.SIGSTOP)
            else:
                mon.send_signal(signal.SIGINT)
                wait_for(lambda: tracer(f"/proc/{target.pid}/status"), 30, "a helper to trace the main thread", every=0)
                os.kill(target.pid, signal.SIGSTOP)
            _, stderr = mon.communicate(timeout=60)
        finally:
            end_process(mon)
        assert mon.returncode == 0, stderr
        if when != "during":  # 50 ms in, the agent may already be out (nothing to continue it for)
            assert "is stopped again" in stderr.strip().splitlines()[-1], stderr
        wait_for(lambda: is_stopped(target.pid), 10, "the target to stay stopped")
        assert stuck_helpers(target.pid) == []
    finally:
        end_process(target)  # fails the test if the killed target cannot be reaped


def test_forks_of_a_threaded_target_never_hang(build):
    """A forked child runs none of the agent's JavaScript: a lock another thread held at fork()
    cannot hang it (the workers keep the agent busy)."""
    r = run_cli("--no-dashboard", "-f", build("workers3.c", "-pthread"), "fork", "60", timeout=180)
    assert r.returncode == 0, r.stderr
    assert "exited with code 0" in r.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_attach_detach_cycles_leave_the_target_running(build, mode):
    target = start_workers(build, "tick")
    try:
        for _ in range(3):
            r = run_cli("--mode", mode, "--no-dashboard", "--duration", "1", "-p", str(target.pid), timeout=90)
            assert r.returncode == 0, r.stderr
            assert target.poll() is None, f"target ended ({target.returncode}):\n{r.stderr[-2000:]}"
        seen = target.stdout.readline()
        assert seen.startswith("tick"), seen
    finally:
        end_process(target)


def test_a_helper_left_behind_a_dead_target_is_ended(tmp_path):
    # Frida's ptrace helper, blocked for good when its target died while the agent followed a thread
    # by id (a JVM's late follow at exit: the java -version hang of issue 32), is an orphan of one
    # thread that maps frida's agent; it keeps the dead target's end from phasescope. Stand-in: a
    # python3 mapping a file of that name, its parent gone.
    agent, pid_file = tmp_path / "frida-agent-64.so", tmp_path / "pid"
    agent.write_bytes(b"\0" * 4096)
    code = (f"import mmap, os, time; f = open({str(agent)!r}, 'rb'); m = mmap.mmap(f.fileno(), 4096, "
            "prot=mmap.PROT_READ); print(os.getpid(), flush=True); time.sleep(60)")
    shell = f'"$0" -c "$1" > {pid_file} 2>/dev/null < /dev/null & echo $$'  # the stand-in outlives its shell
    parent = subprocess.run(["sh", "-c", shell, sys.executable, code], capture_output=True, text=True, timeout=30)
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 20)
    orphan = int(pid_file.read_text())
    try:
        assert end_stuck_helpers(os.getpid(), orphans_of=os.getsid(0)) == []  # its target lives: nothing ended
        assert end_stuck_helpers(int(parent.stdout), orphans_of=int(parent.stdout)) == []  # another session's
        assert orphan in end_stuck_helpers(int(parent.stdout), orphans_of=os.getsid(0))
        wait_for(lambda: not os.path.exists(f"/proc/{orphan}") or _zombie(orphan), 10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(orphan, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"
