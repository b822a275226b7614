#!/usr/bin/env python3
"""Host CPU per sampled window of the phase engine under two source trees (e.g. main's and a
branch's ``host``), fed one window at a time as a live run feeds it (``PhaseEngine.feed``), on
bench/truth/run.py's logs. CPU time of a child process per tree and log (``time.process_time``,
log parsing not counted), the trees alternating, ``--rounds`` times; the median is kept.

    python3 bench/truth/tracker_cost.py LOG... --trees OLD_HOST,NEW_HOST [--config split] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np

CHILD = """
import sys, time
from phasescope.engine import EngineConfig, PhaseEngine
from phasescope.engine.tracker import preset
from phasescope.formats.log import read_log
sys.path.insert(0, {here!r})
from truth_score import main_thread
ivs = main_thread(list(read_log({log!r})))
engine = PhaseEngine(EngineConfig(tracker=preset({config!r})))
t = time.process_time()
for iv in ivs:
    engine.feed(iv)
print((time.process_time() - t) / len(ivs) * 1e6)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--trees", required=True, help="two host directories, comma-separated")
    ap.add_argument("--config", default="sampled", help="the tracker preset (sampled mode's default: sampled)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    trees = args.trees.split(",")
    here = os.path.dirname(os.path.abspath(__file__))
    print("| log | " + " | ".join(f"us per window, {t}" for t in trees) + " | ratio |\n| --- " * 1
          + "| --- " * (len(trees) + 1) + "|")
    for log in args.logs:
        times = {t: [] for t in trees}
        for _ in range(args.rounds):
            for t in trees:
                out = subprocess.run([sys.executable, "-c", CHILD.format(here=here, log=log, config=args.config)], check=True,
                                     capture_output=True, text=True, env={**os.environ, "PYTHONPATH": t})
                times[t].append(float(out.stdout.split()[-1]))
        med = [float(np.median(times[t])) for t in trees]
        print(f"| {os.path.basename(log)} | " + " | ".join(f"{m:.0f}" for m in med) + f" | {med[-1] / med[0]:.3f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
