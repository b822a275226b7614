#!/usr/bin/env python3
"""Which phase changes any predictor could foretell (issue 28, stops 41-42): per program of
bench/quality/capture.py's logs, under a tracker setting, the phase changes of its threads' live
label streams: the share into phases never seen before, the share whose context had been followed
by the same next phase before, and what an online and a hindsight map from context to next phase
would save against last-phase (bench/foresight.py defines each).

``--cyclic LOG...`` (a fixed cycle with its truth beside it, NAME.truth.jsonl): the same shares of
the main thread's changes near a true change (those ``foretold`` is scored on,
bench/truth/truth_score.py), with ``online`` and ``hindsight`` as the share of them foretold.

    python3 bench/quality/foreseeable.py DIR [DIR...] [--config default] [--half tune|held-out|all]
        [--cyclic LOG...]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from predictions import cycle_truth, intervals_of, phases  # noqa: E402  (sets up the paths)
import programs  # noqa: E402
from run import tracker_config  # noqa: E402
from truth_score import changes_near_truth  # noqa: E402

sys.path.insert(0, os.path.join(HERE, ".."))
from foresight import stream_figures  # noqa: E402

HEAD = ("| {what} | changes | new phase | seen: phase | seen: (phase, run) | seen: 3 runs before too "
        "| online: (phase, run) | online: 3 runs before | hindsight: (phase, run) |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def figures(labels: np.ndarray, threads: np.ndarray) -> Counter:
    f = Counter()
    for t in np.unique(threads):
        f.update(stream_figures(labels[threads == t].tolist()))  # update, not +=: a saving may be negative
    return f


def row(what: str, f: Counter) -> str:
    n = f["changes"]
    pct = lambda a: f"{100 * a / n:.0f}%" if n else "-"
    return (f"| {what} | {n} | {pct(f['new'])} | {pct(f['seen_phase'])} | {pct(f['seen_short'])} "
            f"| {pct(f['seen_long'])} | {pct(f['online_short'])} | {pct(f['online_long'])} "
            f"| {pct(f['hindsight_short'])} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", help="directories of bench/quality/capture.py's logs")
    ap.add_argument("--config", default="default", help="a setting of bench/quality/run.py")
    ap.add_argument("--half", default="tune", choices=("tune", "held-out", "all"))
    ap.add_argument("--cyclic", nargs="*", default=[], metavar="LOG", help="logs of a fixed cycle of activities, "
                    "each with its truth beside it (NAME.truth.jsonl): their changes near a true change")
    args = ap.parse_args()
    config = tracker_config(args.config, 10_000_000)
    if args.dirs:
        print(HEAD.format(what="program"))
    for name, (_, half) in programs.PROGRAMS.items():
        logs = [os.path.join(d, name + ".jsonl") for d in args.dirs if os.path.exists(os.path.join(d, name + ".jsonl"))]
        if not logs or args.half not in ("all", half):
            continue
        ivs = intervals_of(logs[0])
        print(row(name, figures(phases(ivs, config), np.array([iv.thread for iv in ivs]))))
    if args.cyclic:
        print("\n" + HEAD.format(what="cycle (changes near a true change)"))
    for log in args.cyclic:
        ivs = intervals_of(log)
        main, cpu, truth, placed = cycle_truth(log, ivs)
        labels = phases(ivs, config)[main]
        near = set(changes_near_truth(cpu, labels, truth, stretch=not placed))
        print(row(os.path.basename(log), stream_figures(labels.tolist(), near)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
