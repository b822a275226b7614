#!/usr/bin/env python3
"""Replay throughput of the phase engine: intervals per second on one core.

A synthetic stream of 100,000 intervals, each with 2,000 distinct blocks drawn from one of 12
code profiles (recurring phases with +-5% noise per block), fed to ``PhaseEngine.feed_many`` in
batches as ``phasescope replay`` does, with 32 buckets and a 64-entry table. Only the engine is
timed, in CPU time (hashing, footprints, table match, predictors, statistics), not stream generation
or parsing.

    python3 bench/replay_throughput.py [--intervals N] [--blocks B]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from phasescope.engine.phase_engine import BATCH, EngineConfig, PhaseEngine
from phasescope.engine.interval import Interval
from phasescope.engine.tracker import TrackerConfig


def batches(intervals: int, blocks: int, seed: int = 1):
    """Batches of synthetic intervals; each batch shares precomputed noisy variants of the profiles."""
    rng = np.random.default_rng(seed)
    profiles = [(rng.integers(0, 2**63, blocks, dtype=np.uint64), rng.integers(100, 10_000, blocks))
                for _ in range(12)]
    variants = [[(keys, (w * rng.uniform(0.95, 1.05, blocks)).astype(np.uint64)) for _ in range(4)]
                for keys, w in profiles]
    schedule = rng.integers(0, 12, intervals // 8 + 1)  # runs of 8 intervals
    seq = 0
    while seq < intervals:
        batch = []
        for _ in range(min(BATCH, intervals - seq)):
            keys, counts = variants[schedule[seq // 8]][seq % 4]
            batch.append(Interval(0, seq, int(counts.sum()), keys, counts))
            seq += 1
        yield batch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--intervals", type=int, default=100_000)
    ap.add_argument("--blocks", type=int, default=2_000)
    args = ap.parse_args()
    engine = PhaseEngine(EngineConfig(TrackerConfig(buckets=32, table_size=64)))
    busy = 0.0
    for batch in batches(args.intervals, args.blocks):
        t0 = time.process_time()  # CPU time: a loaded machine's waits are not the engine's
        engine.feed_many(batch)
        busy += time.process_time() - t0
    whole = engine.summary()["whole"]
    print(f"{whole['intervals']:,} intervals x {args.blocks:,} blocks, 32 buckets, 64-entry table: "
          f"{busy:.2f} s, {whole['intervals'] / busy:,.0f} intervals/s ({whole['phases']} phases)")


if __name__ == "__main__":
    main()
