#!/usr/bin/env python3
"""Every new phase the page tracker makes on recorded truth logs (bench/truth/run.py's), beside the
nearest phase it already had (issue 27, stop 48): the distance (L1, 0..2), the share of the new
vector's samples on that phase's pages (its buckets over ``SUPPORT``) and of that phase's weight on
the new vector's pages, and whether the two are one activity by the truth (``SAME``: the new phase
is a recurrence the tracker missed; ``diff``: rightly new). The busiest thread, replayed alone with
the sampled defaults (a pair that becomes a second centre of a phase, stop 48's rule, is listed too).

    python3 bench/truth/new_phases.py DIR:NAME... [--near 1.6]
"""

import argparse
import os
import sys
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402  (puts the host package on the path)
from phasescope.engine import page_tracker  # noqa: E402
from truth_score import window_span  # noqa: E402


def watch(events: list) -> None:
    """Record (window, nearest phase, distance, coverage both ways) at each new phase made."""
    cls, new = page_tracker.PageTracker._classify, page_tracker.PageTracker._new

    def classify(self, v, thread):
        self._seen = getattr(self, "_seen", -1) + 1
        return cls(self, v, thread)

    def made(self, v, thread, nearest):
        live = self._ids[: self._used] >= 0
        if live.any():
            d = np.where(live, self._distances(v), np.inf)
            j = int(d.argmin())
            rep = self._reps[j]
            events.append((self._seen, int(self._ids[j]), float(d[j]), float(v[rep > page_tracker.SUPPORT].sum()),
                           float(rep[v > 0].sum())))
        return new(self, v, thread, nearest)
    page_tracker.PageTracker._classify, page_tracker.PageTracker._new = classify, made


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", metavar="DIR:NAME")
    ap.add_argument("--near", type=float, default=1.6, help="list only new phases nearer than this to an older one")
    args = ap.parse_args()
    by_name = {w.name: w for w in run.WORKLOADS}
    for arg in args.logs:
        d, _, name = arg.partition(":")
        if name not in by_name or not os.path.exists(os.path.join(d, name + ".jsonl")):
            print(f"new_phases.py: {arg}: not DIR:NAME of a recorded workload", file=sys.stderr)
            return 2
    rp = argparse.ArgumentParser()
    run.add_engine_options(rp)
    config = run.engine_config_from_args(rp.parse_args([]), interval_default=None, preset_default="sampled")
    events: list = []
    watch(events)
    for arg in args.logs:
        d, _, name = arg.partition(":")
        busy = run.main_thread(list(run.read_log(os.path.join(d, name + ".jsonl"))))
        truth = run.read_truth(by_name[name].truth(d))
        events.clear()
        phases, _, _ = run.classify(busy, config)
        start, end = window_span(np.array([iv.cpu_ns for iv in busy], dtype=np.float64), truth)
        mid = (start + end) / 2
        seg = np.searchsorted(np.array([s for _, s, _ in truth]), mid, side="right") - 1
        act = np.array([truth[s][0] if s >= 0 and m <= truth[-1][2] else "" for s, m in zip(seg, mid)])
        main_of = {}
        for p in set(phases.tolist()):
            c = Counter(act[phases == p].tolist())
            c.pop("", None)
            main_of[p] = c.most_common(1)[0][0] if c else ""
        for i, p, dist, cov, back in events:
            if dist < args.near:
                a, b = act[i] if i < len(act) else "", main_of.get(p) or "-"
                print(f"{name:14s} window {i:4d} {a or '-':10s} nearest {p} ({b}) {dist:.2f} apart, "
                      f"on its pages {cov:.2f}, it on these {back:.2f} {'SAME' if a and a == b else 'diff'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
