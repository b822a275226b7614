#!/usr/bin/env python3
"""Do exact mode's tracker settings generalize? (issue 17) One table per setting: each program of
bench/quality/programs.py, tuning half and held-out half (*), scored three ways on the same
intervals of its log (captured with ``bench/quality/capture.py DIR``, 10M-instruction intervals):

* ``SP30``: ARI, changes detected and same-phase pairs agreed against SimPoint 3.2 run on the
  log's own vectors (``phasescope export-bbv``; ``simpoint -loadFVFile F -maxK 30 -saveLabels L``,
  its other options at their defaults, as people run it). Needs ``--simpoint PATH``; the labels
  are kept next to the log (NAME.sp30.labels) and reused.
* ``ref10``: ARI against ``phasescope reference --max-k 10`` (the coarser reference of issue 10).
* ``truth``: ARI against the activities known by construction (python3 driving libraries,
  bench/truth/pylibs.py; NAME.truth.jsonl beside the log), on the main thread, and the share of
  activities that got a phase of their own (whose main phase is no other activity's main phase).

    python3 bench/quality/generalize.py --simpoint /path/to/simpoint DIR [--configs default,coarse]

A setting is chosen on the tuning half; the held-out half is reported, never tuned on.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
sys.path.insert(0, os.path.join(HERE, "..", "truth"))
sys.path.insert(0, HERE)  # before truth/: both have a run.py

from phasescope.engine.phase_engine import make_tracker  # noqa: E402
from phasescope.engine.segments import merge_intervals  # noqa: E402
from phasescope.formats.log import read_log  # noqa: E402
from phasescope.quality import simpoint  # noqa: E402
from phasescope.quality.labels import LabelStream, read_simpoint_labels  # noqa: E402
from phasescope.quality.metrics import adjusted_rand_index, score  # noqa: E402
from phasescope.sinks.bbv import BbvWriter  # noqa: E402
import programs  # noqa: E402
from run import CONFIGS, tracker_config  # noqa: E402
from truth_score import read_truth, score_stream  # noqa: E402


def simpoint_labels(log: str, intervals, binary: str) -> np.ndarray:
    """SimPoint 3.2's labels (-maxK 30) for the log's intervals, computed once and kept."""
    labels = log[: -len(".jsonl")] + ".sp30.labels"
    if not os.path.exists(labels):
        bb = log[: -len(".jsonl")] + ".bb"
        writer = BbvWriter(bb)
        for iv in intervals:
            writer.write(iv)
        writer.close()
        subprocess.run([binary, "-loadFVFile", bb, "-maxK", "30", "-saveLabels", labels],
                       stdout=subprocess.DEVNULL, check=True)
    out = read_simpoint_labels(labels).labels
    if len(out) != len(intervals):
        sys.exit(f"{labels}: {len(out)} labels for {len(intervals)} intervals (delete it to redo)")
    return out


class Program:
    """One log's intervals and its three references."""

    def __init__(self, log: str, binary: str):
        self.name = os.path.basename(log)[: -len(".jsonl")]
        self.intervals = [iv for iv in merge_intervals(read_log(log), 10_000_000) if iv.instructions]
        self.weights = np.array([iv.instructions for iv in self.intervals], float)
        self.threads = np.array([iv.thread for iv in self.intervals])
        self.sp30 = simpoint_labels(log, self.intervals, binary)
        self.ref10 = simpoint.reference_of(self.intervals, max_k=10).labels
        truth = programs.truth_path(log)
        self.truth = read_truth(truth) if os.path.exists(truth) else None

    def phases(self, config) -> np.ndarray:
        tracker = make_tracker(config)
        fps, _ = tracker.footprints([iv.keys for iv in self.intervals], [iv.counts for iv in self.intervals])
        return np.array([m.phase for m in tracker.classify_many(fps, None, self.threads)])

    def scores(self, labels: np.ndarray) -> dict:
        s = score(LabelStream(labels, self.weights, self.threads), LabelStream(self.sp30, self.weights, self.threads))
        out = {"ari": s["ari"], "chg": s["changes_detected"], "same": s["same_agreed"], "phases": s["phases"],
               "k": s["reference_phases"], "ref10": adjusted_rand_index(labels, self.ref10)}
        if self.truth is not None:
            main = self.threads == np.bincount(self.threads - self.threads.min()).argmax() + self.threads.min()
            cpu = np.array([iv.cpu_ns or 0 for iv in self.intervals], float)[main]
            t = score_stream(cpu, labels[main], np.full(int(main.sum()), -1), self.truth)
            out["truth"], out["distinct"] = t["ari"], t["distinct"]
        return out


def fmt(x, pct=False):
    return "-" if x is None else (f"{100 * x:.0f}%" if pct else f"{x:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the logs of bench/quality/capture.py")
    ap.add_argument("--simpoint", required=True, metavar="PATH", help="SimPoint 3.2's simpoint binary")
    ap.add_argument("--configs", default="default,coarse", help=f"comma-separated, from: {', '.join(CONFIGS)}")
    args = ap.parse_args()
    names = [n for n in programs.PROGRAMS if os.path.exists(os.path.join(args.dir, n + ".jsonl"))]
    progs = [Program(os.path.join(args.dir, n + ".jsonl"), args.simpoint) for n in names]
    base = {p.name: p.scores(p.phases(tracker_config("paper", 10_000_000)))["ari"] for p in progs}
    for name in args.configs.split(","):
        config = tracker_config(name, 10_000_000)
        rows = {p.name: p.scores(p.phases(config)) for p in progs}
        print(f"\n#### `{name}`\n")
        print("| program | kind | SP30 ARI | vs paper | changes | same | phases (k) | ref10 ARI | truth ARI | own phase |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for p in progs:
            r, (kind, split) = rows[p.name], programs.PROGRAMS[p.name]
            print(f"| {p.name}{' *' if split == 'held-out' else ''} | {kind} | {r['ari']:.2f} | {r['ari'] - base[p.name]:+.2f} "
                  f"| {fmt(r['chg'], True)} | {fmt(r['same'], True)} | {r['phases']} ({r['k']}) | {r['ref10']:.2f} "
                  f"| {fmt(r.get('truth'))} | {fmt(r.get('distinct'), True)} |")
        for split in ("tune", "held-out"):
            rs = [rows[n] for n in names if programs.PROGRAMS[n][1] == split]
            mean = lambda k: np.mean([r[k] for r in rs if r.get(k) is not None]) if any(r.get(k) is not None for r in rs) else None
            worst = min(rows[n]["ari"] - base[n] for n in names if programs.PROGRAMS[n][1] == split)
            print(f"| **mean, {split}** | | **{mean('ari'):.2f}** | worst {worst:+.2f} | {fmt(mean('chg'), True)} "
                  f"| {fmt(mean('same'), True)} | | {mean('ref10'):.2f} | {fmt(mean('truth'))} | {fmt(mean('distinct'), True)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
