#!/usr/bin/env python3
"""What phasescope's agent costs, on the benchmark programs this repo ships.

Compiles bench/cpu_bound.c and bench/many_threads.c with the system ``cc -O2`` and runs
``phasescope bench`` on them (native, bare Stalker.follow, traced, valgrind exp-bbv; interleaved;
minimum of --runs), then times ``phasescope -f PROGRAM`` end to end (start-up and injection
included) against the native run of a program that takes a few seconds. Prints one table with
the issue's targets next to the measured ratios.

    python3 bench/agent_overhead.py [--runs 3] [--no-valgrind] [--json]
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

HERE = Path(__file__).resolve().parent

#: (label, source, args, {ratio: target}) -- targets from the agent issue
WORKLOADS = [
    ("cpu-bound, 1 thread", "cpu_bound.c", ["8"], {"traced": 1.9, "traced/bare": 1.2}),
    ("200 threads x 20M insns", "many_threads.c", ["200", "1000000"], {"traced": 3.0}),
    ("200 threads x 10M insns", "many_threads.c", ["200", "500000"], {"traced": 3.0}),
    ("200 threads x 4M insns", "many_threads.c", ["200", "200000"], {"traced": 3.0}),
]
END_TO_END = ("cpu_bound.c", ["30"], 2.2)


def compile_program(source: str, out_dir: str) -> str:
    exe = os.path.join(out_dir, Path(source).stem)
    subprocess.run(["cc", "-O2", "-pthread", "-o", exe, str(HERE / source)], check=True)
    return exe


def phasescope(*args: str) -> list:
    return [sys.executable, "-m", "phasescope.cli", *args]


def bench(exe: str, args: list, runs: int, valgrind: bool) -> dict:
    cmd = phasescope("bench", "--json", "--runs", str(runs), *([] if valgrind else ["--no-valgrind"]), "--", exe, *args)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"agent_overhead: {' '.join(cmd)} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def wall(cmd: list) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def end_to_end(exe: str, args: list, runs: int) -> dict:
    native, traced = [], []
    for _ in range(runs):
        native.append(wall([exe, *args]))
        traced.append(wall(phasescope("-f", exe, *args)))
    return {"native": min(native), "phasescope -f": min(traced), "ratio": min(traced) / min(native)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--no-valgrind", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()

    results = {}
    with tempfile.TemporaryDirectory(prefix="phasescope-bench-") as tmp:
        exes = {src: compile_program(src, tmp) for src in {w[1] for w in WORKLOADS} | {END_TO_END[0]}}
        for label, src, wargs, targets in WORKLOADS:
            r = bench(exes[src], wargs, args.runs, not args.no_valgrind)
            r["targets"] = targets
            results[label] = r
        e2e_src, e2e_args, e2e_target = END_TO_END
        results["end-to-end"] = dict(end_to_end(exes[e2e_src], e2e_args, args.runs), target=e2e_target)

    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print(f"{'workload':<26}{'native s':>9}{'bare':>8}{'traced':>8}{'tr/bare':>8}{'exp-bbv':>9}   targets")
    for label, r in results.items():
        if label == "end-to-end":
            continue
        q = r["ratios"]
        targets = ", ".join(f"{k} <= {v}" for k, v in r["targets"].items())
        bbv = f"{q['exp-bbv']:8.2f}x" if "exp-bbv" in q else f"{'-':>9}"
        print(
            f"{label:<26}{r['seconds']['native']:9.3f}{q['bare']:7.2f}x{q['traced']:7.2f}x"
            f"{q['traced/bare']:7.2f}x{bbv}   {targets}"
        )
    e = results["end-to-end"]
    print(
        f"{'phasescope -f cpu_bound 30':<26}{e['native']:9.3f}{'':8}{e['ratio']:7.2f}x"
        f"{'':8}{'':9}   end-to-end <= {e['target']}"
    )
    print("ratios are wall time / native wall time, minimum of", args.runs, "runs each, interleaved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
