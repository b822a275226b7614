#!/usr/bin/env python3
"""Look-backs over K windows, simulated on the page tracker's settled labels (issue 27, stop 40;
measured, not kept).

Each recorded truth log (bench/truth/run.py --dir) is classified with the sampled defaults, then
relabelled by one of two rules, and scored as run.py scores it (phasescope's columns):

- ``--fold B``: in order, a phase's K-th window tests the mean of its first K windows against the
  centre (the mean of every window so far) of each other phase with K windows or more. If the
  nearest lies within B, the phase is folded into it: its windows so far and every later one take
  that phase's label (a recurrence gets its old ID).
- ``--split S``: within a run of one label, the mean of the last K windows is compared with the
  mean of the run's first K. Past S, the run has moved: the last K windows start a new run, with
  the label whose centre is within S of their mean, or a new label (two activities in one phase).

    python3 bench/truth/lookback.py --dir DIR (--fold B | --split S) [--split-of tune|held-out|all]
                                    [--only NAME,...] [--k K] [--shift BITS]
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402  (puts the host package on the path)
from phasescope.engine.page_tracker import PageTracker  # noqa: E402
from truth_score import read_truth, score_stream  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

COLUMNS = ("ari", "detected", "false_per_10s", "recur_same", "phases")


def fold(phases: np.ndarray, vectors: np.ndarray, k: int, bound: float) -> np.ndarray:
    """``phases`` with every phase whose first ``k`` windows lie within ``bound`` of an older
    phase's centre relabelled to it (the module docstring)."""
    out, windows, into = phases.copy(), {}, {}
    for i, p in enumerate(phases):
        p = out[i] = into.get(p, p)
        mine = windows.setdefault(p, [])
        mine.append(i)
        if len(mine) != k:
            continue
        head = vectors[mine].mean(axis=0)
        near = [(float(np.abs(head - vectors[w].mean(axis=0)).sum()), q) for q, w in windows.items()
                if q != p and len(w) >= k]
        if near and min(near)[0] < bound:
            q = min(near)[1]
            into[p] = q
            out[mine] = q
            windows[q] += windows.pop(p)
    return out


def split(phases: np.ndarray, vectors: np.ndarray, k: int, bound: float) -> np.ndarray:
    """``phases`` with runs that moved split (the module docstring)."""
    out, sums, counts = phases.copy(), {}, {}

    def move(label, i, sign):
        sums[label] = sums.get(label, 0.0) + sign * vectors[i]
        counts[label] = counts.get(label, 0) + sign

    fresh, start, label, ref = int(phases.max()) + 1, 0, None, None
    for i, p in enumerate(phases):
        if i == 0 or p != phases[i - 1]:
            start, label, ref = i, p, None
        out[i] = label
        move(label, i, 1)
        if ref is None and i - start + 1 >= k:
            ref = vectors[start:i + 1].mean(axis=0)
        elif ref is not None and i - start + 1 >= 2 * k:
            head = vectors[i - k + 1:i + 1].mean(axis=0)
            if float(np.abs(head - ref).sum()) <= bound:
                continue
            for j in range(i - k + 1, i + 1):
                move(out[j], j, -1)
            near = [(float(np.abs(head - sums[q] / counts[q]).sum()), q) for q in sums if counts[q] >= k and q != label]
            if near and min(near)[0] < bound:
                label = min(near)[1]
            else:
                label, fresh = fresh, fresh + 1
            for j in range(i - k + 1, i + 1):
                out[j] = label
                move(label, j, 1)
            start, ref = i - k + 1, head
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="the logs and truth files of bench/truth/run.py --dir")
    rule = ap.add_mutually_exclusive_group(required=True)
    rule.add_argument("--fold", type=float, metavar="B", help="fold a new phase into an old one within B")
    rule.add_argument("--split", type=float, metavar="S", help="split a run whose last K windows moved past S")
    ap.add_argument("--split-of", choices=("tune", "held-out", "all"), default="tune", help="which half")
    ap.add_argument("--only", help="comma-separated workload names")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--shift", type=int, default=12, help="code granularity of the test, log2 bytes")
    args = ap.parse_args()
    rp = argparse.ArgumentParser()
    run.add_engine_options(rp)
    config = run.engine_config_from_args(rp.parse_args([]), interval_default=None, preset_default="sampled")
    print(f"{'workload':14s} " + " ".join(f"{c[:8]:>17s}" for c in COLUMNS) + "   (before -> after)")
    for w in WORKLOADS:
        if args.split_of != "all" and w.split != args.split_of or args.only and w.name not in args.only.split(","):
            continue
        intervals = run.main_thread(list(run.read_log(os.path.join(args.dir, w.name + ".jsonl"))))
        phases, predictions, live = run.classify(intervals, config)
        tracker = PageTracker(config.tracker)
        tracker.shift = args.shift
        vectors, _ = tracker.footprints([iv.keys for iv in intervals], [iv.counts for iv in intervals])
        cpu = np.array([iv.cpu_ns for iv in intervals], dtype=np.float64)
        truth = read_truth(w.truth(args.dir))
        before = score_stream(cpu, phases, predictions, truth, live)
        relabelled = (fold(phases, vectors, args.k, args.fold) if args.fold is not None
                      else split(phases, vectors, args.k, args.split))
        after = score_stream(cpu, relabelled, predictions, truth, live)
        cell = lambda s, c: "-" if s[c] is None else f"{s[c]:.3f}"
        print(f"{w.name:14s} " + " ".join(f"{cell(before, c) + ' -> ' + cell(after, c):>17s}" for c in COLUMNS),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
