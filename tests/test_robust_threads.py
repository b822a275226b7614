"""Thread churn: a traced target creates and joins hundreds of short threads.

No crash, no leak of followed-thread state (host bookkeeping, agent regions and Stalker contexts),
and every thread's instructions accounted for: each worker runs the same code, so each must show
the same instruction count, in intervals numbered 0..n-1.
"""

from __future__ import annotations

import pytest
import collections
import json
import subprocess
import time

from conftest import end_process, read_records, run_cli
from phasescope.sources.session import TraceSession
from phasescope.sources.events import Ended, IntervalEvent, ThreadExited, ThreadStarted
from phasescope.sources.device import resolve_device, resolve_target

pytestmark = pytest.mark.slow  # every test here starts a real process

ROUNDS, PER_ROUND, ITERATIONS = 6, 100, 20000


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))


def test_churn_no_leak_every_thread_counted(build):
    exe = build("robust.c", "-pthread")
    args = ["churn", str(ROUNDS), str(PER_ROUND), str(ITERATIONS)]
    native = subprocess.run([exe, *args], capture_output=True, text=True, check=True, timeout=300).stdout
    proc = subprocess.Popen([exe, *args, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    intervals = collections.defaultdict(list)
    started, exited = set(), set()
    try:
        assert proc.stdout.readline().startswith("ready")
        device = resolve_device()
        session = TraceSession(device, resolve_target(device, pid=proc.pid), interval=1_000_000)
        session.start()
        main = set(session.threads)
        assert len(main) == 1
        baseline = rss_kb(proc.pid)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out = []
        while not out or out[-1] != "done\n":
            out.append(proc.stdout.readline())
            assert out[-1], f"target ended early: exit status {proc.wait(timeout=30)} after {out[:-1]}"
        assert "".join(out[:-1]) == native  # unchanged under tracing

        def consume(ev):
            if isinstance(ev, IntervalEvent):
                intervals[ev.interval.thread].append(ev.interval)
            elif isinstance(ev, ThreadStarted):
                started.add(ev.tid)
            elif isinstance(ev, ThreadExited):
                exited.add(ev.tid)

        # Every worker is gone: the host's view of followed threads is back to the main thread,
        # and the target's memory returns near its traced baseline (each worker's region and
        # Stalker context are freed once it exits).
        deadline = time.monotonic() + 20
        peak = 0
        for ev in session.events(timeout=0.05):
            consume(ev)
            peak = max(peak, rss_kb(proc.pid))
            if session.threads == main and rss_kb(proc.pid) < baseline + 40_000:
                break
            assert time.monotonic() < deadline, (
                f"followed {len(session.threads)} threads, RSS {rss_kb(proc.pid)} kB from {baseline} kB")
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        for ev in session.events(timeout=1.0):
            consume(ev)
            if isinstance(ev, Ended):
                assert ev.how == "exited" and ev.code == 0, ev
            assert time.monotonic() < deadline + 20, "no end"
        session.stop()
        assert proc.wait(timeout=30) == 0
    finally:
        end_process(proc)

    workers = set(intervals) - main
    assert len(workers) == ROUNDS * PER_ROUND
    assert workers <= started and workers <= exited
    totals = []
    for tid in workers:
        ivs = intervals[tid]
        assert [i.seq for i in ivs] == list(range(len(ivs)))
        assert ivs[-1].partial
        assert sum(i.instructions for i in ivs) == sum(int(i.counts.sum()) for i in ivs)
        totals.append(sum(i.instructions for i in ivs))
    # Identical work per thread: identical counts, to within the few instructions of a lock's
    # contended path; and at least the unit loop itself (>= 8 instructions per iteration).
    assert max(totals) - min(totals) <= 64, (min(totals), max(totals))
    assert min(totals) >= 8 * ITERATIONS


def test_churn_through_cli(build, tmp_path):
    exe = build("robust.c", "-pthread")
    log, summary = tmp_path / "log.jsonl", tmp_path / "s.json"
    r = run_cli("--no-dashboard", "--interval", "1000000", "--log", str(log), "--summary", str(summary),
                "-f", exe, "churn", "3", "100", str(ITERATIONS))
    assert r.returncode == 0, r.stderr
    assert "churn 300 threads" in r.stdout
    records = read_records(log)
    s = json.loads(summary.read_text())
    per_thread = collections.defaultdict(list)
    for rec in records:
        per_thread[rec["thread"]].append(rec["thread_seq"])
    # 281 of 301 once, in a CI run on a heavily loaded machine (cause unknown): say what was seen
    assert len(per_thread) == 301, (len(per_thread), s["session"], s.get("end"), r.stderr[-2000:])
    assert all(seqs == list(range(len(seqs))) for seqs in per_thread.values())
    assert s["whole"]["instructions"] == sum(rec["instructions"] for rec in records)
    assert s["session"]["threads_followed"] == 0  # every thread closed at exit
