#!/usr/bin/env python3
"""Short excursions into another phase, merged offline: a bound on a rule not built (issue 27, stop 44).

Two phases can hold one activity: a drift of its code, or a key that parts one activity's sub-paths
(ELF function keys on PostgreSQL's ``insert``: ``01110000110000000001100``). Then a thread makes
short runs of the second inside long runs of the first, and each run is two false changes. The
rule measured here: when a thread's run of phase Y of at most ``--max-run`` windows lies between
two runs of X, count it; at the ``--k``-th such run for the pair, Y is X from then on, and the
counted runs are relabelled X (what the log could correct, as the tracker's one-window look-back
does). Applied to the phases the log settles on, offline, so it bounds an online merge of the two
phases' representatives (not built: the merged phase would then match differently).

    python3 bench/truth/excursions.py --dir DIR --only NAME,... [--k 2] [--max-run 3] [-- REPLAY OPTIONS]

DIR: run.py's logs, or a directory of logs that ``sample_keys.py`` re-keyed (``OUT/VARIANT.SALT``).
Prints per workload the tracker's scores as replayed and with the rule applied.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def merge_excursions(phases: Sequence[int], k: int = 2, max_run: int = 3) -> np.ndarray:
    """``phases`` of one thread with every phase Y that made ``k`` runs of at most ``max_run``
    windows between runs of one phase X taken as X (the younger ID joins the older), from the first
    counted run on."""
    out = [int(p) for p in phases]
    alias: dict = {}
    counted: dict = {}  # (X, Y) -> the start of each counted run
    runs: list = []  # [phase, start, length] of the runs so far, aliases applied
    for i, p in enumerate(out):
        p = out[i] = alias.get(p, p)
        if runs and runs[-1][0] == p:
            runs[-1][2] += 1
            continue
        runs.append([p, i, 1])
        if len(runs) < 3 or runs[-3][0] != p or runs[-2][2] > max_run:
            continue
        starts = counted.setdefault((p, runs[-2][0]), [])
        starts.append(runs[-2][1])
        if len(starts) < k:
            continue
        old, young = sorted((p, runs[-2][0]))
        alias[young] = old
        for a in list(alias):
            alias[a] = old if alias[a] == young else alias[a]
        for j in range(starts[0], i + 1):
            out[j] = old if out[j] == young else out[j]
        for r in runs:
            r[0] = old if r[0] == young else r[0]
        out[i] = alias.get(out[i], out[i])
    return np.array(out, dtype=np.int64)


def main() -> int:
    sys.path.insert(0, HERE)
    from sample_keys import replay_config, split_argv
    argv, replay = split_argv(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="logs recorded with --log, and their truth")
    ap.add_argument("--only", required=True, help="comma-separated workload names")
    ap.add_argument("--k", type=int, default=2, help="short runs of a pair that merge it (default 2)")
    ap.add_argument("--max-run", type=int, default=3, help="the longest run that counts, windows (default 3)")
    args = ap.parse_args(argv)
    names = args.only.split(",")
    missing = [n for n in names if not os.path.exists(os.path.join(args.dir, n + ".jsonl"))]
    if missing or args.k < 1 or args.max_run < 1:
        print(f"excursions.py: no log {missing[0]}.jsonl in {args.dir}" if missing else
              "excursions.py: --k and --max-run must be at least 1", file=sys.stderr)
        return 2
    config = replay_config(replay)
    from run import classify
    from phasescope.formats.log import read_log
    from truth_score import main_thread, read_truth, score_stream
    cols = ("ari", "detected", "false_per_10s", "recur_same")
    print(f"{'workload':14s} {'':8s} " + " ".join(f"{c[:8]:>8s}" for c in cols))
    for name in names:
        log = os.path.join(args.dir, name + ".jsonl")
        intervals = main_thread(list(read_log(log)))
        cpu = np.array([iv.cpu_ns for iv in intervals], dtype=np.float64)
        phases, preds, live = classify(intervals, config)
        truth = read_truth(os.path.join(args.dir, name + ".truth.jsonl"))
        for label, stream in (("replayed", phases), ("merged", merge_excursions(phases, args.k, args.max_run))):
            s = score_stream(cpu, stream, preds, truth, live)
            print(f"{name:14s} {label:8s} " + " ".join("       -" if s[c] is None else f"{s[c]:8.2f}" for c in cols),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
