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
  bench/truth/pylibs.py; NAME.truth.jsonl beside the log, placed among the intervals by its wall-clock
  stamps where it has them), on the main thread, and the share of
  activities that got a phase of their own (whose main phase is no other activity's main phase);
  ``macro truth``: the same ARI for the macro phases (engine/macro.py, its defaults) of the labels,
  as the log settles them (every ``macro_relabel`` applied); ``macro_truth_live`` (tables.py): as
  the live view showed them, each change as late as the change point saw it.

    python3 bench/quality/generalize.py --simpoint /path/to/simpoint DIR [--configs default,coarse]
        [--split tune] [--self-seed N,...] [--detail SETTINGS]

A setting is a name of bench/quality/run.py or ``PRESET:FIELD=VALUE:...``. Each setting named in
``--detail`` gets a table per program (with SimPoint's mean ARI against itself under seeds N,..., and the cost
of renumbering folded phases); then one row per setting summarises both halves. A setting is
chosen on the tuning half (``--split tune``); the held-out half is reported, never tuned on.
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

from phasescope.engine.macro import MacroConfig, macro_phases  # noqa: E402
from phasescope.engine.phase_engine import make_tracker  # noqa: E402
from phasescope.engine.phase_table import settled  # noqa: E402
from phasescope.engine.segments import merge_intervals  # noqa: E402
from phasescope.engine.stats import final_ids  # noqa: E402
from phasescope.formats.log import read_log  # noqa: E402
from phasescope.quality import simpoint  # noqa: E402
from phasescope.quality.labels import LabelStream, read_simpoint_labels  # noqa: E402
from phasescope.quality.metrics import adjusted_rand_index, score  # noqa: E402
from phasescope.sinks.bbv import BbvWriter  # noqa: E402
import programs  # noqa: E402
from run import CONFIGS, tracker_config  # noqa: E402
from truth_score import exact_truth, score_stream  # noqa: E402


def simpoint_labels(log: str, intervals, binary: str, seed: int = 0) -> np.ndarray:
    """SimPoint 3.2's labels (-maxK 30) for the log's intervals, computed once and kept; ``seed``
    other than 0: rerun with that projection and k-means seed (its agreement with itself)."""
    stem = log[: -len(".jsonl")]
    labels = stem + (f".sp30-seed{seed}.labels" if seed else ".sp30.labels")
    if not os.path.exists(labels):
        bb = stem + ".bb"
        writer = BbvWriter(bb)
        for iv in intervals:
            writer.write(iv)
        writer.close()
        seeds = ["-seedproj", str(seed), "-seedkm", str(seed)] if seed else []
        subprocess.run([binary, "-loadFVFile", bb, "-maxK", "30", *seeds, "-saveLabels", labels],
                       stdout=subprocess.DEVNULL, check=True)
    out = read_simpoint_labels(labels).labels
    if len(out) != len(intervals):
        sys.exit(f"{labels}: {len(out)} labels for {len(intervals)} intervals (delete it to redo)")
    return out


class Program:
    """One log's intervals and its three references."""

    def __init__(self, log: str, binary: str, self_seeds=()):
        self.name = os.path.basename(log)[: -len(".jsonl")]
        self.intervals = [iv for iv in merge_intervals(read_log(log), 10_000_000) if iv.instructions]
        self.weights = np.array([iv.instructions for iv in self.intervals], float)
        self.threads = np.array([iv.thread for iv in self.intervals])
        self.sp30 = simpoint_labels(log, self.intervals, binary)
        self.ref10 = simpoint.reference_of(self.intervals, max_k=10).labels
        #: SimPoint's SP30 ARI against itself under other seeds, the mean (None: not asked for)
        self.sp30_self = (float(np.mean([adjusted_rand_index(self.sp30, simpoint_labels(log, self.intervals, binary, s))
                                         for s in self_seeds])) if self_seeds else None)
        truth = programs.truth_path(log)
        #: the truth on the main thread's clock; ``placed``: by its wall-clock stamps (truth_score.exact_truth)
        self.truth, self.placed = None, False
        if os.path.exists(truth):
            main = self.threads == self.main_thread()
            self.truth, self.placed = exact_truth(truth, [iv for iv, m in zip(self.intervals, main) if m])
        self._footprints: dict = {}
        self.macro = MacroConfig()  # macro phases scored against the truth

    def main_thread(self) -> int:
        """The thread with the most intervals (the truth workloads run on one)."""
        return int(np.bincount(self.threads - self.threads.min()).argmax() + self.threads.min())

    def phases(self, config) -> np.ndarray:
        tracker = make_tracker(config)
        method = "table" if config.method == "kmeans" else config.method  # k-means projects the table's footprints
        form = (method, config.buckets, config.bits, config.projection)
        if form not in self._footprints:  # settings that share a footprint (thresholds, tables) reuse it
            self._footprints[form] = tracker.footprints([iv.keys for iv in self.intervals],
                                                        [iv.counts for iv in self.intervals])[0]
        fps = self._footprints[form]
        matches = tracker.classify_many(fps, None, self.threads)  # scored as the log settles them (relabels)
        self._macro_fps = fps / config.scale if method == "table" else None  # as the engine gives the macro tracker
        return np.array(settled(matches)), [m.merged for m in matches if m.merged is not None], matches

    def scores(self, labels: np.ndarray, merged=(), matches=None) -> dict:
        """Scores of a setting's labels; with the (gone, kept) pairs its tracker folded, also the
        SP30 ARI of the labels renumbered as if every folded phase had had its final ID all along.
        ``matches``: the tracker's classifications (labels given at the time, and relabels), which
        the engine's macro phases are made of (default: ``labels``)."""
        s = score(LabelStream(labels, self.weights, self.threads), LabelStream(self.sp30, self.weights, self.threads))
        out = {"ari": s["ari"], "chg": s["changes_detected"], "same": s["same_agreed"], "phases": s["phases"],
               "k": s["reference_phases"], "ref10": adjusted_rand_index(labels, self.ref10)}
        if self.truth is not None:
            main = self.threads == self.main_thread()
            cpu = np.array([iv.cpu_ns or 0 for iv in self.intervals], float)[main]
            none, stretch = np.full(int(main.sum()), -1), not getattr(self, "placed", False)  # pickles before stop 43
            t = score_stream(cpu, labels[main], none, self.truth, stretch=stretch)
            out["truth"], out["distinct"] = t["ari"], t["distinct"]
            # the activity time scale: macro phases of these labels, as the log settles them and live
            now, log = macro_phases(self.threads, labels if matches is None else matches, self.macro,
                                    getattr(self, "_macro_fps", None) if matches is not None else None)
            for key, macros in (("macro_truth", log), ("macro_truth_live", now)):
                out[key] = score_stream(cpu, np.array(macros)[main], none, self.truth, stretch=stretch)["ari"]
            out["macro_lag"] = macro_lag(now, log, self.threads)
        out["merges"] = len(merged)
        if merged:
            final = renumbered(labels, merged)
            out["renumbered"] = score(LabelStream(final, self.weights, self.threads),
                                      LabelStream(self.sp30, self.weights, self.threads))["ari"]
            out["folded_share"] = float(self.weights[final != labels].sum() / self.weights.sum())
        return out


def macro_lag(live, log, threads) -> float:
    """Mean intervals by which the live view's macro phase reaches each change of the log's (each
    thread's; a change it never reaches before the log's next counts until then)."""
    lags, rows = [], {}
    for i, t in enumerate(threads):
        rows.setdefault(int(t), []).append(i)
    for rs in rows.values():
        a, b = [live[i] for i in rs], [log[i] for i in rs]
        starts = [j for j in range(1, len(b)) if b[j] != b[j - 1]]
        for n, j in enumerate(starts):
            end = starts[n + 1] if n + 1 < len(starts) else len(b)
            lags.append(next((k - j for k in range(j, end) if a[k] == b[j]), end - j))
    return float(np.mean(lags)) if lags else 0.0


def renumbered(labels: np.ndarray, merged) -> np.ndarray:
    """``labels`` with each phase folded away (``merged``: (gone, kept) pairs) replaced by its final phase."""
    final = final_ids(dict(merged))
    return np.array([final.get(int(x), int(x)) for x in labels])


def fmt(x, pct=False):
    return "-" if x is None else (f"{100 * x:.0f}%" if pct else f"{x:.2f}")


def per_program(name: str, progs, rows: dict, base: dict) -> None:
    """One setting's table: every program, then the mean of each half."""
    print(f"\n#### `{name}`\n")
    print("| program | kind | SP30 ARI | vs paper | SimPoint vs itself | changes | same | phases (k) | ref10 ARI "
          "| truth ARI | macro truth ARI | own phase | merges: share folded, SP30 ARI renumbered |")
    print("|" + " --- |" * 13)
    for p in progs:
        r, (kind, split) = rows[p.name], programs.PROGRAMS[p.name]
        print(f"| {p.name}{' *' if split == 'held-out' else ''} | {kind} | {r['ari']:.2f} | {r['ari'] - base[p.name]:+.2f} "
              f"| {fmt(p.sp30_self)} "
              f"| {fmt(r['chg'], True)} | {fmt(r['same'], True)} | {r['phases']} ({r['k']}) | {r['ref10']:.2f} "
              f"| {fmt(r.get('truth'))} | {fmt(r.get('macro_truth'))} | {fmt(r.get('distinct'), True)} "
              f"| {folds(r)} |")
    for split in sorted({programs.PROGRAMS[n][1] for n in rows}, reverse=True):  # tune, then held-out
        m = half(rows, base, split)
        selfs = [p.sp30_self for p in progs if p.sp30_self is not None and programs.PROGRAMS[p.name][1] == split]
        print(f"| **mean, {split}** | | **{m['ari']:.2f}** | worst {m['worst']:+.2f} "
              f"| {fmt(np.mean(selfs) if selfs else None)} | {fmt(m['chg'], True)} "
              f"| {fmt(m['same'], True)} | | {m['ref10']:.2f} | {fmt(m['truth'])} | {fmt(m['macro_truth'])} "
              f"| {fmt(m['distinct'], True)} | |")


def folds(r: dict) -> str:
    """A program's merges, the share of its instructions labelled with a phase later folded away,
    and its SP30 ARI once renumbered."""
    if not r["merges"]:
        return "0"
    return f"{r['merges']}: {fmt(r['folded_share'], True)}, {r['renumbered']:.2f}"


def half(rows: dict, base: dict, split: str) -> dict:
    """Means over one half's programs of each score, and its worst ARI against the paper preset's."""
    names = [n for n in rows if programs.PROGRAMS[n][1] == split]
    out = {}
    for k in ("ari", "chg", "same", "ref10", "truth", "macro_truth", "distinct"):
        vals = [rows[n][k] for n in names if rows[n].get(k) is not None]
        out[k] = float(np.mean(vals)) if vals else None
    out["worst"] = min(rows[n]["ari"] - base[n] for n in names)
    return out


def summary(results: dict, base: dict) -> None:
    """One row per setting: both halves (held-out marked *), all three scorings."""
    print("\n| setting | SP30 ARI | SP30 ARI * | worst vs paper | worst vs paper * | changes * | same * "
          "| ref10 ARI | ref10 ARI * | truth ARI | truth ARI * | macro truth ARI | macro truth ARI * "
          "| own phase | own phase * |")
    print("| --- |" + " --- |" * 14)
    for name, rows in results.items():
        t, h = half(rows, base, "tune"), half(rows, base, "held-out")
        print(f"| `{name}` | {t['ari']:.2f} | {h['ari']:.2f} | {t['worst']:+.2f} | {h['worst']:+.2f} "
              f"| {fmt(h['chg'], True)} | {fmt(h['same'], True)} | {t['ref10']:.2f} | {h['ref10']:.2f} "
              f"| {fmt(t['truth'])} | {fmt(h['truth'])} | {fmt(t['macro_truth'])} | {fmt(h['macro_truth'])} "
              f"| {fmt(t['distinct'], True)} | {fmt(h['distinct'], True)} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the logs of bench/quality/capture.py")
    ap.add_argument("--simpoint", required=True, metavar="PATH", help="SimPoint 3.2's simpoint binary")
    ap.add_argument("--configs", default="default,coarse",
                    help=f"comma-separated, from: {', '.join(CONFIGS)}; or PRESET:FIELD=VALUE:... (bench/quality/run.py)")
    ap.add_argument("--split", choices=("tune", "held-out", "all"), default="all",
                    help="score only one half (tune on the tuning half without looking at the other)")
    ap.add_argument("--self-seed", default="", metavar="N,...",
                    help="also run SimPoint with -seedproj N -seedkm N for each N and show its mean ARI against "
                         "the default seeds' labels: how far SimPoint agrees with itself (default: not run)")
    ap.add_argument("--detail", default=None, metavar="CONFIGS",
                    help="comma-separated settings that also get a table per program (default: every one)")
    args = ap.parse_args()
    names = [n for n in programs.PROGRAMS if os.path.exists(os.path.join(args.dir, n + ".jsonl"))
             and args.split in ("all", programs.PROGRAMS[n][1])]
    seeds = [int(x) for x in args.self_seed.split(",") if x]
    progs = [Program(os.path.join(args.dir, n + ".jsonl"), args.simpoint, seeds) for n in names]
    base = {p.name: p.scores(*p.phases(tracker_config("paper", 10_000_000)))["ari"] for p in progs}
    configs = args.configs.split(",")
    detail = configs if args.detail is None else args.detail.split(",")
    results = {}
    for name in configs:
        config = tracker_config(name, 10_000_000)
        results[name] = {p.name: p.scores(*p.phases(config)) for p in progs}
        if name in detail:
            per_program(name, progs, results[name], base)
    if args.split == "all":
        summary(results, base)
    else:
        print(f"\n| setting ({args.split}) | SP30 ARI | worst vs paper | changes | same | ref10 ARI | truth ARI "
              "| macro truth ARI | own phase |")
        print("| --- |" + " --- |" * 8)
        for name, rows in results.items():
            m = half(rows, base, args.split)
            print(f"| `{name}` | {m['ari']:.2f} | {m['worst']:+.2f} | {fmt(m['chg'], True)} | {fmt(m['same'], True)} "
                  f"| {m['ref10']:.2f} | {fmt(m['truth'])} | {fmt(m['macro_truth'])} | {fmt(m['distinct'], True)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
