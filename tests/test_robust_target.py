"""The traced target behaves exactly as untraced: signals, sleeping, blocking read(), setjmp/longjmp,
fork and exec; and detaching and re-attaching to the same process leaves its output unchanged."""

from __future__ import annotations

import pytest
import json
import os
import re
import signal
import subprocess

from phasescope.sources.stopped import is_stopped, stuck_helpers

from conftest import (check_thread_streams, cli_command, end_process, log_lines, read_records, run_cli,
                      thread_states, wait_for)

pytestmark = pytest.mark.slow  # every test here starts a real process


def target_lines(stdout: str, prefixes) -> list:
    return [ln for ln in stdout.splitlines() if ln.startswith(tuple(prefixes))]


def test_signals_sleep_read_longjmp_unchanged(build, tmp_path):
    exe = build("robust.c", "-pthread")
    native = subprocess.run([exe, "signals"], capture_output=True, text=True, timeout=30)
    assert native.returncode == 0
    expected = native.stdout.splitlines()
    assert "interrupted read -1 errno EINTR alarms 1" in expected and "longjmp hops 3 sigsetjmp 7" in native.stdout
    log = tmp_path / "log.jsonl"
    summary = tmp_path / "s.json"
    r = run_cli("--no-dashboard", "--interval", "1000000", "--log", str(log), "--summary", str(summary),
                "-f", exe, "signals")
    assert r.returncode == 0, r.stderr
    assert target_lines(r.stdout, {ln.split()[0] for ln in expected}) == expected
    records = read_records(log)
    assert len({rec["thread"] for rec in records}) == 2  # main and the pipe writer
    check_thread_streams(records, json.loads(summary.read_text()))


