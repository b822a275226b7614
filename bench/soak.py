#!/usr/bin/env python3
"""Soak: trace a full-speed target for a long time and check that nothing grows or goes missing.

    python3 bench/soak.py --minutes 10 [--interval N] [--threads K] [--checkpoints 1,5,10]

Builds tests/programs/phased.c (or bench/many_threads.c-style churn via tests/programs/robust.c
with --churn), runs ``phasescope --no-dashboard --log ... --summary ... --duration`` on it, samples
the peak RSS (VmHWM is per process lifetime; the current VmRSS is also sampled each second) of the
host (phasescope) and of the target (which carries the agent) and prints them at each checkpoint;
at the end checks that every thread's ``thread_seq`` in the log is contiguous from 0, that the log
and summary agree, and that nothing was dropped. Exit status 0 when every check passes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def status_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list:
    """Children of any thread of ``pid`` (Frida spawns from one of its own threads)."""
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--checkpoints", default="1,5,10", help="minutes at which to report peak RSS")
    p.add_argument("--interval", type=int, default=10_000_000)
    p.add_argument("--churn", action="store_true", help="target creates and joins short threads all along")
    p.add_argument("--out", help="directory for the log and summary (default: a temporary one)")
    args = p.parse_args()

    out = Path(args.out or tempfile.mkdtemp(prefix="phasescope-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.churn:
        exe = out / "robust"
        subprocess.run(["cc", "-O1", "-g", "-pthread", "-o", str(exe), str(ROOT / "tests/programs/robust.c")], check=True)
        target = [str(exe), "churn", "1000000", "8", "200000"]
    else:
        exe = out / "phased"
        subprocess.run(["cc", "-O1", "-g", "-o", str(exe), str(ROOT / "tests/programs/phased.c")], check=True)
        target = [str(exe), "0", "2"]
    log, summary = out / "log.jsonl", out / "summary.json"
    duration = args.minutes * 60
    cmd = [sys.executable, "-m", "phasescope.cli", "--no-dashboard", "--status-every", "60",
           "--interval", str(args.interval), "--log", str(log), "--summary", str(summary),
           "--duration", str(duration), "-f", *target]
    print("soak:", " ".join(cmd), flush=True)
    started = time.monotonic()
    # stderr to a file: the spawned target inherits it and outlives phasescope (detached at the end),
    # so a pipe would never reach EOF
    err_path = out / "phasescope.stderr"
    err_file = open(err_path, "w")
    host = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_file, text=True)
    checkpoints = sorted(float(x) for x in args.checkpoints.split(",") if float(x) <= args.minutes)
    peak = {"host": 0, "target": 0}
    target_pid = None
    report = []
    while host.poll() is None:
        if target_pid is None:
            kids = children(host.pid)
            target_pid = kids[0] if kids else None
        peak["host"] = max(peak["host"], status_kb(host.pid, "VmHWM"), status_kb(host.pid, "VmRSS"))
        if target_pid is not None:
            peak["target"] = max(peak["target"], status_kb(target_pid, "VmHWM"), status_kb(target_pid, "VmRSS"))
        minutes = (time.monotonic() - started) / 60
        while checkpoints and minutes >= checkpoints[0]:
            lines = log.read_text().count("\n") if log.exists() else 0
            row = (checkpoints.pop(0), peak["host"] / 1024, peak["target"] / 1024, lines)
            report.append(row)
            print(f"[{row[0]:g} min] peak RSS host {row[1]:.1f} MiB, target (with agent) {row[2]:.1f} MiB; "
                  f"{row[3]} intervals logged", flush=True)
        time.sleep(1.0)
    err_file.close()
    stderr = err_path.read_text()
    if target_pid is not None:  # detached at --duration, it was left running
        try:
            os.kill(target_pid, 9)
        except ProcessLookupError:
            pass
    elapsed = time.monotonic() - started
    print(f"phasescope exited {host.returncode} after {elapsed:.0f} s: {stderr.strip().splitlines()[-1] if stderr.strip() else ''}")

    ok = host.returncode == 0
    per_thread = {}
    total = 0
    with open(log) as f:
        for n, line in enumerate(f):
            rec = json.loads(line)
            per_thread.setdefault(rec["thread"], []).append(rec["thread_seq"])
            total += rec["instructions"]
            if rec["seq"] != n:
                print(f"FAIL: global seq {rec['seq']} at line {n + 1}")
                ok = False
    gaps = {t: s for t, s in per_thread.items() if s != list(range(len(s)))}
    s = json.loads(summary.read_text())
    print(f"intervals {sum(len(v) for v in per_thread.values())}, threads {len(per_thread)}, "
          f"instructions {total:,}; thread_seq contiguous in every thread: {not gaps}")
    if gaps:
        ok = False
        for t, seqs in list(gaps.items())[:5]:
            missing = sorted(set(range(max(seqs) + 1)) - set(seqs))
            print(f"FAIL: thread {t}: {len(missing)} missing, first {missing[:10]}")
    if s["whole"]["instructions"] != total or s["whole"]["intervals"] != sum(len(v) for v in per_thread.values()):
        print("FAIL: summary and log disagree")
        ok = False
    dropped = s["session"]["dropped_records"]
    print(f"dropped records {dropped}; end {s['end']}")
    ok = ok and dropped == 0
    print("table: minute, peak RSS host MiB, peak RSS target MiB, intervals logged")
    for row in report:
        print(f"  {row[0]:g}, {row[1]:.1f}, {row[2]:.1f}, {row[3]}")
    print("SOAK", "OK" if ok else "FAILED", f"(files in {out})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
