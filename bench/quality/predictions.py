#!/usr/bin/env python3
"""What the shown prediction earns under a tracker setting (issue 28): per program of
bench/quality/capture.py's logs, the shown prediction's mispredictions against last-phase's, and
the precision and recall of the changes it predicts; per constructed-truth log (NAME.truth.jsonl
beside it, e.g. a fixed cycle of bench/truth/pylibs.py), the share of the true activity changes
foretold (bench/truth/truth_score.py).

A predicted change: after an interval, the shown prediction names another phase than the
interval's. Precision: predicted changes after which the next interval is in the phase named;
recall: phase changes that the prediction after the interval before them named.

    python3 bench/quality/predictions.py DIR [--configs default,SETTING...] [--cyclic LOG...]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
sys.path.insert(0, os.path.join(HERE, "..", "truth"))
sys.path.insert(0, HERE)  # before truth/: both have a run.py

from phasescope.engine.predict import PredictorConfig, ThreadPredictors  # noqa: E402
from phasescope.formats.log import read_log  # noqa: E402
from phasescope.engine.segments import merge_intervals  # noqa: E402
from phasescope.engine.phase_engine import make_tracker  # noqa: E402
import programs  # noqa: E402
from run import tracker_config  # noqa: E402
from truth_score import read_truth, score_stream  # noqa: E402


def shown(labels: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """The shown prediction after each interval (its thread's predictors fed its phases in order)."""
    preds, out = {}, np.empty(len(labels), np.int64)
    for i, (t, p) in enumerate(zip(threads.tolist(), labels.tolist())):
        tp = preds.setdefault(t, ThreadPredictors(PredictorConfig()))
        tp.observe(p)
        out[i] = -1 if tp.prediction is None else tp.prediction
    return out


def figures(labels: np.ndarray, threads: np.ndarray) -> dict:
    """Mispredictions of the shown prediction and of last-phase, precision and recall of predicted changes."""
    pred = shown(labels, threads)
    prev, nxt = [], []
    for t in np.unique(threads):
        idx = np.nonzero(threads == t)[0]
        prev.extend(idx[:-1])
        nxt.extend(idx[1:])
    prev, nxt = np.array(prev, int), np.array(nxt, int)
    change = labels[nxt] != labels[prev]
    predicted = pred[prev] != labels[prev]
    right = pred[prev] == labels[nxt]
    return {"n": len(prev), "miss_shown": int((~right).sum()), "miss_last": int(change.sum()),
            "predicted_changes": int(predicted.sum()),
            "precision": float((predicted & right).sum() / predicted.sum()) if predicted.any() else None,
            "recall": float((change & right).sum() / change.sum()) if change.any() else None}


def phases(intervals, config) -> np.ndarray:
    tracker = make_tracker(config)
    fps = tracker.footprints([iv.keys for iv in intervals], [iv.counts for iv in intervals])[0]
    return np.array([m.phase for m in tracker.classify_many(fps, None, np.array([iv.thread for iv in intervals]))])


def fmt(x):
    return "-" if x is None else f"{100 * x:.0f}%"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the logs of bench/quality/capture.py")
    ap.add_argument("--configs", default="default", help="settings of bench/quality/run.py, comma-separated")
    ap.add_argument("--cyclic", nargs="*", default=[], metavar="LOG", help="logs of a fixed cycle of activities, "
                    "each with its truth beside it (NAME.truth.jsonl)")
    args = ap.parse_args()
    configs = args.configs.split(",")
    print("| program | setting | mispredictions: shown / last-phase | fewer | predicted changes | precision | recall |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in programs.PROGRAMS:
        log = os.path.join(args.dir, name + ".jsonl")
        if not os.path.exists(log) or name.startswith("truth-"):
            continue
        ivs = [iv for iv in merge_intervals(read_log(log), 10_000_000) if iv.instructions]
        threads = np.array([iv.thread for iv in ivs])
        for c in configs:
            f = figures(phases(ivs, tracker_config(c, 10_000_000)), threads)
            star = " *" if programs.PROGRAMS[name][1] == "held-out" else ""
            print(f"| {name}{star} | `{c}` | {f['miss_shown']} / {f['miss_last']} "
                  f"| {fmt(1 - f['miss_shown'] / f['miss_last']) if f['miss_last'] else '-'} "
                  f"| {f['predicted_changes']} | {fmt(f['precision'])} | {fmt(f['recall'])} |", flush=True)
    for log in args.cyclic:
        ivs = [iv for iv in merge_intervals(read_log(log), 10_000_000) if iv.instructions]
        threads = np.array([iv.thread for iv in ivs])
        main = threads == np.bincount(threads - threads.min()).argmax() + threads.min()
        cpu = np.array([iv.cpu_ns or 0 for iv in ivs], float)[main]
        truth = read_truth(programs.truth_path(log))
        for c in configs:
            labels = phases(ivs, tracker_config(c, 10_000_000))
            s = score_stream(cpu, labels[main], shown(labels[main], threads[main]), truth)
            print(f"{os.path.basename(log)} `{c}`: {s['live_changes']} phase changes, {s['true_changes']} true; "
                  f"foretold {fmt(s['foretold'])}, detected {fmt(s['detected'])}, truth ARI {s['ari']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