def test_attach_to_target_blocked_in_read(build, tmp_path):
    """Attach and detach while the target sits in read(): the read completes normally afterwards."""
    exe = build("robust.c", "-pthread")
    proc = subprocess.Popen([exe, "churn", "2", "10", "1000", "wait"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("ready")
        r = run_cli("--no-dashboard", "--duration", "0.5", "-p", str(proc.pid))
        assert r.returncode == 0 and "detached" in r.stderr, r.stderr
        out, _ = proc.communicate("go\nquit\n", timeout=30)
    finally:
        end_process(proc)
    assert proc.returncode == 0
    native = subprocess.run([exe, "churn", "2", "10", "1000"], capture_output=True, text=True, timeout=300).stdout
    assert out == native + "done\n"


def test_fork_and_exec_follow_the_original_process(build, tmp_path):
    exe = build("robust.c", "-pthread")
    native = subprocess.run([exe, "fork", "3"], capture_output=True, text=True, timeout=30).stdout
    log = tmp_path / "log.jsonl"
    summary = tmp_path / "s.json"
    r = run_cli("--no-dashboard", "--interval", "1000000", "--log", str(log), "--summary", str(summary),
                "-f", exe, "fork", "3", timeout=60)
    assert r.returncode == 0, r.stderr
    assert target_lines(r.stdout, ("child", "parent")) == native.splitlines()
    # phasescope says what it follows: the original process, not the child
    m = re.search(r"forked pid (\d+); following only the original process \(pid (\d+)\)", r.stderr)
    assert m, r.stderr
    records = read_records(log)
    assert {rec["thread"] for rec in records} == {int(m.group(2))}
    check_thread_streams(records, json.loads(summary.read_text()))


def test_exec_ends_tracing_with_every_interval(build, tmp_path):
    exe = build("robust.c", "-pthread")
    log, summary = tmp_path / "log.jsonl", tmp_path / "s.json"
    r = run_cli("--no-dashboard", "--interval", "1000000", "--log", str(log), "--summary", str(summary),
                "-f", exe, "exec", "10", timeout=60)
    assert r.returncode == 0, r.stderr
    assert "exec ok" in r.stdout  # the new program ran, untraced, with the same stdio
    assert "replaced its program with /bin/echo (exec)" in r.stderr
    records = read_records(log)
    s = json.loads(summary.read_text())
    assert s["end"]["how"] == "exec"
    check_thread_streams(records, s)
    # 10 units of ~0.8M instructions: all of them shipped before the image was replaced
    assert sum(rec["instructions"] for rec in records) >= 8_000_000


def test_detach_and_reattach_twice(build, tmp_path):
    exe = build("robust.c", "-pthread")
    out_path = tmp_path / "target.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen([exe, "ticker"], stdout=out)
    try:
        def ticks():
            return [int(ln.split()[1]) for ln in out_path.read_text().splitlines() if ln.startswith("tick")]

        wait_for(lambda: len(ticks()) >= 3, what="the target's first ticks")
        for attempt in range(2):
            log, summary = tmp_path / f"log{attempt}.jsonl", tmp_path / f"s{attempt}.json"
            before = len(ticks())
            r = run_cli("--no-dashboard", "--interval", "1000000", "--duration", "1", "--log", str(log),
                        "--summary", str(summary), "-p", str(proc.pid))
            assert r.returncode == 0, r.stderr
            assert f"(pid {proc.pid}) detached" in r.stderr
            records = read_records(log)
            assert len(records) >= 3
            check_thread_streams(records, json.loads(summary.read_text()))
            assert len(ticks()) > before, "the target did not tick while traced"
        seen = len(ticks())
        # seen once in a while (1 in ~20 full runs): say where each of the target's threads is
        wait_for(lambda: len(ticks()) >= seen + 10, 30,
                 lambda: (f"the target to tick on after the second detach; its threads: {thread_states(proc.pid)}; "
                          f"phasescope said:\n{r.stderr[-2000:]}"))
        assert proc.poll() is None
    finally:
        end_process(proc)
    # The target's own output is unchanged: one line per tick, numbered without gaps or repeats.
    lines = out_path.read_text().splitlines()
    assert lines[0] == f"ready {proc.pid}"
    complete = lines[1:-1]  # the last line may be cut by the kill
    assert complete == [f"tick {i}" for i in range(len(complete))]


def test_target_stopped_while_detaching(build, tmp_path):
    """A target the user stopped (SIGSTOP) cannot unload the agent: phasescope lets it run until the
    agent is out, stops it again, says so in one line and keeps every interval; no Frida helper is
    left behind; the target, continued, runs on."""
    exe = build("robust.c", "-pthread")
    out_path = tmp_path / "target.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen([exe, "ticker"], stdout=out)
    log, summary = tmp_path / "log.jsonl", tmp_path / "s.json"
    try:
        wait_for(lambda: out_path.read_text().count("tick") >= 3, what="the target's first ticks")
        report = tmp_path / "report.txt"
        mon = subprocess.Popen(cli_command("--no-dashboard", "--interval", "1000000", "--log", str(log),
                                           "--summary", str(summary), "-o", str(report), "-p", str(proc.pid)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: log_lines(log) >= 5, 60, "the first intervals")
            os.kill(proc.pid, signal.SIGSTOP)
            wait_for(lambda: is_stopped(proc.pid), 10, "the target to stop")
            mon.send_signal(signal.SIGINT)
            _, stderr = mon.communicate(timeout=60)
        finally:
            end_process(mon)
        assert mon.returncode == 0, stderr
        assert not stderr.strip(), stderr  # with -o, phasescope's own lines all went to the file
        last = report.read_text().strip().splitlines()[-1]
        assert "stopped by SIGINT" in last and "is stopped again" in last, last
        assert is_stopped(proc.pid), thread_states(proc.pid)
        assert stuck_helpers(proc.pid) == []
        s = json.loads(summary.read_text())
        records = read_records(log)
        check_thread_streams(records, s)  # the agent unloaded: every last interval came
        assert s["whole"]["intervals"] == len(records)
        ticks = out_path.read_text().count("tick")
        os.kill(proc.pid, signal.SIGCONT)
        wait_for(lambda: out_path.read_text().count("tick") >= ticks + 5, 60, "the target to run on after SIGCONT")
    finally:
        end_process(proc)
