#!/usr/bin/env python3
"""Quality harness (issue 10): phasescope's live phases and predictions against SimPoint's offline
clustering, under the paper's tracker and under the new defaults.

For each phasescope interval log (JSON Lines with ``blocks``): read its intervals (merged per
thread to ``--interval`` instructions, default 10M as the live default), build the offline
reference from those same intervals (phasescope.quality.simpoint: projection to 15 dimensions,
k-means k = 1..10, k by BIC at 90%), replay them through the phase engine under every tracker
setting asked for, and score each run (phasescope.quality.metrics).

    PYTHONPATH=host python3 bench/quality/run.py /tmp/psq/*.jsonl
    PYTHONPATH=host python3 bench/quality/run.py --configs paper,coarse,coarse+mean LOG...
    PYTHONPATH=host python3 bench/quality/run.py --segment-modes unit,fixed,variable,qphase LOG...

``--segment-modes`` compares what the tracker classifies (engine/segments.py) on logs of fine
units (``--interval 100000``), scored per unit (see ``segments_main``).

Columns: chg% = reference phase changes the tracker also changes at (Figure 6 "Different");
same% = reference same-phase pairs the tracker also keeps (Figure 6 "Same"); ARI; phases (k) =
tracker phase IDs (reference k); selfARI = the reference's own ARI against its reruns under
other seeds (mean; ``--self-seeds``), the agreement SimPoint has with itself; top20 = share of intervals in the 20 largest tracker phases;
shown/last = next-phase accuracy of the shown prediction and of last-phase; @chg = the same at
the tracker's phase changes; best = the most accurate predictor at changes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from phasescope.engine import EngineConfig, PhaseEngine
from phasescope.engine.predict import PREDICTORS, PredictorConfig
from phasescope.quality import simpoint
from phasescope.quality.labels import LabelStream
from phasescope.quality.metrics import adjusted_rand_index, score
from phasescope.formats.log import read_log
from phasescope.engine.segments import merge_intervals
from phasescope.engine.tracker import PRESETS, TrackerConfig
from phasescope.errors import InputError
from phasescope.engine.segments import SegmentConfig, segment_stream
from phasescope.quality.metrics import prediction_scores

# name -> (preset, overrides)
CONFIGS = {
    "paper": ("paper", {}),
    "default": ("default", {}),
    "coarse": ("coarse", {}),
    "paper+t256lfu": ("paper", {"table_size": 256, "evict_policy": "lfu"}),
    "paper+transition": ("paper", {"transition": True}),
    "coarse+transition": ("coarse", {"transition": True}),
    "coarse+transition+adaptive": ("coarse", {"transition": True, "adaptive": True}),
    "coarse+mean": ("coarse", {"update_policy": "mean"}),
    "coarse+adaptive": ("coarse", {"adaptive": True}),
    "coarse+mean+adaptive": ("coarse", {"update_policy": "mean", "adaptive": True}),
    "coarse+confirm3": ("coarse", {"confirm": 3}),
    "coarse+thr0.2": ("coarse", {"threshold": 0.2}),
    "paper+thr0.2": ("paper", {"threshold": 0.2}),
}
for _t in (0.15, 0.2, 0.25, 0.3):
    for _b, _bits in (("", 6), ("+fp", None)):
        CONFIGS[f"coarse{_b}+thr{_t}"] = ("coarse", {"threshold": _t, "bits": _bits})
        CONFIGS[f"coarse{_b}+mean+thr{_t}"] = ("coarse", {"threshold": _t, "bits": _bits, "update_policy": "mean"})
CONFIGS["coarse+fp"] = ("coarse", {"bits": None})
CONFIGS["paper+thr0.3"] = ("paper", {"threshold": 0.3})
CONFIGS["paper+fp+thr0.3"] = ("paper", {"threshold": 0.3, "bits": None})
CONFIGS["paper+t256lfu+thr0.2"] = ("paper", {"threshold": 0.2, "table_size": 256, "evict_policy": "lfu"})
CONFIGS["paper+fp"] = ("paper", {"bits": None})
# coarse before the merge table (256 entries, least-used eviction), and the merge table's neighbours
CONFIGS["coarse+t256lfu"] = ("coarse", {"table_size": 256, "full_policy": "evict"})
CONFIGS["coarse+stay1.25"] = ("coarse", {"stay": 1.25})
CONFIGS["coarse+t8+thr0.15+stay1.25"] = ("coarse", {"table_size": 8, "threshold": 0.15, "stay": 1.25})
for _k in (8, 12):
    CONFIGS[f"coarse+t{_k}"] = ("coarse", {"table_size": _k})


def tracker_config(name: str, interval: int) -> TrackerConfig:
    """A setting of ``CONFIGS``, or ``PRESET:FIELD=VALUE:...`` (e.g. ``paper:buckets=128:bits=none``;
    values are ints, floats, true/false or none)."""
    if name in CONFIGS:
        preset, over = CONFIGS[name]
    else:
        preset, *fields = name.split(":")
        over = dict(f.split("=", 1) for f in fields)
        over = {k: setting_value(v) for k, v in over.items()}
    d = dict(PRESETS[preset])
    d.update(over)
    return TrackerConfig(interval=interval, **d)


def setting_value(text: str):
    """A setting's value from its text: none, true/false, an int, a float, else the text."""
    low = text.lower()
    if low in ("none", "true", "false"):
        return {"none": None, "true": True, "false": False}[low]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def live_stream(results) -> LabelStream:
    preds = {n: np.array([r.predictions[n] for r in results]) for n in PREDICTORS}
    preds["shown"] = np.array([r.prediction for r in results])
    return LabelStream(np.array([r.phase for r in results]), np.array([r.instructions for r in results], float),
                       np.array([r.thread for r in results]), preds,
                       np.array([np.nan if r.confidence is None else r.confidence for r in results]))


