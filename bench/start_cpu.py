#!/usr/bin/env python3
"""The fixed CPU of a sampled run: ``phasescope --mode sampled --no-dashboard -o /dev/null -f
/bin/true`` (the interpreter, the imports, the report) beside ``perf record -e cpu-clock -F 1000``
of the same program, in turn, run by run; CPU time (user + system, RUSAGE_CHILDREN), minimum and
median of ``--runs``. Give ``--vs OTHER/host`` to run another tree's phasescope in the same rounds
(before and after a change). Bytecode caching is on, as for an installed copy (this
environment's ``PYTHONDONTWRITEBYTECODE`` is unset for the runs; each tree is run once first).

    python3 bench/start_cpu.py [--runs 5] [--vs OTHER/host] [--program /bin/true]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host")


def cpu(argv, env) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--vs", default="", help="another tree's host/ directory, run in the same rounds")
    ap.add_argument("--program", default="/bin/true")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    trees = {"phasescope": os.path.abspath(HOST)} | ({"phasescope (vs)": os.path.abspath(args.vs)} if args.vs else {})
    with tempfile.TemporaryDirectory(prefix="start-cpu-") as tmp:
        who = {name: ([sys.executable, "-m", "phasescope.cli", "--mode", "sampled", "--no-dashboard", "-o",
                       os.devnull, "-f", args.program], dict(env, PYTHONPATH=tree)) for name, tree in trees.items()}
        who["perf record -F 1000"] = (["perf", "record", "-q", "-e", "cpu-clock", "-F", "1000", "-o",
                                       os.path.join(tmp, "perf.data"), "--", args.program], env)
        for argv, e in who.values():  # warm-up: bytecode written, files cached
            cpu(argv, e)
        load = os.getloadavg()[0]
        times = {name: [] for name in who}
        for _ in range(args.runs):
            for name, (argv, e) in who.items():
                times[name].append(cpu(argv, e))
    print(f"# {args.program}, {args.runs} runs each in turn, CPU seconds; load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    for name, t in times.items():
        print(f"{name:22s} min {min(t):.3f}  median {statistics.median(t):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
