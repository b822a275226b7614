#!/usr/bin/env python3
"""Each observer of ``bench/observer_total.py`` at one rate on one long ``cpu_bound`` run, all at
once (so they share whatever load the machine has, and a 100 s program takes one run's time, not
three, nor a warm-up run each): the observer's whole CPU and its target's, one line each.

    python3 bench/observer_at_once.py [--rate 1000] [--rounds 1160] [--vs OTHER/host] [--g]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from observer_steady import cpu_bound, observers  # noqa: E402
from observer_total import run_once  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=1160, help="rounds of bench/cpu_bound.c (1160: ~100 s of CPU)")
    ap.add_argument("--vs", default="", help="another tree's host/ directory: its sampled mode too")
    ap.add_argument("--g", action="store_true", help="perf record -g as well")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = cpu_bound(tmp)
        obs = {n: p for n, p in observers([a.rate], tmp, a.vs).items() if a.g or not n.endswith("-g")}
        print(f"load {os.getloadavg()[0]:.1f}", flush=True)

        def one(name, prefix):
            o, t = run_once(prefix, [exe, str(a.rounds)])
            print(f"  {name:24s} observer {o:.2f} s, {100 * o / t:.2f}% of target {t:.2f} s, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
        threads = [threading.Thread(target=one, args=item) for item in obs.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


if __name__ == "__main__":
    main()
