#!/usr/bin/env python3
"""What exact mode costs on the JVM against bare Stalker with the same handling (issue 32's 1.3x goal).

Compiles bench/jvm/Phases.java and runs each program natively, under bare Stalker with exact mode's
handling of runtimes and no counters (the agent's ``bare="handled"``: the same near reserve, late
follow of JVM threads, AC clear, OF carry and fault handling; bench/jvm/bare_stalker.py), and under
exact mode (the agent as ``phasescope -f`` runs it), interleaved, RUNS times each. Reports each
configuration's CPU seconds of the whole target (user + system of all its threads: the JVM's work
runs on threads other than main; the traced targets' read when the agent reports their exit) and
wall seconds from resume to exit, min and median, and the ratios of the minima; a run that did not
exit 0 is counted and left out.

    python3 bench/jvm_cost.py [--runs 5] [--program "2 2 300000"] [--program "2 6 3000000"] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "host"))
from phasescope.commands.bench import _traced  # noqa: E402
from phasescope.errors import PhasescopeError  # noqa: E402
from phasescope.sources.device import resolve_device, resolve_target  # noqa: E402
from phasescope.sources.session import TraceSession  # noqa: E402

PROGRAMS = ["2 2 300000", "2 6 3000000"]  # JIT-hot; long, known activities (bench/jvm_exact.py's)


def native(argv) -> tuple:
    """(wall, CPU seconds of all its threads) of one native run, its output discarded."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"jvm_cost: {argv} exited {proc.returncode} natively")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def traced(session, what: str, failed: list) -> Optional[tuple]:
    """(wall, CPU) of one run, None (its reason appended to ``failed``) when it did not exit 0."""
    try:
        run = _traced(session, what)
    except PhasescopeError as e:
        failed.append(str(e))
        return None
    return run[0], session.final_process_cpu


def summary(values) -> dict:
    return {"min": min(values), "median": statistics.median(values)}


def measure(argv, runs: int) -> dict:
    device = resolve_device()
    target = resolve_target(device, argv=argv)
    got = {"native": [], "bare": [], "traced": []}
    failed = {"bare": [], "traced": []}
    for _ in range(runs):
        got["native"].append(native(target.argv))
        got["bare"].append(traced(TraceSession(device, target, stdio="inherit", bare="handled"), "bare Stalker",
                                  failed["bare"]))
        got["traced"].append(traced(TraceSession(device, target, stdio="inherit"), "exact mode", failed["traced"]))
    pairs = [t[1] / b[1] for b, t in zip(got["bare"], got["traced"]) if b and t]
    got = {k: [r for r in v if r] for k, v in got.items()}
    cpu = {k: summary([c for _, c in v]) for k, v in got.items()}
    wall = {k: summary([w for w, _ in v]) for k, v in got.items()}
    return {"command": target.argv, "runs": runs, "failed": failed, "cpu_s": cpu, "wall_s": wall, "every_run": got,
            "traced/bare cpu": cpu["traced"]["min"] / cpu["bare"]["min"],
            "traced/bare cpu, paired median": statistics.median(pairs) if pairs else None,
            "bare/native cpu": cpu["bare"]["min"] / cpu["native"]["min"],
            "traced/native cpu": cpu["traced"]["min"] / cpu["native"]["min"],
            "traced/bare wall": wall["traced"]["min"] / wall["bare"]["min"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--program", action="append", help="Phases' arguments: THREADS ROUNDS WORK")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    java, javac = shutil.which("java"), shutil.which("javac")
    if java is None or javac is None:
        print("jvm_cost: java and javac are needed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([javac, "-d", tmp, os.path.join(ROOT, "bench", "jvm", "Phases.java")], check=True)
        for program in args.program or PROGRAMS:
            row = measure([java, "-XX:+UseSerialGC", "-cp", tmp, "Phases", *program.split()], args.runs)
            if args.json:
                print(json.dumps(row), flush=True)
                continue
            print(f"Phases {program} ({args.runs} runs each, interleaved; CPU of all threads, s)")
            for k in ("native", "bare", "traced"):
                c, w = row["cpu_s"][k], row["wall_s"][k]
                print(f"  {k:<7} cpu min {c['min']:7.2f} median {c['median']:7.2f}   wall min {w['min']:7.2f} "
                      f"median {w['median']:7.2f}")
            for k, why in row["failed"].items():
                if why:
                    print(f"  {k}: {len(why)} of {args.runs} runs failed: {'; '.join(why)}")
            print(f"  traced/bare cpu {row['traced/bare cpu']:.2f}x (paired median "
                  f"{row['traced/bare cpu, paired median']:.2f}x), bare/native {row['bare/native cpu']:.1f}x, "
                  f"traced/native {row['traced/native cpu']:.1f}x; traced/bare wall {row['traced/bare wall']:.2f}x",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
