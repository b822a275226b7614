#!/usr/bin/env python3
"""CPU time of sampled mode split in two: phasescope's own process and its target, against the
target alone, in turn (native, then each phasescope tree given), so the figures are paired and
the split (which a whole-process timer cannot make) is the operating system's accounting.

    python3 bench/host_cpu.py [--runs N] [--code HOST_DIR ...] -- PROGRAM [ARGS...]

``--code``: a ``host`` directory whose phasescope to run (default: this checkout's); give two to
compare versions. Each phasescope run is ``--mode sampled --no-dashboard -o /dev/null -f PROGRAM``
with bytecode caching on (an installed phasescope has its .pyc files). Medians are printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
#: run phasescope's CLI in this process, then print this process's CPU and its children's
WRAPPER = """import resource, sys
from phasescope.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime, file=sys.stderr)
"""


def native(argv) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def traced(host: str, argv) -> tuple:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = host
    r = subprocess.run([sys.executable, "-c", WRAPPER, "--mode", "sampled", "--no-dashboard", "-o", os.devnull,
                        "-f", argv[0], "--", *argv[1:]], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, check=True)
    own, target = (float(x) for x in r.stderr.split()[-2:])
    return own, target


def main() -> int:
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: host_cpu.py [--runs N] [--code HOST_DIR ...] -- PROGRAM [ARGS...]")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--code", action="append", help="a host directory (repeatable)")
    args = ap.parse_args(argv[:argv.index("--")])
    program = argv[argv.index("--") + 1:]
    hosts = args.code or [os.path.join(HERE, "..", "host")]
    for host in hosts:  # warm-up: writes the .pyc files
        traced(host, program)
    rows = {"native": []} | {h: [] for h in hosts}
    for _ in range(args.runs):
        rows["native"].append((0.0, native(program)))
        for h in hosts:
            rows[h].append(traced(h, program))
    base = statistics.median(t for _, t in rows["native"])
    print(f"# {args.runs} runs each, in turn; CPU seconds (user + system), medians; load {os.getloadavg()[0]:.1f}")
    print(f"{'who':40s} {'phasescope':>10s} {'target':>8s} {'total/native':>12s}")
    for who, rs in rows.items():
        own, target = statistics.median(o for o, _ in rs), statistics.median(t for _, t in rs)
        ratios = sorted((o + t) / n for (o, t), (_, n) in zip(rs, rows["native"]))
        print(f"{who[-40:]:40s} {own:10.2f} {target:8.2f} {statistics.median(ratios):12.3f}"
              f"  (paired {ratios[0]:.3f}-{ratios[-1]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
