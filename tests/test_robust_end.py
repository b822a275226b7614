"""How the target ends: exits 0, exits non-zero, is killed (SIGKILL, SIGINT), crashes (SIGSEGV) mid-interval.

Each run goes through the real CLI against a real process: phasescope must say how the target
ended in one line, log every interval it shipped with contiguous per-thread sequence numbers,
write a complete summary that agrees with the log, and exit 0 / 1 / 3.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import check_thread_streams, cli_command, end_process, log_lines, read_records, run_cli, wait_for

pytestmark = pytest.mark.slow  # every test here starts a real process

INTERVAL = 1_000_000


def check_log(records, summary):
    """The log is complete and consistent with the summary: each thread's stream is whole and ends
    with its partial interval (but when the target was killed: it had no chance to ship that), every
    interval but each thread's last is full length, totals match the summary."""
    assert records, "no intervals logged"
    check_thread_streams(records, summary, last_shipped=summary["end"]["how"] != "killed")
    assert all(INTERVAL <= r["instructions"] < INTERVAL + 1000 for r in records if not r["partial"])
    by_thread = {}
    for rec in records:
        by_thread.setdefault(rec["thread"], []).append(rec)
    assert [r["seq"] for r in records] == list(range(len(records)))
    assert summary["whole"]["intervals"] == len(records)
    assert summary["whole"]["instructions"] == sum(r["instructions"] for r in records)
    return by_thread


def connector_allowed() -> bool:
    """Whether this process may read the kernel's process connector (exact mode's exit status)."""
    from phasescope.sources.exit_status import connector
    sock = connector()
    if sock is not None:
        sock.close()
    return sock is not None


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
def test_no_connector_outside_the_initial_pid_namespace():
    """In a pid namespace of its own (a container sharing the host's network, ``unshare -pf``) the
    kernel ignores a process-connector subscription silently, and its pids are not ours: exact
    mode once waited 1 s at each end for events that never came, and never peeked at the zombie."""
    probe = ("from phasescope.sources.exit_status import connector; s = connector(); "
             "print('none' if s is None else 'socket')")
    out = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", probe],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0 and "unshare" in out.stderr:
        pytest.skip(f"no pid namespace here: {out.stderr.strip()}")
    assert out.stdout.strip() == "none", out.stdout + out.stderr


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("setpriv"), reason="needs setpriv(1)")
def test_without_the_connector_a_kill_is_never_called_a_crash(tmp_path):
    """Without CAP_NET_ADMIN (dropped here; any user but root) exact mode peeks at the zombie. Frida's
    injector ptraces the target from a thread of phasescope's process, so the peek (waitid) was
    answered by the injector's SIGSEGV trap stop at spawn: a target killed later was 'crashed (SIGSEGV)'."""
    summary = tmp_path / "s.json"
    out = subprocess.run(["setpriv", "--bounding-set", "-net_admin", "--inh-caps", "-net_admin",
                          *cli_command("--no-dashboard", "--summary", str(summary), "-f", "/bin/sh", "--", "-c", "kill -KILL $$")],
                         capture_output=True, text=True, timeout=120)
    end = json.loads(summary.read_text())["end"]
    assert out.returncode == 3 and end["how"] == "killed" and end["signal"] in ("SIGKILL", None), (end, out.stderr)


