#!/usr/bin/env python3
"""What the shown prediction earns under a tracker setting (issue 28): per program of
bench/quality/capture.py's logs, tuning half then held-out half, the shown prediction's
mispredictions against last-phase's, and the precision and recall of the changes it predicts;
per constructed-truth log (NAME.truth.jsonl beside it, e.g. a fixed cycle of bench/truth/pylibs.py;
placed by its wall-clock stamps where it has them), the share of the true activity changes foretold
(bench/truth/truth_score.py). A log parsed before
by bench/quality/tables.py is read from its NAME.pkl (cc1's log takes half an hour to parse).

A predicted change: after an interval, the shown prediction names another phase than the
interval's. Precision: predicted changes after which the next interval is in the phase named;
recall: phase changes that the prediction after the interval before them named. The predictors
see the tracker's live labels, as they do live.

    python3 bench/quality/predictions.py DIR [--configs default,SETTING...] [--shown cycle,measured,...]
        [--cyclic LOG...]
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
sys.path.insert(0, os.path.join(HERE, "..", "truth"))
sys.path.insert(0, HERE)  # before truth/: both have a run.py

from phasescope.engine.predict import PRIMARY, PredictorConfig, ThreadPredictors  # noqa: E402
from phasescope.formats.log import read_log  # noqa: E402
from phasescope.engine.segments import merge_intervals  # noqa: E402
from phasescope.engine.phase_engine import make_tracker  # noqa: E402
import programs  # noqa: E402
from run import tracker_config  # noqa: E402
from truth_score import exact_truth, score_stream  # noqa: E402


def shown(labels: np.ndarray, threads: np.ndarray, name: str = PRIMARY) -> np.ndarray:
    """The prediction of ``name`` after each interval (its thread's predictors fed its phases in order)."""
    preds, out = {}, np.empty(len(labels), np.int64)
    for i, (t, p) in enumerate(zip(threads.tolist(), labels.tolist())):
        tp = preds.setdefault(t, ThreadPredictors(PredictorConfig(shown=name)))
        tp.observe(p)
        out[i] = -1 if tp.prediction is None else tp.prediction
    return out


def figures(labels: np.ndarray, threads: np.ndarray, name: str = PRIMARY) -> dict:
    """Mispredictions of ``name``'s prediction and of last-phase, precision and recall of predicted changes."""
    pred = shown(labels, threads, name)
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


def cycle_truth(log: str, intervals: list) -> tuple:
    """(which intervals are the workload thread's, that is the thread with the most, their CPU time,
    the truth on their clock, whether it was placed by its wall stamps: truth_score.exact_truth)."""
    threads = np.array([iv.thread for iv in intervals])
    main = threads == np.bincount(threads - threads.min()).argmax() + threads.min()
    truth, placed = exact_truth(programs.truth_path(log), [iv for iv, m in zip(intervals, main) if m])
    return main, np.array([iv.cpu_ns or 0 for iv in intervals], float)[main], truth, placed


def fmt(x):
    return "-" if x is None else f"{100 * x:.0f}%"


def intervals_of(log: str) -> list:
    """The log's 10M-instruction intervals, from bench/quality/tables.py's NAME.pkl when there is one."""
    cache = log[: -len(".jsonl")] + ".pkl"
    if os.path.exists(cache):
        import generalize  # noqa: F401  (the pickle's class)
        with open(cache, "rb") as f:
            return pickle.load(f).intervals
    return [iv for iv in merge_intervals(read_log(log), 10_000_000) if iv.instructions]


def program_tables(folder: str, configs: list, names: list) -> None:
    """One table per half of the split, then per (setting, prediction) how many programs make at
    least 30% fewer mispredictions than last-phase, and the worst and mean share fewer."""
    rows = {}
    for name in programs.PROGRAMS:
        log = os.path.join(folder, name + ".jsonl")
        if os.path.exists(log):
            ivs = intervals_of(log)
            threads = np.array([iv.thread for iv in ivs])
            for c in configs:
                labels = phases(ivs, tracker_config(c, 10_000_000))
                for n in names:
                    rows[name, c, n] = figures(labels, threads, n)
    for split in ("tune", "held-out"):
        if not any(programs.PROGRAMS[name][1] == split for name, _, _ in rows):
            continue
        print(f"\n**{split}**\n\n| program | setting | shown | mispredictions: shown / last-phase | fewer "
              "| predicted changes | precision | recall |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
        fewer = {}
        for (name, c, n), f in rows.items():
            if programs.PROGRAMS[name][1] != split:
                continue
            gain = 1 - f["miss_shown"] / f["miss_last"] if f["miss_last"] else 0.0
            fewer.setdefault((c, n), []).append(gain)
            print(f"| {name} | `{c}` | `{n}` | {f['miss_shown']} / {f['miss_last']} | {fmt(gain)} "
                  f"| {f['predicted_changes']} | {fmt(f['precision'])} | {fmt(f['recall'])} |")
        for (c, n), g in fewer.items():
            print(f"\n`{c}`, `{n}`: 30% fewer on {sum(x >= 0.3 for x in g)} of {len(g)}, "
                  f"worst {100 * min(g):+.1f}%, mean {100 * np.mean(g):+.1f}%")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the logs of bench/quality/capture.py")
    ap.add_argument("--configs", default="default", help="settings of bench/quality/run.py, comma-separated")
    ap.add_argument("--shown", default=PRIMARY, help="predictions to score (--shown-prediction's names), "
                    "comma-separated")
    ap.add_argument("--cyclic", nargs="*", default=[], metavar="LOG", help="logs of a fixed cycle of activities, "
                    "each with its truth beside it (NAME.truth.jsonl)")
    args = ap.parse_args()
    configs, names = args.configs.split(","), args.shown.split(",")
    program_tables(args.dir, configs, names)
    for log in args.cyclic:
        ivs = intervals_of(log)
        main, cpu, truth, placed = cycle_truth(log, ivs)
        for c in configs:
            labels = phases(ivs, tracker_config(c, 10_000_000))[main]
            for n in names:
                s = score_stream(cpu, labels, shown(labels, np.zeros(len(labels), int), n), truth,
                                 stretch=not placed)
                print(f"{os.path.basename(log)} `{c}` `{n}`: {s['live_changes']} phase changes, "
                      f"{s['true_changes']} true; foretold {fmt(s['foretold'])}, detected {fmt(s['detected'])}, "
                      f"truth ARI {s['ari']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
