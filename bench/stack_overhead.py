#!/usr/bin/env python3
"""What call stacks cost in ``--mode sampled``: the same programs sampled at one rate with stacks
(PERF_SAMPLE_CALLCHAIN, the default) and leaf-only, runs interleaved (native, leaf, stacks, ...),
minimum of ``--runs`` each. The ratios are taken within this run: the target's CPU time (user +
system from wait4, where the kernel's unwinding is charged) and wall time, stacks over leaf-only;
and the host CPU the sampler used (reading the longer records and naming the frames).

    PYTHONPATH=host python3 bench/stack_overhead.py [--runs 5] [--rate 1000] [--only bzip2]

Goal (issue 29): stacks cost at most 2% more than leaf-only at the default rate.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sampled_overhead import make_data, run_once, workloads  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rate", type=int, default=1000, help="samples per second of CPU time")
    ap.add_argument("--only", help="run only workloads whose label contains this")
    a = ap.parse_args()
    period = 1_000_000_000 // a.rate
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        files = make_data(tmp)
        for label, argv in workloads(files, tmp):
            if a.only and a.only not in label:
                continue
            runs = {"native": [], "leaf": [], "stacks": []}
            for _ in range(a.runs):
                runs["native"].append(run_once(argv, None))
                runs["leaf"].append(run_once(argv, period, stacks=False))
                runs["stacks"].append(run_once(argv, period, stacks=True))
            best = {k: {m: min(x[m] for x in v) for m in ("cpu", "wall")} for k, v in runs.items()}
            host = {k: min(x["host_cpu"] for x in runs[k]) for k in ("leaf", "stacks")}
            cpu = best["stacks"]["cpu"] / best["leaf"]["cpu"]
            worst = max(worst, cpu)
            print(f"{label:24s} native cpu {best['native']['cpu']:6.2f} s | leaf cpu {best['leaf']['cpu'] / best['native']['cpu']:.3f}x "
                  f"| stacks/leaf: target cpu {cpu:.3f}x, wall {best['stacks']['wall'] / best['leaf']['wall']:.3f}x, "
                  f"host cpu {host['leaf']:.2f} -> {host['stacks']:.2f} s", flush=True)
    print(f"worst stacks/leaf target CPU at {a.rate} Hz: {worst:.3f}x (goal <= 1.02)")


if __name__ == "__main__":
    main()
