#!/usr/bin/env python3
"""Which phase changes any predictor could foretell (issue 28, stops 41-42): per program of
bench/quality/capture.py's logs, under a tracker setting, the phase changes of its threads' live
label streams and:

- ``new``: changes into a phase the thread had not been in before (no predictor names it);
- ``seen``: changes whose context had been followed by the same next phase before, for the
  context (phase, run length), for the same preceded by the phases of the three runs before, and
  for the phase alone (the loosest: a bound on the recall, and so on the mispredictions saved, of
  any predictor that names a phase that has followed the current one before);
- ``online``: the share of last-phase's mispredictions saved by a predictor that, at each context,
  names the phase that followed it most often so far when that phase came more often than the
  run went on (+1 per change foretold, -1 per claim the run outlived);
- ``hindsight``: the same for (phase, run length) with its counts over the whole stream known in
  advance: a ceiling for any predictor that maps (phase, run length) to one next phase.

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
from collections import Counter, defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from predictions import intervals_of, main_thread, phases  # noqa: E402  (sets up the paths)
import programs  # noqa: E402
from run import tracker_config  # noqa: E402
from truth_score import changes_near_truth, read_truth  # noqa: E402

from phasescope.engine.predictors import run_key  # noqa: E402

DEPTH = 3
HEAD = ("| {what} | changes | new phase | seen: phase | seen: (phase, run) | seen: 3 runs before too "
        "| online: (phase, run) | online: 3 runs before | hindsight: (phase, run) |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def contexts(stream: list) -> list:
    """Per interval but the last: ((phase, run length), (the DEPTH runs before, phase, run length))."""
    out, before, run = [], (), 0
    for i, p in enumerate(stream[:-1]):
        if i and stream[i - 1] == p:
            run += 1
        else:
            if i:
                before = (before + (stream[i - 1],))[-DEPTH:]
            run = 1
        out.append(((p, run_key(run)), before + (p, run_key(run))))
    return out


def claims(stream: list, keys: list, hindsight: bool) -> list:
    """Per interval but the last, the change named by each context's most frequent next phase (so
    far, or over the whole stream) where it beat the run going on; the interval's own phase: none."""
    counts, out = defaultdict(Counter), []
    if hindsight:
        for k, nxt in zip(keys, stream[1:]):
            counts[k][nxt] += 1
    for k, p, nxt in zip(keys, stream, stream[1:]):
        c = counts[k]
        to = max(c, key=c.get) if c else p
        out.append(to if to != p and c[to] > c[p] else p)
        if not hindsight:
            c[nxt] += 1
    return out


def stream_figures(s: list, counted=None) -> Counter:
    """The shares' counts over one thread's stream ``s``; ``counted``: the indices of the changes to
    count (``s[i] != s[i - 1]``; default: all), whose online and hindsight figures are then the
    changes foretold rather than the mispredictions saved."""
    f = Counter()
    ctx = contexts(s)
    short, long_ = [c[0] for c in ctx], [c[1] for c in ctx]
    named = {"online_short": claims(s, short, False), "online_long": claims(s, long_, False),
             "hindsight_short": claims(s, short, True)}
    seen, followed = set(), defaultdict(set)
    for i, (p, nxt) in enumerate(zip(s, s[1:])):
        seen.add(p)
        keys = {"short": short[i], "long": long_[i], "phase": (p,)}
        if nxt != p and (counted is None or i + 1 in counted):
            f["changes"] += 1
            f["new"] += nxt not in seen
            for name, k in keys.items():
                f["seen_" + name] += nxt in followed[name, k]
            if counted is not None:
                for name, to in named.items():
                    f[name] += to[i] == nxt
        for name, k in keys.items():
            followed[name, k].add(nxt)
    if counted is None:  # mispredictions saved: +1 per change foretold, -1 per claim the run outlived
        for name, to in named.items():
            f[name] += sum((t == nxt) - (nxt == p) for t, p, nxt in zip(to, s, s[1:]) if t != p)
    return f


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
        cpu, labels = main_thread(ivs, phases(ivs, config))
        near = set(changes_near_truth(cpu, labels, read_truth(programs.truth_path(log))))
        print(row(os.path.basename(log), stream_figures(labels.tolist(), near)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
