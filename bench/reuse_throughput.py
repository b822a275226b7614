#!/usr/bin/env python3
"""Reuse-distance throughput: accesses per CPU second of ``reuse_distances`` (numpy, one thread).

For each window size (16k, 64k, 1M, 2M accesses) two synthetic windows are timed: ``mixed``, a hot
set, a 32 KiB cycle and a stream of cold blocks (so distances span many log2 bins), and ``random``,
blocks drawn uniformly from a quarter as many (the 2M-access windows of
``tests/test_agent_locality.py::test_large_windows_fit`` touch ~512K blocks). The figure is the best
(minimum) CPU time of several runs, so a loaded machine slows it less than the wall clock. Also
timed: ``PhaseLocality.add_blocks`` (distances + histogram + miss-rate curve + distinct blocks),
what the host does per shipped window. To compare two trees, run it with each on PYTHONPATH in turn.

    PYTHONPATH=host python3 bench/reuse_throughput.py [--runs N] [--sizes 16384,65536,1048576,2097152]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from phasescope.engine.locality import PhaseLocality, reuse_distances


def mixed(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 3, n)
    hot = rng.integers(0, 64, n)
    cycle = np.arange(n) % 512 + 1_000
    cold = np.arange(n) + 10_000_000
    return np.choose(kind, [hot, cycle, cold]).astype(np.uint64) + np.uint64(0x7F0000000000 >> 6)


def random(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, n // 4, n).astype(np.uint64) + np.uint64(0x7F0000000000 >> 6)


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="16384,65536,1048576,2097152")
    args = ap.parse_args()
    print(f"{'kind':>6}  {'window':>9}  {'reuse_distances':>18}  {'add_blocks':>18}")
    for make in (mixed, random):
        for n in (int(s) for s in args.sizes.split(",")):
            blocks = make(n)
            loc = PhaseLocality()
            t_rd = best(lambda: reuse_distances(blocks), args.runs)
            t_add = best(lambda: loc.add_blocks(0, blocks), args.runs)
            print(f"{make.__name__:>6}  {n:>9}  {n / t_rd / 1e6:>12.2f} M/s  {n / t_add / 1e6:>12.2f} M/s")


if __name__ == "__main__":
    main()