def one_line_end(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("phasescope")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("code, expect_rc", [(0, 0), (3, 1)])
def test_target_exits(build, tmp_path, code, expect_rc):
    exe = build("robust.c", "-pthread")
    native = subprocess.run([exe, "exit", "40", str(code)], capture_output=True, text=True, timeout=300)
    assert native.returncode == code
    log, summary = tmp_path / "log.jsonl", tmp_path / "s.json"
    r = run_cli("--no-dashboard", "--interval", str(INTERVAL), "--log", str(log), "--summary", str(summary),
                "-f", exe, "exit", "40", str(code))
    assert r.returncode == expect_rc, r.stderr
    assert f"exited with code {code}" in one_line_end(r.stderr)
    assert native.stdout in r.stdout  # the target's own output, unchanged
    s = json.loads(summary.read_text())
    assert s["end"] == {"how": "exited", "code": code, "signal": None, "reason": None}
    by_thread = check_log(read_records(log), s)
    (recs,) = by_thread.values()
    # 40 units of ~0.8M instructions: every one of them is in the log, the last interval is partial.
    assert recs[-1]["partial"] and len(recs) >= 30


def test_target_crashes_mid_interval(build, tmp_path):
    exe = build("robust.c", "-pthread")
    log, summary = tmp_path / "log.jsonl", tmp_path / "s.json"
    r = run_cli("--no-dashboard", "--interval", str(INTERVAL), "--log", str(log), "--summary", str(summary),
                "-f", exe, "segv", "40")
    assert r.returncode == 3, r.stderr
    assert "crashed (SIGSEGV)" in one_line_end(r.stderr)
    s = json.loads(summary.read_text())
    assert s["end"]["how"] == "crashed" and s["end"]["signal"] == "SIGSEGV"
    crash = check_log(read_records(log), s)
    # The same work ending in exit(0) instead: the crashed run lost none of it, and its last,
    # partial interval holds the instructions run after the last full one, up to the fault.
    log0, summary0 = tmp_path / "log0.jsonl", tmp_path / "s0.json"
    r0 = run_cli("--no-dashboard", "--interval", str(INTERVAL), "--log", str(log0), "--summary", str(summary0),
                 "-f", exe, "exit", "40", "0")
    assert r0.returncode == 0, r0.stderr
    clean = check_log(read_records(log0), json.loads(summary0.read_text()))
    (crashed,), (exited,) = crash.values(), clean.values()
    assert crashed[-1]["partial"]
    assert sum(r["instructions"] for r in crashed) > sum(r["instructions"] for r in exited)
    assert len(crashed) >= len(exited)


@pytest.mark.parametrize("how", ["spawn", "attach"])
def test_target_killed(build, tmp_path, how):
    exe = build("robust.c", "-pthread")
    log, summary = tmp_path / "log.jsonl", tmp_path / "s.json"
    target = None
    if how == "spawn":
        args = ["-f", exe, "spin"]
    else:
        target = subprocess.Popen([exe, "spin"], stdout=subprocess.PIPE)
        assert target.stdout.readline().startswith(b"ready")
        args = ["-p", str(target.pid)]
    mon = subprocess.Popen(cli_command("--no-dashboard", "--interval", str(INTERVAL), "--log", str(log),
                                       "--summary", str(summary), *args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if target is None:
            line = mon.stdout.readline()
            assert line.startswith("ready"), line
            pid = int(line.split()[1])
        else:
            pid = target.pid
        wait_for(lambda: log_lines(log) >= 20, what="20 intervals logged")
        os.kill(pid, signal.SIGKILL)
        stdout, stderr = mon.communicate(timeout=30)
    finally:
        if mon.poll() is None:
            mon.kill()
        if target is not None:
            end_process(target)
    assert mon.returncode == 3, stderr
    assert "killed" in one_line_end(stderr)
    s = json.loads(summary.read_text())
    assert s["end"]["how"] == "killed"
    if how == "spawn" and connector_allowed():  # Frida reaps it; the kernel's exit event has its status
        assert s["end"]["signal"] == "SIGKILL"
    check_log(read_records(log), s)


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_a_spawned_target_killed_by_sigint_is_said_so_in_both_modes(build, tmp_path, mode):
    """kill -INT on the target itself (not Ctrl-C to phasescope): its wait status says SIGINT, and
    both modes' summaries and end lines say so (exact mode once said signal None)."""
    if mode == "exact" and not connector_allowed():
        pytest.skip("without CAP_NET_ADMIN exact mode learns the signal only if it wins a race with Frida")
    summary = tmp_path / "s.json"
    mon = subprocess.Popen(cli_command("--no-dashboard", "--mode", mode, "--summary", str(summary),
                                       "-f", build("robust.c", "-pthread"), "spin"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = mon.stdout.readline()
        assert line.startswith("ready"), line
        os.kill(int(line.split()[1]), signal.SIGINT)
        stdout, stderr = mon.communicate(timeout=60)
    finally:
        end_process(mon)
    assert mon.returncode == 3, stderr
    assert one_line_end(stderr).endswith("killed by SIGINT"), stderr
    end = json.loads(summary.read_text())["end"]
    assert (end["how"], end["signal"], end["code"]) == ("killed", "SIGINT", None)


def test_a_slow_final_ack_leaves_the_exiting_thread_its_counters(build):
    """The exiting thread waits in the agent's exit hook for the host's final-ack, then runs exit()
    (stdio flush, atexit) still in Stalker's code, counting into its region. A host slower than the
    5 s an exited thread's region is otherwise kept once let that region be freed first: SIGSEGV in
    exit(), the target's buffered output lost, yet "exited with code 0" reported."""
    import time
    from agent_support import collect
    from phasescope.sources.device import resolve_device, resolve_target
    from phasescope.sources.session import TraceSession
    exe = build("locality_phases.c", "-O2")
    native = subprocess.run([exe, "1", "200000"], capture_output=True, check=True, timeout=300).stdout
    device = resolve_device()
    session = TraceSession(device, resolve_target(device, argv=[exe, "1", "200000"]), interval=1_000_000,
                           stdio="pipe")
    session.start()
    session.before_final_ack = lambda: time.sleep(6.5)  # past the 5 s a retired region is kept
    trace = collect(session, timeout=60)
    assert trace.ended is not None and trace.ended.how == "exited" and trace.ended.code == 0
    assert trace.output.get(1, b"") == native
    assert wait_for(lambda: session.pid is None or not os.path.exists(f"/proc/{session.pid}") or
                    open(f"/proc/{session.pid}/stat").read().split(") ")[1][0] == "Z", 10,
                    "the target did not finish exiting")


@pytest.mark.parametrize("how", ["default", "handle", "siginfo", "ignore", "ignore-fault"])
def test_a_sigsegv_sent_to_a_traced_target_does_what_it_does_untraced(build, tmp_path, how):
    """``kill -SEGV`` while exact mode traces the target: Frida's handler took it as a fault and,
    finding no handler of the program's, put SIG_DFL back and returned, so the target ran on (and
    the agent had already said it crashed). Now it dies of it (``killed by SIGSEGV``, exit 3), as
    untraced, and a program with a handler of its own gets it as untraced. Frida keeps a SIG_IGN
    set before the attach as SIG_DFL (the sent signal killed ``ignore``): the host reads it before
    and the agent gives it back; a real fault of an ignored SIGSEGV then kills, as untraced."""
    exe, log = build("robust.c", "-pthread"), tmp_path / "log.jsonl"
    target = subprocess.Popen([exe, "spin"] if how == "default" else [exe, "sent", how], stdout=subprocess.PIPE,
                              text=True)
    mon = None
    try:
        assert target.stdout.readline().startswith("ready")
        mon = subprocess.Popen(cli_command("--no-dashboard", "--interval", str(INTERVAL), "--log", str(log),
                                           "-p", str(target.pid)),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: log_lines(log) >= 5, 120, "5 intervals logged")
        os.kill(target.pid, signal.SIGSEGV)
        time.sleep(1)
        if how.startswith("ignore"):
            os.kill(target.pid, signal.SIGUSR1)
        status = target.wait(timeout=60)
        stdout, stderr = mon.communicate(timeout=60)
    finally:
        for p in (mon, target):
            if p is not None:
                end_process(p)
    rest = target.stdout.read()
    handled = (7, "caught\n", 1, "exited with code 7")
    want = {"default": (-signal.SIGSEGV, "", 3, "killed by SIGSEGV"), "ignore": (0, "survived\n", 0, "exited with code 0"),
            "handle": handled, "siginfo": handled, "ignore-fault": (-signal.SIGSEGV, "", 3, "crashed (SIGSEGV)")}[how]
    assert (status, rest, mon.returncode) == want[:3], stderr
    assert one_line_end(stderr).endswith(want[3]), stderr


def test_a_program_that_raises_sigsegv_dies_of_it_traced(build):
    """raise(SIGSEGV) at SIG_DFL is sent, not a fault: nothing raises it again once Frida's handler
    returns, and the traced program printed 'survived' and exited 0 (untraced: SIGSEGV)."""
    r = run_cli("--no-dashboard", "-f", build("robust.c", "-pthread"), "sent", "raise", timeout=120)
    assert r.returncode == 3 and "survived" not in r.stdout, (r.stdout, r.stderr)
    assert one_line_end(r.stderr).endswith("crashed (SIGSEGV)"), r.stderr


def test_a_sigsegv_sent_while_every_program_thread_blocks_it_reaches_its_sigwaitinfo(build):
    """Every thread of the program blocks SIGSEGV and one takes it with sigwaitinfo: the kernel gave
    ``kill -SEGV`` to one of Frida's threads, where it was lost and the program ran on. (Attached, see
    the test below.)"""
    mon = subprocess.Popen(cli_command("--no-dashboard", "-f", build("robust.c", "-pthread"), "sent", "wait"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        os.kill(int(mon.stdout.readline().split()[1]), signal.SIGSEGV)
        stdout, stderr = mon.communicate(timeout=60)
    finally:
        end_process(mon)
    assert (mon.returncode, stdout) == (0, "waited 11\n"), stderr


def _blocked(pid: int) -> str:
    with open(f"/proc/{pid}/status") as f:
        return next(line.split()[1] for line in f if line.startswith("SigBlk:"))


def test_an_attach_and_its_detach_leave_the_main_threads_signal_mask_as_it_was(build):
    """Frida's injection, and its unload after the detach, cleared the signal mask of a main thread
    asleep in ``pthread_join`` (SigBlk 0x400 -> 0), for good: a ``kill -SEGV`` meant for the
    ``sigwaitinfo`` thread then killed the program (stop 47). The host gives it back."""
    target = subprocess.Popen([build("robust.c", "-pthread"), "sent", "wait-join"], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(target.stdout.readline().split()[1])
        time.sleep(0.2)  # main is in pthread_join
        before = _blocked(pid)
        r = run_cli("--no-dashboard", "-p", str(pid), "--duration", "1", "-o", "/dev/null", timeout=60)
        assert r.returncode == 0, r.stderr
        assert (before, _blocked(pid)) == ("0000000000000400",) * 2
        os.kill(pid, signal.SIGSEGV)
        stdout, _ = target.communicate(timeout=30)
    finally:
        end_process(target)
    assert (target.returncode, stdout) == (0, "waited 11\n")


def test_a_fault_a_spawned_program_ignores_kills_it(build):
    """A program that ignores SIGSEGV and then faults dies of it (the kernel puts SIG_DFL back for a
    fault). Traced, Frida's handler found SIG_IGN, returned, and the instruction faulted again,
    forever: phasescope said ``crashed`` and the target spun. The sent SIGSEGV before is ignored."""
    mon = subprocess.Popen(cli_command("--no-dashboard", "-f", build("robust.c", "-pthread"), "sent", "ignore-fault"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = int(mon.stdout.readline().split()[1])
        os.kill(pid, signal.SIGSEGV)
        time.sleep(1)
        os.kill(pid, signal.SIGUSR1)
        stdout, stderr = mon.communicate(timeout=60)
    finally:
        end_process(mon)
    assert mon.returncode == 3 and "survived" not in stdout, (stdout, stderr)
    assert one_line_end(stderr).endswith("crashed (SIGSEGV)"), stderr
