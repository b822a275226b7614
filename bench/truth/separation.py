#!/usr/bin/env python3
"""How far apart two activities' windows are under a code key, against each window's own noise
(issue 27, stop 41): which keys could tell activities that share an engine apart?

For each recorded truth workload (bench/truth/run.py's logs) and each key below, the windows that
lie wholly inside one activity get a vector (samples per key, summing to 1, exact keys, no
hashing). Per pair of activities: the L1 distance of their centres (``apart``) and the mean
distance of a window to its own centre (``own``). Per workload: the share of windows nearest their
own activity's centre (``nearest``, centres from all windows) and the same for the mean of two
consecutive windows of one activity (``nearest2``: what a decision over two windows could see).
And the share of samples whose call chain (the kernel's frame-pointer walk) names a caller at all.

Keys: ``page`` (4 KiB, the tracker's), ``line`` (64 bytes), ``page+line`` (both, each half the
weight: L1 is then the mean of the two distances), ``func`` (the leaf's function, by the log's
``frames``; a leaf with no name keys as its page), ``page+func``, and ``stack`` (leaf page and the
caller's page, when the kernel's frame-pointer walk gave one; else the leaf page alone).

    python3 bench/truth/separation.py --dir DIR --only py-db-A,sql-random-A [--pairs sq_point:sq_update,...]
                                      [--metrics]

``--metrics`` (stop 43) compares distances instead, on page vectors: L1 (the tracker's), L2, chi-square,
L1 on square roots (Hellinger's), and the log-likelihood of the window under a centre; per pair, the
centres' distance over a window's distance to its own (``apart/own``) and ``d'``: the mean of (to the
other centre - to its own) over its standard deviation, across the pair's windows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
sys.path.insert(0, HERE)
from truth_score import read_truth, window_span  # noqa: E402

KEYS = ("page", "line", "page+line", "func", "page+func", "stack")


def records(log: str):
    """The main thread's records of a log (the thread with the most windows), in order."""
    with open(log) as f:
        rows = [json.loads(line) for line in f]
    main = Counter(r["thread"] for r in rows).most_common(1)[0][0]
    return [r for r in rows if r["thread"] == main]


def vector(r: dict, key: str, names: dict) -> Counter:
    """One window's samples per ``key`` (a Counter of key -> share)."""
    v: Counter = Counter()
    halves = key.split("+")
    w = 1.0 / len(halves)
    if "stack" in halves:
        for s in r.get("stacks") or []:
            n, leaf = s[0], s[1]
            v["p", leaf >> 12, s[2] >> 12 if len(s) > 2 else None] += n
    else:
        for k, n in r["blocks"]:
            for h in halves:
                if h == "page":
                    v["p", k >> 12] += n * w
                elif h == "line":
                    v["l", k >> 6] += n * w
                elif h == "func":
                    name = names.get(k)
                    v[("f", name) if name else ("p", k >> 12)] += n * w
    total = sum(v.values())
    return Counter({k: x / total for k, x in v.items()}) if total else v


def l1(a: Counter, b: Counter) -> float:
    return sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def mean(vs) -> Counter:
    out: Counter = Counter()
    for v in vs:
        for k, x in v.items():
            out[k] += x / len(vs)
    return out


def labelled(rows, truth):
    """(index, activity) of each window wholly inside one activity."""
    start, end = window_span(np.array([r["cpu_ns"] for r in rows], np.float64), truth)
    out = []
    for i, (s, e) in enumerate(zip(start, end)):
        for name, ts, te in truth:
            if ts <= s and e <= te:
                out.append((i, name))
                break
    return out


