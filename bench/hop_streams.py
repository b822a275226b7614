#!/usr/bin/env python3
"""The shown prediction on phase streams of a server whose handler hops between threads (issue 27,
stop 45), by construction: a process runs ``--kinds`` activities in a fixed cycle, each for
``--budget`` samples of its CPU (+-10%), for ``--turns`` turns; the handler runs on one of
``--threads`` threads for a burst of about ``--burst`` samples (exponential), then on a thread drawn
at random; each thread's window is 100 of its own samples, labelled by the activity most of them
ran. Every thread's stream is fed to its own predictors (sampled mode's, ``leaving``), sharing one
``process_evidence`` table as the engine does (``--own``: each its own), and the shown prediction
is scored against last-phase per thread over ``--seeds`` seeds.

    python3 bench/hop_streams.py [--burst 5,30,100] [--seeds 25] [--own]
"""

import argparse
import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))
from phasescope.engine.config import PredictorConfig  # noqa: E402
from phasescope.engine.predict import ThreadPredictors, process_evidence  # noqa: E402

WINDOW = 100


def streams(seed: int, kinds: int, threads: int, budget: int, burst: int, turns: int) -> list:
    """Each thread's window labels (see the module docstring)."""
    rnd = random.Random(seed)
    labels, pending = [[] for _ in range(threads)], [[] for _ in range(threads)]
    thread, left = 0, 0
    for i in range(turns * kinds):
        for _ in range(int(budget * (1 + rnd.uniform(-0.1, 0.1)))):
            if left <= 0:
                thread, left = rnd.randrange(threads), int(rnd.expovariate(1 / burst)) + 1
            left -= 1
            pending[thread].append(i % kinds)
            if len(pending[thread]) == WINDOW:
                labels[thread].append(int(np.bincount(pending[thread]).argmax()))
                pending[thread] = []
    return labels


def scored(labels: list, own: bool) -> list:
    """Per thread: (windows scored, shown right less last-phase right, changes, changes foretold)."""
    evidence = None if own else process_evidence()
    tps = [ThreadPredictors(PredictorConfig(), leaving=True, evidence=evidence) for _ in labels]
    shown = [[] for _ in labels]
    at = [0] * len(labels)
    while any(at[t] < len(labels[t]) for t in range(len(labels))):
        for t in range(len(labels)):
            if at[t] < len(labels[t]):
                tps[t].observe(labels[t][at[t]])
                shown[t].append(tps[t].prediction)
                at[t] += 1  # the threads' windows interleaved, round robin
    out = []
    for s, q in zip(labels, shown):
        s, q = np.array(s), np.array(q)
        if len(s) < 2:
            continue
        change = s[1:] != s[:-1]
        out.append((len(s) - 1, int(np.sum(q[:-1] == s[1:]) - np.sum(s[:-1] == s[1:])), int(change.sum()),
                    int(np.sum((q[:-1] == s[1:])[change]))))
    return out


def summary(rows: list) -> str:
    """One line over threads' :func:`scored` rows."""
    points = np.array([100 * d / n for n, d, _, _ in rows])
    foretold = sum(r[3] for r in rows) / max(1, sum(r[2] for r in rows))
    return (f"{len(rows)} threads, shown - last-phase mean {points.mean():+.2f} points, worst {points.min():+.1f}, "
            f"below by more than 1 point {int(np.sum(points < -1))}; changes foretold {foretold:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--burst", default="5,30,100", help="comma-separated burst lengths, in samples")
    ap.add_argument("--seeds", type=int, default=25)
    ap.add_argument("--kinds", type=int, default=4)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--budget", type=int, default=1100, help="samples of each activity per turn")
    ap.add_argument("--turns", type=int, default=9)
    ap.add_argument("--own", action="store_true", help="each thread counts its own evidence")
    args = ap.parse_args()
    for burst in (int(b) for b in args.burst.split(",")):
        print(f"burst {burst}: " + summary([r for seed in range(args.seeds) for r in scored(
            streams(seed, args.kinds, args.threads, args.budget, burst, args.turns), args.own) if r[0] >= 20]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
