#!/usr/bin/env python3
"""Does ``retire`` cost more per interval as a run grows? CPU time per interval (``process_time``)
of ``confirmed`` and ``confirmed:retire=0``, fed the same intervals alternately in blocks of 1000
(paired under load), printed every 10,000. The recorded logs are cycled, each pass with its block
keys shifted (new code, so new phases keep coming and short-lived ones keep retiring).

    python3 bench/quality/retire_cost.py TOTAL LOG...
"""

from __future__ import annotations

import dataclasses
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

CONFIGS = {"retire 10": "confirmed", "retire 0": "confirmed:retire=0"}
BLOCK, REPORT = 1000, 10_000


def stream(base):
    """``base`` over and over, each pass's block keys shifted by another odd constant."""
    p = 0
    while True:
        off = np.uint64(p * 0x9E3779B97F4A7C15 % (1 << 63))
        for iv in base:
            yield dataclasses.replace(iv, keys=iv.keys + off) if p else iv
        p += 1


def main() -> int:
    total, logs = int(sys.argv[1]), sys.argv[2:]
    base = [iv for log in logs for iv in merge_intervals(read_log(log), 10_000_000) if iv.instructions]
    engines = {k: PhaseEngine(EngineConfig(tracker_config(v, 10_000_000))) for k, v in CONFIGS.items()}
    spent = dict.fromkeys(CONFIGS, 0.0)
    feed, done = stream(base), 0
    print(f"{len(base)} intervals a pass")
    while done < total:
        block = [next(feed) for _ in range(BLOCK)]
        for k, engine in engines.items():
            t0 = time.process_time()
            for iv in block:
                engine.feed(iv)
            spent[k] += time.process_time() - t0
        done += BLOCK
        if done % REPORT == 0:
            t = engines["retire 10"].tracker
            print(done, " ".join(f"{k}: {1000 * spent[k] / REPORT:.3f} ms/interval" for k in CONFIGS),
                  f"retired {t.retired}, IDs {t.next_id}", flush=True)
            spent = dict.fromkeys(CONFIGS, 0.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
