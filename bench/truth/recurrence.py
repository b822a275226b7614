#!/usr/bin/env python3
"""Can a distance bound tell an activity that comes back from a new one? (issue 27, stop 40)

On recorded truth logs (bench/truth/run.py --dir), with the page tracker's own vectors: each
activity's centre is the mean of its first occurrence's windows (the first window of every
occurrence, which may straddle the change, left out). For each later occurrence, the mean of its
first K windows is measured against its own activity's centre (``recurrence``); for each first
occurrence after the first, against the nearest centre of the activities seen before it (``new``).
A recurrence test that gives a returning activity its old ID, and a new activity a new one, needs a
bound above every recurrence's distance and below every new activity's. The script prints the
largest of the one, the smallest of the other, and the fewest errors any one bound makes.

    python3 bench/truth/recurrence.py --dir DIR [--split tune|held-out|all] [--only NAME,...] [--k K] [--shift BITS] [--bound B]
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402  (puts the host package on the path)
from phasescope.engine.page_tracker import PageTracker  # noqa: E402
from truth_score import read_truth, window_span  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


def distances(intervals, truth, tracker_config, k: int, shift: int):
    """([(activity, distance)] of recurrences, [(activity, nearest earlier activity, distance)] of new ones)."""
    tracker = PageTracker(tracker_config)
    tracker.shift = shift
    vectors, _ = tracker.footprints([iv.keys for iv in intervals], [iv.counts for iv in intervals])
    start, end = window_span(np.array([iv.cpu_ns for iv in intervals], dtype=np.float64), truth)
    seg = np.searchsorted(np.array([s for _, s, _ in truth], dtype=np.float64), (start + end) / 2, side="right") - 1
    centres, recurrences, new = {}, [], []
    for i, (activity, _, _) in enumerate(truth):
        idx = np.nonzero(seg == i)[0][1:]
        if len(idx) < k + 1:
            continue
        head = vectors[idx[:k]].mean(axis=0)
        if activity in centres:
            recurrences.append((activity, float(np.abs(head - centres[activity]).sum())))
            continue
        if centres:
            d, near = min((float(np.abs(head - c).sum()), a) for a, c in centres.items())
            new.append((activity, near, d))
        centres[activity] = vectors[idx].mean(axis=0)
    return recurrences, new


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="the logs and truth files of bench/truth/run.py --dir")
    ap.add_argument("--split", choices=("tune", "held-out", "all"), default="tune")
    ap.add_argument("--only", help="comma-separated workload names")
    ap.add_argument("--k", type=int, default=5, help="windows of an occurrence's start that are compared")
    ap.add_argument("--shift", type=int, default=12, help="code granularity, log2 bytes (12: pages, 6: lines)")
    ap.add_argument("--bound", type=float, help="also count the errors of this bound (one chosen on another half)")
    args = ap.parse_args()
    rp = argparse.ArgumentParser()
    run.add_engine_options(rp)
    config = run.engine_config_from_args(rp.parse_args([]), interval_default=None, preset_default="sampled").tracker
    rec, new = [], []
    for w in WORKLOADS:
        if (args.split != "all" and w.split != args.split or args.only and w.name not in args.only.split(",")
                or not os.path.exists(w.truth(args.dir))):
            continue
        intervals = run.main_thread(list(run.read_log(os.path.join(args.dir, w.name + ".jsonl"))))
        r, n = distances(intervals, read_truth(w.truth(args.dir)), config, args.k, args.shift)
        rec += [(d, f"{w.name} {a}") for a, d in r]
        new += [(d, f"{w.name} {a} ~ {near}") for a, near, d in n]
    rec.sort(reverse=True)
    new.sort()
    print(f"{args.split} half, first {args.k} windows, granularity 2^{args.shift} bytes: "
          f"{len(rec)} recurrences, {len(new)} new activities")
    print("recurrence, distance to its own first occurrence (largest): "
          + "; ".join(f"{n} {d:.2f}" for d, n in rec[:5]))
    print("new activity, distance to the nearest activity before it (smallest): "
          + "; ".join(f"{n} {d:.2f}" for d, n in new[:5]))
    bounds = sorted({d for d, _ in rec + new}) + [2.0]
    errors = lambda b: (sum(d >= b for d, _ in rec), sum(d < b for d, _ in new))
    best = min((sum(errors(b)), b) for b in bounds)[1]
    for what, b in (("fewest errors of one bound", best), ("the bound given", args.bound)):
        if b is not None:
            r, n = errors(b)
            print(f"{what}, {b:.2f}: {r} recurrences at or over it, {n} new activities under it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
