#!/usr/bin/env python3
"""Which phase changes any predictor could foretell (issue 28, stop 41): per program of
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

    python3 bench/quality/foreseeable.py DIR [DIR...] [--config default] [--half tune|held-out|all]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter, defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from predictions import intervals_of, phases  # noqa: E402  (sets up the paths)
import programs  # noqa: E402
from run import tracker_config  # noqa: E402

from phasescope.engine.predictors import run_key  # noqa: E402

DEPTH = 3


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


def net(stream: list, keys: list, hindsight: bool) -> int:
    """Mispredictions saved against last-phase by naming each context's most frequent next phase
    (so far, or over the whole stream) where it beat the run going on."""
    counts, saved = defaultdict(Counter), 0
    if hindsight:
        for k, nxt in zip(keys, stream[1:]):
            counts[k][nxt] += 1
    for k, p, nxt in zip(keys, stream, stream[1:]):
        c = counts[k]
        to = max(c, key=c.get) if c else p
        if to != p and c[to] > c[p]:
            saved += 1 if nxt == to else -1 if nxt == p else 0
        if not hindsight:
            c[nxt] += 1
    return saved


def figures(labels: np.ndarray, threads: np.ndarray) -> dict:
    f = Counter()
    for t in np.unique(threads):
        s = labels[threads == t].tolist()
        ctx = contexts(s)
        short, long_ = [c[0] for c in ctx], [c[1] for c in ctx]
        seen, followed = set(), defaultdict(set)
        for i, (p, nxt) in enumerate(zip(s, s[1:])):
            seen.add(p)
            keys = {"short": short[i], "long": long_[i], "phase": (p,)}
            if nxt != p:
                f["changes"] += 1
                f["new"] += nxt not in seen
                for name, k in keys.items():
                    f["seen_" + name] += nxt in followed[name, k]
            for name, k in keys.items():
                followed[name, k].add(nxt)
        f["online_short"] += net(s, short, False)
        f["online_long"] += net(s, long_, False)
        f["hindsight_short"] += net(s, short, True)
    return f


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", help="directories of bench/quality/capture.py's logs")
    ap.add_argument("--config", default="default", help="a setting of bench/quality/run.py")
    ap.add_argument("--half", default="tune", choices=("tune", "held-out", "all"))
    args = ap.parse_args()
    pct = lambda a, b: f"{100 * a / b:.0f}%" if b else "-"
    print("| program | changes | new phase | seen: phase | seen: (phase, run) | seen: 3 runs before too "
          "| online: (phase, run) | online: 3 runs before | hindsight: (phase, run) |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, (_, half) in programs.PROGRAMS.items():
        logs = [os.path.join(d, name + ".jsonl") for d in args.dirs if os.path.exists(os.path.join(d, name + ".jsonl"))]
        if not logs or args.half not in ("all", half):
            continue
        ivs = intervals_of(logs[0])
        threads = np.array([iv.thread for iv in ivs])
        f = figures(phases(ivs, tracker_config(args.config, 10_000_000)), threads)
        n = f["changes"]
        print(f"| {name} | {n} | {pct(f['new'], n)} | {pct(f['seen_phase'], n)} | {pct(f['seen_short'], n)} "
              f"| {pct(f['seen_long'], n)} | {pct(f['online_short'], n)} | {pct(f['online_long'], n)} "
              f"| {pct(f['hindsight_short'], n)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
