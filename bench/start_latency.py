#!/usr/bin/env python3
"""How long a sampled run takes from the exec of phasescope to the target's first instruction.

The target is a C program that prints CLOCK_REALTIME as main() begins; the time is read just before
``phasescope --mode sampled --no-dashboard -o /dev/null -f STAMP`` is started (so it includes the
fork and exec, and the target's dynamic loading, as the native row does). Rows, interleaved run by
run, minimum and median of ``--runs``:

* ``native``: the stamp program alone (the floor: fork, exec, ld.so);
* ``python3 -c pass``: the interpreter's own start-up, which no change to phasescope removes;
* ``phasescope``: this checkout's;
* ``phasescope (--vs DIR)``: the package found in DIR (e.g. an older checkout's ``host``).

    python3 bench/start_latency.py [--runs 9] [--vs DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STAMP_C = r"""
#include <stdio.h>
#include <time.h>
int main (void) { struct timespec t; clock_gettime (CLOCK_REALTIME, &t);
  printf ("%ld.%09ld\n", (long) t.tv_sec, t.tv_nsec); return 0; }
"""


def first_instruction(argv, env=None) -> float:
    """Seconds from just before ``argv`` starts to the stamp program's first line of main()."""
    t0 = time.time()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=60)
    if p.returncode != 0:
        sys.exit(f"start_latency: {' '.join(argv)} exited with {p.returncode}: {p.stderr.strip()[-300:]}")
    return float(p.stdout.split()[0]) - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--vs", metavar="DIR", help="also time the phasescope package in DIR (put first on PYTHONPATH)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src, stamp = os.path.join(tmp, "stamp.c"), os.path.join(tmp, "stamp")
        with open(src, "w") as f:
            f.write(STAMP_C)
        subprocess.run(["cc", "-O2", "-o", stamp, src], check=True)
        ps = [sys.executable, "-m", "phasescope.cli", "--mode", "sampled", "--no-dashboard", "-o", os.devnull,
              "-f", stamp]
        here = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "host"))
        rows = {"native": ([stamp], None),
                "python3 -c pass": (["sh", "-c", f'{sys.executable} -c pass; exec "$0"', stamp], None),
                "phasescope": (ps, here)}
        if a.vs:
            rows[f"phasescope ({a.vs})"] = (ps, dict(os.environ, PYTHONPATH=a.vs))
        times = {name: [] for name in rows}
        for _ in range(a.runs):
            for name, (argv, env) in rows.items():
                times[name].append(first_instruction(argv, env))
    for name, t in times.items():
        print(f"{name:40s} min {1000 * min(t):7.1f} ms  median {1000 * statistics.median(t):7.1f} ms")


if __name__ == "__main__":
    main()