def study(log: str, truth_path: str, pairs) -> dict:
    rows = records(log)
    names = {}
    for r in rows:
        for k, module, func in r.get("frames") or []:
            if func:
                names[k] = (module, func)
    lab = labelled(rows, read_truth(truth_path))
    chains = [(s[0], len(s) > 2) for r in rows for s in r.get("stacks") or []]
    out = {"callers": sum(n for n, c in chains if c) / max(sum(n for n, _ in chains), 1)}
    for key in KEYS:
        vecs = {i: vector(rows[i], key, names) for i, _ in lab}
        by = defaultdict(list)
        for i, a in lab:
            by[a].append(i)
        centre = {a: mean([vecs[i] for i in ix]) for a, ix in by.items()}
        acts = sorted(centre)

        def nearest(v):
            return min(acts, key=lambda a: l1(v, centre[a]))
        hit = sum(nearest(vecs[i]) == a for i, a in lab) / len(lab)
        two = [(i, a) for (i, a), (j, b) in zip(lab, lab[1:]) if j == i + 1 and a == b]
        hit2 = sum(nearest(mean([vecs[i], vecs[i + 1]])) == a for i, a in two) / max(len(two), 1)
        res = {"nearest": hit, "nearest2": hit2, "pairs": {}}
        for x, y in pairs:
            if x in centre and y in centre:
                own = np.mean([l1(vecs[i], centre[a]) for i, a in lab if a in (x, y)])
                cross = np.mean([l1(vecs[i], centre[y if a == x else x]) for i, a in lab if a in (x, y)])
                res["pairs"][f"{x}:{y}"] = (l1(centre[x], centre[y]), own, cross)
        out[key] = res
    return out


METRICS = {
    "L1": lambda v, c: np.abs(v - c).sum(-1),
    "L2": lambda v, c: np.sqrt(((v - c) ** 2).sum(-1)),
    "chi2": lambda v, c: ((v - c) ** 2 / (v + c + 1e-12)).sum(-1),
    "sqrt L1": lambda v, c: np.abs(np.sqrt(v) - np.sqrt(c)).sum(-1),
    "-loglik": lambda v, c: -(v * np.log(0.99 * c + 0.01 / c.shape[-1])).sum(-1),
}


def metrics(log: str, truth_path: str, pairs) -> list:
    """``[(pair, metric, apart/own, d')]`` on page vectors of the windows inside one activity."""
    rows = records(log)
    lab = labelled(rows, read_truth(truth_path))
    pages = {p: j for j, p in enumerate(sorted({k >> 12 for i, _ in lab for k, _ in rows[i]["blocks"]}))}
    v = np.zeros((len(lab), len(pages)))
    for row, (i, _) in enumerate(lab):
        for k, n in rows[i]["blocks"]:
            v[row, pages[k >> 12]] += n
    v /= v.sum(1, keepdims=True)
    acts = np.array([a for _, a in lab])
    out = []
    for x, y in pairs:
        if not ((acts == x).any() and (acts == y).any()):
            continue
        cx, cy, sel = v[acts == x].mean(0), v[acts == y].mean(0), np.isin(acts, [x, y])
        for name, f in METRICS.items():
            own = np.where(acts == x, f(v, cx), f(v, cy))[sel]
            other = np.where(acts == x, f(v, cy), f(v, cx))[sel]
            apart = (f(cx[None], cy)[0] + f(cy[None], cx)[0]) / 2
            out.append((f"{x}:{y}", name, apart / own.mean(), (other - own).mean() / (other - own).std()))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--only", required=True, help="comma-separated workload names")
    ap.add_argument("--pairs", default="sq_point:sq_update,strings:blob",
                    help="comma-separated activity pairs a:b to report")
    ap.add_argument("--metrics", action="store_true", help="compare distances on page vectors (module docstring)")
    args = ap.parse_args()
    pairs = [tuple(p.split(":")) for p in args.pairs.split(",")]
    if args.metrics:
        print("| workload | pair | distance | apart / own | d' |\n| --- | --- | --- | --- | --- |")
        for name in args.only.split(","):
            for pair, metric, ratio, d in metrics(os.path.join(args.dir, name + ".jsonl"),
                                                  os.path.join(args.dir, name + ".truth.jsonl"), pairs):
                print(f"| {name} | {pair} | {metric} | {ratio:.2f} | {d:.2f} |", flush=True)
        return 0
    print("| workload | key | nearest centre | nearest, 2 windows | pairs: centres apart, window to own, to other |")
    print("| --- | --- | --- | --- | --- |")
    for name in args.only.split(","):
        res = study(os.path.join(args.dir, name + ".jsonl"), os.path.join(args.dir, name + ".truth.jsonl"), pairs)
        print(f"| {name} | samples with a caller: {res.pop('callers'):.2f} | | | |")
        for key, r in res.items():
            ps = "; ".join(f"{p} {a:.2f}, {o:.2f}, {c:.2f}" for p, (a, o, c) in r["pairs"].items())
            print(f"| {name} | {key} | {r['nearest']:.2f} | {r['nearest2']:.2f} | {ps} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
