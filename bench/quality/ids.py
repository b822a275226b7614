#!/usr/bin/env python3
"""Where a setting's phase IDs go (issue 28): for one log of bench/quality/capture.py, each ID of
the settled labels with its intervals, runs, first interval, the median spacing of its intervals
(an ID that comes back every few intervals is a part of a loop body longer than an interval),
the SimPoint 3.2 clusters that hold most of it, its spread (mean distance of its intervals to
its centre) and the ID whose centre is nearest (distances as a fraction of the interval). Then,
per SimPoint cluster, the IDs it is split over. Uses the log's NAME.pkl and SimPoint labels as
bench/quality/tables.py leaves them.

    python3 bench/quality/ids.py --simpoint PATH LOG [SETTING]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tables  # noqa: E402  (puts host/ on the path)
from run import tracker_config  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="NAME.jsonl of bench/quality/capture.py")
    ap.add_argument("setting", nargs="?", default="default", help="a name of bench/quality/run.py or PRESET:FIELD=VALUE")
    ap.add_argument("--simpoint", required=True, metavar="PATH")
    args = ap.parse_args()
    p = tables.load(args.log, args.simpoint)
    config = tracker_config(args.setting, 10_000_000)
    labels = p.phases(config)[0]
    fps = p._footprints[(config.method, config.buckets, config.bits, config.projection)] / config.scale
    sp, count = p.sp30, collections.Counter(labels.tolist())
    centre = {i: fps[labels == i].mean(axis=0) for i in count}
    r = p.scores(labels)
    print(f"{p.name}: {len(labels)} intervals, {len(count)} IDs, SimPoint k {len(set(sp.tolist()))}, ARI {r['ari']:.3f}\n")
    print("| ID | intervals | runs | first | median spacing | SimPoint clusters (intervals) | spread | nearest ID (distance) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for i in sorted(count, key=lambda i: -count[i]):
        at = np.flatnonzero(labels == i)
        gaps = np.diff(at)
        near = min(((np.abs(centre[i] - centre[j]).sum(), j) for j in count if j != i), default=(np.nan, "-"))
        clusters = ", ".join(f"{c} ({n})" for c, n in collections.Counter(sp[at].tolist()).most_common(2))
        print(f"| {i} | {count[i]} | {int((gaps > 1).sum()) + 1} | {at[0]} | {np.median(gaps) if len(gaps) else '-'} "
              f"| {clusters} | {np.abs(fps[at] - centre[i]).sum(axis=1).mean():.3f} | {near[1]} ({near[0]:.3f}) |")
    print("\n| SimPoint cluster | intervals | IDs (intervals) |\n| --- | --- | --- |")
    for c, n in collections.Counter(sp.tolist()).most_common():
        ids = collections.Counter(labels[sp == c].tolist()).most_common()
        print(f"| {c} | {n} | " + ", ".join(f"{i} ({k})" for i, k in ids) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
