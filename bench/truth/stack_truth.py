#!/usr/bin/env python3
"""Sampled phases against each window's own activity, read from its samples' call stacks.

For a workload whose activities are functions of their own (bench/truth/goserver.go's
``main.act<Kind>``), each sample names its activity: the first frame of its stack (leaf first)
whose name starts with ``--prefix``. A window's activity is the one most of its samples name
(windows where under half the samples name one, or no activity has 60% of those that do, are left
out: the runtime's own threads, windows that straddle a change). No time placement is involved, so
it holds where the wall-clock truth cannot be placed on one thread's windows: a runtime that moves
its work between threads (Go's goroutines; docs/quality.md, stop 44). Replays the tracker of this
tree on the log (the defaults, or replay options after ``--``) and prints the ARI over every
thread's windows and over the busiest thread's.

    stack_truth.py LOG... [--prefix main.act] [-- REPLAY OPTIONS]
"""

import argparse
import os
import sys
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
sys.path.insert(0, HERE)
from phasescope.errors import InputError  # noqa: E402
from phasescope.formats.log import read_log  # noqa: E402
from sample_keys import replay_config, split_argv  # noqa: E402


def window_activity(iv, prefix: str):
    """The activity most of the window's samples name (None where too few name one)."""
    named = Counter()
    for stack in iv.stacks or []:
        count, frames = stack[0], stack[1:]
        for key in frames:
            name = (iv.frames.get(key) or (None, None))[1] or ""
            if name.startswith(prefix):
                named[name[len(prefix):].lower()] += count
                break
    total = sum(named.values())
    if not total or total < 0.5 * iv.samples:
        return None
    top, n = named.most_common(1)[0]
    return top if n >= 0.6 * total else None


def scored(rows: list, busiest: int) -> str:
    """The ARI of (activity, phase, thread) rows, over every thread and over the ``busiest`` one."""
    from sklearn.metrics import adjusted_rand_score
    acts, ph, th = (np.array(x) for x in zip(*rows))
    one = th == busiest
    return (f"ARI every thread {adjusted_rand_score(acts, ph):.2f}, busiest thread "
            f"{adjusted_rand_score(acts[one], ph[one]):.2f} ({int(one.sum())}); activities "
            f"{len(set(acts.tolist()))}, phases {len(set(ph.tolist()))}")


def main() -> int:
    argv, replay = split_argv(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--prefix", default="main.act", help="the activity functions' common name prefix")
    args = ap.parse_args(argv)
    from run import classify  # bench/truth/run.py (imported here: bench/quality has a run.py too)
    config = replay_config(replay)
    for path in args.logs:
        try:
            ivs = list(read_log(path))
        except InputError as e:
            print(f"stack_truth.py: {e}", file=sys.stderr)
            return 2
        rows = [(a, p, iv.thread) for iv, p in zip(ivs, classify(ivs, config)[0])
                if (a := window_activity(iv, args.prefix))]
        if not rows:
            print(f"{path}: no window's stacks name an activity (--prefix {args.prefix}; recorded with stacks?)")
            continue
        print(f"{os.path.basename(path)}: {len(ivs)} windows, {len(rows)} named; "
              + scored(rows, Counter(iv.thread for iv in ivs).most_common(1)[0][0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
