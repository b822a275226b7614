#!/usr/bin/env python3
"""The predictors of this tree and of another tree, fed the same random (phase, held) streams (random
orders, jittered cycles, long runs; 4 to 300 phases, so the confidence tables fill and evict):
every prediction, confidence and remaining run equal, window by window, in both modes. For a
change that must leave the predictors' behaviour as it was (issue 31: their per-window cost).

    python3 bench/predictor_equiv.py OTHER/host [SEEDS]
"""
import importlib
import os
import random
import sys

HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host")


def load(path: str):
    """phasescope.engine.predict and .config imported from ``path`` (a tree's host/)."""
    for m in [m for m in sys.modules if m.startswith("phasescope")]:
        del sys.modules[m]
    sys.path.insert(0, path)
    mod = importlib.import_module("phasescope.engine.predict")
    cfg = importlib.import_module("phasescope.engine.config")
    sys.path.pop(0)
    return mod, cfg


def main() -> None:
    if len(sys.argv) < 2 or not os.path.isdir(os.path.join(sys.argv[1], "phasescope")):
        sys.exit("usage: python3 bench/predictor_equiv.py OTHER/host [SEEDS] (another tree's host/ directory)")
    new, ncfg = load(HOST)
    old, ocfg = load(sys.argv[1])
    assert new.__file__ != old.__file__, (new.__file__, old.__file__)
    total = 0
    for seed in range(int(sys.argv[2]) if len(sys.argv) > 2 else 6):
        rng = random.Random(seed)
        for leaving in (True, False):
            a = new.ThreadPredictors(ncfg.PredictorConfig(), leaving=leaving)
            b = old.ThreadPredictors(ocfg.PredictorConfig(), leaving=leaving)
            phases = rng.choice([4, 12, 60, 300])
            cycle = [rng.randrange(phases) for _ in range(rng.randrange(2, 9))]
            phase, steps = cycle[0], 0
            for i in range(20000):
                mode = (i // 2000) % 3  # random, cyclic with varying runs, long runs
                if mode == 0:
                    phase = rng.randrange(phases) if rng.random() < 0.4 else phase
                elif mode == 1:
                    steps += 1
                    if steps >= rng.choice([2, 3, 3, 4, 7]):
                        steps, phase = 0, cycle[(cycle.index(phase) + 1) % len(cycle)] if phase in cycle else cycle[0]
                else:
                    phase = rng.randrange(phases) if rng.random() < 0.05 else phase
                held = rng.random() < 0.1
                oa, ob = a.observe(phase, held), b.observe(phase, held)
                assert oa == ob, (seed, i, oa, ob)
                shown = (a.prediction, a.confidence, a.expected_remaining)
                assert shown == (b.prediction, b.confidence, b.expected_remaining), (seed, i)
                total += 1
            assert len(a.confidences.table) == len(b.confidences.table)
            assert list(a.confidences.table._d.items()) == list(b.confidences.table._d.items())
    print(f"equal on {total} windows; confidence tables {len(a.confidences.table)} entries")


if __name__ == "__main__":
    main()