def pct(x):
    return "   -" if x is None else f"{100 * x:5.1f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--interval", type=int, default=10_000_000, help="merge recorded intervals up to this size "
                    "(0: as recorded; default 10M, the live default)")
    ap.add_argument("--configs", default="default,coarse", help=f"comma-separated, from: {', '.join(CONFIGS)}")
    ap.add_argument("--json", metavar="FILE", help="also write every score here")
    ap.add_argument("--self-seeds", type=int, default=0, metavar="N",
                    help="also rebuild the reference under N other seeds (projection and k-means) and report "
                         "its mean ARI against the reference: SimPoint's agreement with itself (default 0)")
    ap.add_argument("--segment-modes", metavar="MODES",
                    help="compare segmentations at unit granularity instead (see segments_main): comma-separated, "
                         "from unit (the recorded units), fixed (--nominal units), variable, qphase")
    ap.add_argument("--nominal", type=int, default=10, help="segment modes: units per fixed/nominal interval (10)")
    ap.add_argument("--segment-threshold", type=float, default=SegmentConfig.threshold)
    ap.add_argument("--segment-min", type=int, default=SegmentConfig.min_units)
    ap.add_argument("--segment-max", type=int, default=None, help="variable: longest segment in units "
                    "(default --nominal x 10)")
    ap.add_argument("--reference-units", type=int, default=1, help="segment modes: build the reference from "
                    "fixed merges of this many units, each unit taking its merge's label (default 1: the units)")
    args = ap.parse_args(argv)
    if args.segment_modes:
        return segments_main(args)
    names = args.configs.split(",")
    for n in names:
        try:
            tracker_config(n, 10_000_000)
        except (KeyError, TypeError, ValueError, InputError) as e:
            ap.error(f"config {n!r}: {e}")
    rows, dump = [], {}
    for path in args.logs:
        t0 = time.monotonic()
        ivs = list(read_log(path))
        if args.interval:
            ivs = list(merge_intervals(ivs, args.interval))
        ivs = [iv for iv in ivs if iv.instructions > 0]
        ref = simpoint.reference_of(ivs)
        ref_stream = LabelStream(ref.labels, ref.instructions)
        name = path.rsplit("/", 1)[-1].replace(".jsonl", "")
        self_ari = self_agreement(ivs, ref, args.self_seeds)
        for cfg in names:
            engine = PhaseEngine(EngineConfig(tracker_config(cfg, args.interval or 10_000_000), PredictorConfig()))
            res = engine.feed_many(ivs)
            s = score(live_stream(res), ref_stream)
            s["reference_k"] = ref.k
            s["reference_self_ari"] = self_ari
            s["evictions"] = engine.tracker.evictions
            dump[f"{name}/{cfg}"] = s
            p = s["predictors"]
            best = max((n for n in p if n != "shown"), key=lambda n: (p[n]["changes"] or 0, p[n]["overall"] or 0))
            rows.append((name, cfg, len(ivs), s, best))
        print(f"# {name}: {len(ivs)} intervals, reference k = {ref.k}, {time.monotonic() - t0:.0f} s",
              file=sys.stderr)
    head = (f"{'program':<8} {'tracker':<22} {'n':>5} {'chg%':>5} {'same%':>5} {'ARI':>5} {'selfARI':>7} {'phases(k)':>9} "
            f"{'top20':>5} {'shown':>5} {'last':>5} {'@chg':>5} {'last@c':>6} {'evict':>5}  best@chg")
    print(head)
    print("-" * len(head))
    for name, cfg, n, s, best in rows:
        p = s["predictors"]
        sa = s["reference_self_ari"]
        print(f"{name:<8} {cfg:<22} {n:5d} {pct(s['changes_detected'])} {pct(s['same_agreed'])} {s['ari']:5.2f} "
              f"{'-' if sa is None else f'{sa:.2f}':>7} {s['phases']:>5}({s['reference_k']:>2}) {pct(s['top20_coverage'])} {pct(p['shown']['overall'])} "
              f"{pct(p['last_phase']['overall'])} {pct(p['shown']['changes'])} {pct(p['last_phase']['changes']):>6} "
              f"{s['evictions']:5d}  {best} {pct(p[best]['changes'])}")
    # Mean over programs per config
    print()
    print(f"{'mean':<8} {'tracker':<22} {'chg%':>5} {'same%':>5} {'(c+s)/2':>7} {'ARI':>5} {'phases':>6} {'top20':>5} "
          f"{'shown':>5} {'last':>5} {'@chg':>5}")
    for cfg in names:
        ss = [s for _, c, _, s, _ in rows if c == cfg]
        m = lambda f: float(np.mean([f(s) for s in ss if f(s) is not None])) if ss else None
        both = m(lambda s: (s["changes_detected"] + s["same_agreed"]) / 2)
        print(f"{'all':<8} {cfg:<22} {pct(m(lambda s: s['changes_detected']))} {pct(m(lambda s: s['same_agreed']))} "
              f"{pct(both):>7} {m(lambda s: s['ari']):5.2f} {m(lambda s: s['phases']):6.1f} {pct(m(lambda s: s['top20_coverage']))} "
              f"{pct(m(lambda s: s['predictors']['shown']['overall']))} "
              f"{pct(m(lambda s: s['predictors']['last_phase']['overall']))} "
              f"{pct(m(lambda s: s['predictors']['shown']['changes']))}")
    # Predictor table: mean accuracy overall and at changes, per config
    print()
    print(f"{'predictor':<14}" + "".join(f" {cfg[:18]:>18}" for cfg in names) + "   (overall / at changes, mean)")
    for pn in list(PREDICTORS) + ["shown"]:
        cells = []
        for cfg in names:
            ss = [s for _, c, _, s, _ in rows if c == cfg]
            o = np.mean([s["predictors"][pn]["overall"] for s in ss])
            ch = [s["predictors"][pn]["changes"] for s in ss if s["predictors"][pn]["changes"] is not None]
            cells.append(f"{100 * o:5.1f} / {100 * np.mean(ch) if ch else float('nan'):5.1f}".rjust(18))
        print(f"{pn:<14}" + "".join(" " + c for c in cells))
    # Issue 10's prediction goal: the shown predictor's mispredictions against last-phase's, per program
    print()
    print("shown mispredictions vs last-phase's (negative: fewer), per program; in brackets the most any "
          "predictor learning from history could cut (the changes that recur)")
    for cfg in names:
        cells = []
        for name, c, _, s, _ in rows:
            if c == cfg:
                miss = lambda pn: 1 - s["predictors"][pn]["overall"]
                bound = s["recurring_changes"]
                cells.append(f"{name} {100 * (miss('shown') / miss('last_phase') - 1):+.0f}% "
                             f"({'-' if bound is None else f'{-100 * bound:.0f}%'})")
        print(f"{cfg:<22} " + "  ".join(cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dump, f, indent=1)
    return 0


def self_agreement(ivs, ref, seeds: int):
    """Mean ARI of the reference against itself rebuilt under ``seeds`` other seeds, None for 0."""
    if not seeds:
        return None
    return float(np.mean([adjusted_rand_index(ref.labels, simpoint.reference_of(ivs, seed=simpoint.SEED + 7919 * i).labels)
                          for i in range(1, seeds + 1)]))


def _unit_labels(units, pieces, labels):
    """Each unit's label: that of the piece (per thread, in order) that holds it."""
    out = np.empty(len(units), np.int64)
    where = {}
    for i, u in enumerate(units):
        where.setdefault(u.thread, []).append(i)
    done = {}
    for p, lab in zip(pieces, labels):
        j = done.get(p.thread, 0)
        out[where[p.thread][j:j + p.units]] = lab
        done[p.thread] = j + p.units
    return out


def segments_main(args) -> int:
    """Fixed intervals against variable segments (seed 001) and Q-phase refinement (seed 003), all
    scored at the finest common granularity: every recorded unit (e.g. 100k instructions) takes the
    phase of the piece that holds it, and the SimPoint-style reference labels the units themselves
    (or, with --reference-units K, fixed merges of K units, each unit taking its merge's label).
    chg%/same%/ARI/phases are over units; the predictors' accuracy is over the pieces each mode
    classifies (a prediction is about the next piece)."""
    modes = args.segment_modes.split(",")
    cfgs = args.configs.split(",")
    rows, dump = [], {}
    for path in args.logs:
        t0 = time.monotonic()
        units = [iv for iv in read_log(path) if iv.instructions > 0]
        threads = np.array([u.thread for u in units])
        instr = np.array([u.instructions for u in units], float)
        if args.reference_units > 1:
            big = list(merge_intervals(units, args.reference_units * int(np.median(instr))))
            ref = simpoint.reference_of(big)
            ref_labels = _unit_labels(units, big, ref.labels)
        else:
            ref = simpoint.reference_of(units)
            ref_labels = ref.labels
        ref_stream = LabelStream(ref_labels, instr)
        name = path.rsplit("/", 1)[-1].replace(".jsonl", "")
        for mode in modes:
            if mode == "unit":
                pieces = units
            elif mode == "fixed":
                pieces = list(segment_stream(units, SegmentConfig("qphase", 2.0, 1, args.nominal)))  # never cuts
            elif mode == "variable":
                pieces = list(segment_stream(units, SegmentConfig(
                    "variable", args.segment_threshold, args.segment_min, args.segment_max or 10 * args.nominal)))
            else:
                pieces = list(segment_stream(units, SegmentConfig(
                    "qphase", args.segment_threshold, args.segment_min, args.nominal)))
            for cfg in cfgs:
                engine = PhaseEngine(EngineConfig(tracker_config(cfg, 10_000_000), PredictorConfig()))
                res = engine.feed_many(pieces)
                assert len(res) == len(pieces)
                labels = np.array([r.phase for r in res])
                s = score(LabelStream(_unit_labels(units, pieces, labels), instr, threads), ref_stream)
                live = live_stream(res)
                preds = dict(live.predictions)
                preds["last_phase"] = live.labels
                s["predictors"] = prediction_scores(live.labels, preds, live.threads)
                s["pieces"] = len(pieces)
                s["reference_k"] = ref.k
                dump[f"{name}/{mode}/{cfg}"] = s
                rows.append((name, mode, cfg, s))
        print(f"# {name}: {len(units)} units, reference k = {ref.k}, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    head = (f"{'program':<8} {'mode':<9} {'tracker':<10} {'pieces':>6} {'chg%':>5} {'same%':>5} {'ARI':>5} "
            f"{'phases(k)':>9} {'shown':>5} {'last':>5} {'@chg':>5}")
    print(head)
    print("-" * len(head))
    for name, mode, cfg, s in rows + [("mean", m, c, None) for m in modes for c in cfgs]:
        if s is None:
            ss = [x for _, m, c, x in rows if m == mode and c == cfg]
            mean = lambda f: float(np.mean([v for v in map(f, ss) if v is not None]))
            s = {"pieces": mean(lambda x: x["pieces"]), "changes_detected": mean(lambda x: x["changes_detected"]),
                 "same_agreed": mean(lambda x: x["same_agreed"]), "ari": mean(lambda x: x["ari"]),
                 "phases": mean(lambda x: x["phases"]), "reference_k": mean(lambda x: x["reference_k"]),
                 "predictors": {k: {"overall": mean(lambda x: x["predictors"][k]["overall"]),
                                    "changes": mean(lambda x: x["predictors"][k]["changes"])}
                                for k in ("shown", "last_phase")}}
        p = s["predictors"]
        print(f"{name:<8} {mode:<9} {cfg:<10} {s['pieces']:6.0f} {pct(s['changes_detected'])} {pct(s['same_agreed'])} "
              f"{s['ari']:5.2f} {s['phases']:>5.0f}({s['reference_k']:>2.0f}) {pct(p['shown']['overall'])} "
              f"{pct(p['last_phase']['overall'])} {pct(p['shown']['changes'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dump, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
