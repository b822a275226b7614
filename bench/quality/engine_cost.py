#!/usr/bin/env python3
"""Host CPU per interval of the phase engine, fed one interval at a time as a live run feeds it
(``PhaseEngine.feed``: footprint, table match, predictors, statistics, macro phases), on recorded
logs (bench/quality/capture.py) merged to 10M-instruction intervals. CPU time of this process
(``time.process_time``), so a loaded machine slows it less than wall time; log parsing is not
counted. Each setting runs on the same intervals, alternating, ``--rounds`` times; the median is kept.

    python3 bench/quality/engine_cost.py LOG... [--configs paper,default] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
sys.path.insert(0, HERE)

from phasescope.engine.phase_engine import EngineConfig, PhaseEngine  # noqa: E402
from phasescope.engine.segments import merge_intervals  # noqa: E402
from phasescope.formats.log import read_log  # noqa: E402
from run import tracker_config  # noqa: E402


def cost(intervals, config) -> float:
    """CPU seconds per interval to feed ``intervals`` one at a time to a fresh engine."""
    engine = PhaseEngine(EngineConfig(config))
    t0 = time.process_time()
    for iv in intervals:
        engine.feed(iv)
    return (time.process_time() - t0) / len(intervals)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--configs", default="paper,default")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    configs = args.configs.split(",")
    print("| log | intervals | blocks per interval | " + " | ".join(f"`{c}` ms/interval" for c in configs) + " |")
    print("| --- | --- | --- |" + " --- |" * len(configs))
    for log in args.logs:
        ivs = [iv for iv in merge_intervals(read_log(log), 10_000_000) if iv.instructions]
        runs = {c: [] for c in configs}
        for _ in range(args.rounds):
            for c in configs:
                runs[c].append(cost(ivs, tracker_config(c, 10_000_000)))
        blocks = np.mean([len(iv.keys) for iv in ivs])
        print(f"| {os.path.basename(log)} | {len(ivs)} | {blocks:.0f} | "
              + " | ".join(f"{1000 * np.median(runs[c]):.3f}" for c in configs) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
