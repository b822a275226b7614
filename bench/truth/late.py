#!/usr/bin/env python3
"""The activity changes a replay did not see within 2 windows, and why (issue 27, stop 40).

For each workload's log (bench/truth/run.py's, in --dir), every true activity change that the
settled phases do not change at (truth_score's ``detected`` rule), with the nearest phase change
(in windows: negative is early) and the windows around it: settled and live phase, whether the
window was new, its distance and any relabel.

    python3 bench/truth/late.py --dir DIR --only NAME,... [--own-clock]
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402
from truth_score import LATENCY_NS, read_truth, window_span  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--only", required=True, help="comma-separated workload names")
    ap.add_argument("--own-clock", action="store_true", help="the workload's own CPU reading as the truth")
    args = ap.parse_args()
    rp = argparse.ArgumentParser()
    run.add_engine_options(rp)
    config = run.engine_config_from_args(rp.parse_args([]), interval_default=None, preset_default="sampled")
    for w in [w for w in WORKLOADS if w.name in args.only.split(",")]:
        ivs = run.main_thread(list(run.read_log(os.path.join(args.dir, w.name + ".jsonl"))))
        engine = run.PhaseEngine(config)
        results = engine.feed_many(ivs)
        live, phases = np.array([r.phase for r in results]), np.array(run.settled(results))
        truth = read_truth(w.truth(args.dir), own=args.own_clock)
        start, end = window_span(np.array([iv.cpu_ns for iv in ivs], dtype=np.float64), truth)
        win = float(np.median(end - start))
        changes = start[1:][phases[1:] != phases[:-1]]
        bounds = [(truth[i][1], truth[i - 1][0], truth[i][0]) for i in range(1, len(truth))
                  if truth[i][0] != truth[i - 1][0]]
        missed = 0
        for b, before, after in bounds:
            if np.any((changes >= b - win) & (changes <= b + LATENCY_NS)):
                continue
            missed += 1
            k = min(int(np.searchsorted(end, b)), len(ivs) - 1)
            near = (changes[np.abs(changes - b).argmin()] - b) / win if len(changes) else float("nan")
            print(f"{w.name} {before} -> {after}: in window {k} ({(b - start[k]) / win:.2f} into it), "
                  f"nearest change {near:+.1f} windows")
            for j in range(max(0, k - 2), min(len(ivs), k + 4)):
                r = results[j]
                dist = "-" if r.distance is None else f"{r.distance:.2f}"
                print(f"  w{j} settled {phases[j]} live {live[j]} new {r.new_phase} distance {dist} relabel {r.relabel}")
        print(f"{w.name}: {missed} of {len(bounds)} changes not seen within 2 windows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
