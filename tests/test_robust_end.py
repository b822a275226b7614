"""How the target ends: exits 0, exits non-zero, is killed (SIGKILL), crashes (SIGSEGV) mid-interval.

Each run goes through the real CLI against a real process: phasescope must say how the target
ended in one line, log every interval it shipped with contiguous per-thread sequence numbers,
write a complete summary that agrees with the log, and exit 0 / 1 / 3.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import cli_command, run_cli

INTERVAL = 1_000_000


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def check_log(records, summary):
    """The log is complete and consistent with the summary: per-thread thread_seq runs 0..n-1,
    every interval but each thread's last is full length, totals match the summary."""
    assert records, "no intervals logged"
    by_thread = {}
    for rec in records:
        by_thread.setdefault(rec["thread"], []).append(rec)
    for tid, recs in by_thread.items():
        assert [r["thread_seq"] for r in recs] == list(range(len(recs))), f"gap in thread {tid}"
        assert all(INTERVAL <= r["instructions"] < INTERVAL + 1000 for r in recs if not r["partial"])
        assert not any(r["partial"] for r in recs[:-1]), f"partial interval before the end of thread {tid}"
    assert [r["seq"] for r in records] == list(range(len(records)))
    assert summary["whole"]["intervals"] == len(records)
    assert summary["whole"]["instructions"] == sum(r["instructions"] for r in records)
    return by_thread


def one_line_end(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("phasescope")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("code, expect_rc", [(0, 0), (3, 1)])
def test_target_exits(build, tmp_path, code, expect_rc):
    exe = build("robust.c", "-pthread")
    native = subprocess.run([exe, "exit", "40", str(code)], capture_output=True, text=True)
    assert native.returncode == code
    log, summary = tmp_path / "log.jsonl", tmp_path / "s.json"
    r = run_cli("--no-dashboard", "--interval", str(INTERVAL), "--log", str(log), "--summary", str(summary),
                "-f", exe, "exit", "40", str(code))
    assert r.returncode == expect_rc, r.stderr
    assert f"exited with code {code}" in one_line_end(r.stderr)
    assert native.stdout in r.stdout  # the target's own output, unchanged
    s = json.loads(summary.read_text())
    assert s["end"] == {"how": "exited", "code": code, "signal": None, "reason": None}
    by_thread = check_log(read_log(log), s)
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
    crash = check_log(read_log(log), s)
    # The same work ending in exit(0) instead: the crashed run lost none of it, and its last,
    # partial interval holds the instructions run after the last full one, up to the fault.
    log0, summary0 = tmp_path / "log0.jsonl", tmp_path / "s0.json"
    r0 = run_cli("--no-dashboard", "--interval", str(INTERVAL), "--log", str(log0), "--summary", str(summary0),
                 "-f", exe, "exit", "40", "0")
    assert r0.returncode == 0, r0.stderr
    clean = check_log(read_log(log0), json.loads(summary0.read_text()))
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
        end = time.monotonic() + 30
        while not (log.exists() and log.read_text().count("\n") >= 20):
            assert time.monotonic() < end, "no intervals logged"
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        stdout, stderr = mon.communicate(timeout=30)
    finally:
        if mon.poll() is None:
            mon.kill()
        if target is not None:
            target.kill()
            target.wait()
    assert mon.returncode == 3, stderr
    assert "killed" in one_line_end(stderr)
    s = json.loads(summary.read_text())
    assert s["end"]["how"] == "killed"
    check_log(read_log(log), s)
