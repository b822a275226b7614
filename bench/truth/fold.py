#!/usr/bin/env python3
"""A look-back fold of new phases into old ones, simulated on the page tracker's settled labels
(issue 27, stop 40; measured, not kept).

Each recorded truth log (bench/truth/run.py --dir) is classified with the sampled defaults. Then,
in order, a phase's K-th window tests the mean of its first K windows against the centre (the mean
of every window so far) of each other phase with K windows or more. If the nearest one lies within
``--bound``, the phase is folded into it: its windows so far and every later one take that phase's
label. Scores are run.py's (phasescope's columns).

    python3 bench/truth/fold.py --dir DIR [--split tune|held-out] [--only NAME,...] [--k K]
                                [--bound B] [--shift BITS]
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="the logs and truth files of bench/truth/run.py --dir")
    ap.add_argument("--split", choices=("tune", "held-out", "all"), default="tune")
    ap.add_argument("--only", help="comma-separated workload names")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--bound", type=float, default=0.55)
    ap.add_argument("--shift", type=int, default=12, help="code granularity of the test, log2 bytes")
    args = ap.parse_args()
    rp = argparse.ArgumentParser()
    run.add_engine_options(rp)
    config = run.engine_config_from_args(rp.parse_args([]), interval_default=None, preset_default="sampled")
    print(f"{'workload':14s} " + " ".join(f"{c[:8]:>17s}" for c in COLUMNS) + "   (before -> after)")
    for w in WORKLOADS:
        if args.split != "all" and w.split != args.split or args.only and w.name not in args.only.split(","):
            continue
        intervals = run.main_thread(list(run.read_log(os.path.join(args.dir, w.name + ".jsonl"))))
        phases, predictions, live = run.classify(intervals, config)
        tracker = PageTracker(config.tracker)
        tracker.shift = args.shift
        vectors, _ = tracker.footprints([iv.keys for iv in intervals], [iv.counts for iv in intervals])
        cpu = np.array([iv.cpu_ns for iv in intervals], dtype=np.float64)
        truth = read_truth(w.truth(args.dir))
        before = score_stream(cpu, phases, predictions, truth, live)
        after = score_stream(cpu, fold(phases, vectors, args.k, args.bound), predictions, truth, live)
        cell = lambda s, c: "-" if s[c] is None else f"{s[c]:.3f}"
        print(f"{w.name:14s} " + " ".join(f"{cell(before, c) + ' -> ' + cell(after, c):>17s}" for c in COLUMNS),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
