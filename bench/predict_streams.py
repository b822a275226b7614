#!/usr/bin/env python3
"""Shown predictors on synthetic phase streams whose right answer is known by construction:
random orders (no change is predictable: the best is last-phase's accuracy) and four-phase
cycles whose runs vary by one window (as runs of sampled windows do around a fixed CPU budget).
Prints next-window accuracy and the share of changes foretold of last-phase, ``measured``,
``order_length`` and the hybrid (issue 27).

    python3 bench/predict_streams.py [--held]

``--held``: random orders whose runs end in a window the tracker held, 40 seeds per cell: how often the
shown prediction falls more than a point below last-phase (docs/quality.md, stop 46).
"""

import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))
from phasescope.engine.predict import PredictorConfig, ThreadPredictors, process_evidence  # noqa: E402

SHOWN = ("last_phase", "measured", "cycle", "order_length", "hybrid")


def score(stream):
    """{predictor: (accuracy, share of changes foretold)} over the stream."""
    tp = ThreadPredictors(PredictorConfig(), leaving=True)
    right = dict.fromkeys(SHOWN, 0)
    foretold = dict.fromkeys(SHOWN, 0)
    changes = 0
    before = None
    for i, phase in enumerate(stream):
        if before is not None:
            changed = phase != stream[i - 1]
            changes += changed
            for name in SHOWN:
                right[name] += before[name] == phase
                foretold[name] += changed and before[name] == phase
        before = tp.observe(phase)
    return {n: (right[n] / (len(stream) - 1), foretold[n] / max(1, changes)) for n in SHOWN}


def random_order(seed, phases, shortest, longest, runs):
    rng = random.Random(seed)
    stream, last = [], None
    for _ in range(runs):
        last = rng.choice([p for p in range(phases) if p != last])
        stream += [last] * rng.randint(shortest, longest)
    return stream


def jittered_cycle(seed, lengths, turns, jitter=(0, 1)):
    rng = random.Random(seed)
    return [p for _ in range(turns) for p, n in enumerate(lengths) for _ in range(max(1, n + rng.choice(jitter)))]


def held_ends(stream, seed, end=1.0, inside=0.0):
    """``stream`` as (phase, held) pairs: the last window of a run held with probability ``end`` (the
    window where one activity gives way to the next fits no phase), any other with ``inside``."""
    rng = random.Random(seed)
    return [(p, rng.random() < (end if i + 1 < len(stream) and stream[i + 1] != p else inside))
            for i, p in enumerate(stream)]


def shown_on_held(pairs):
    """The prediction sampled mode shows after each (phase, held) window of one thread, and its next-window
    accuracy less last-phase's, in points."""
    tp = ThreadPredictors(PredictorConfig(), leaving=True, evidence=process_evidence())  # as the engine makes it
    shown = []
    for phase, held in pairs:
        tp.observe(phase, held)
        shown.append(tp.prediction)
    phases = [p for p, _ in pairs]
    right = sum(shown[i - 1] == phases[i] for i in range(1, len(phases)))
    stays = sum(phases[i - 1] == phases[i] for i in range(1, len(phases)))
    return shown, 100 * (right - stays) / (len(phases) - 1)


def held_grid(seeds=40, runs=40):
    """Random orders whose runs end in a held window 60% of the time (any other window 3%): per number of
    phases and range of run lengths, the streams whose shown prediction is below last-phase by more than 1
    point, the worst and the mean (issue 27, stop 46)."""
    for phases in (3, 4, 5, 6, 8, 10):
        cells = []
        for lo, hi in ((2, 6), (4, 12), (6, 30), (10, 25)):
            d = [shown_on_held(held_ends(random_order(k, phases, lo, hi, runs), k * 7 + 1, 0.6, 0.03))[1]
                 for k in range(seeds)]
            cells.append(f"runs {lo}-{hi}: {sum(x < -1 for x in d)} below, worst {min(d):+.1f}, mean {sum(d) / len(d):+.2f}")
        print(f"{phases} phases | " + " | ".join(cells), flush=True)


STREAMS = [("random, runs 2-12, 8 phases, 600 runs", random_order(11, 8, 2, 12, 600)),
           ("random, runs 6-30, 10 phases, 200 runs", random_order(3, 10, 6, 30, 200)),
           ("random, runs 6-30, 10 phases, 17 runs", random_order(4, 10, 6, 30, 17)),
           ("random, runs 6-30, 4 phases, 30 runs", random_order(5, 4, 6, 30, 30)),
           ("cycle 12/7/9/20 (+0 or 1), 5 turns", jittered_cycle(1, [12, 7, 9, 20], 5)),
           ("cycle 12/7/9/20 (+0 or 1), 20 turns", jittered_cycle(2, [12, 7, 9, 20], 20))]

if __name__ == "__main__":
    if sys.argv[1:] == ["--held"]:
        held_grid()
        sys.exit(0)
    print("stream | windows | " + " | ".join(f"{n}: accuracy, foretold" for n in SHOWN))
    for name, stream in STREAMS:
        s = score(stream)
        print(f"{name} | {len(stream)} | " + " | ".join(f"{s[n][0]:.3f}, {s[n][1]:.0%}" for n in SHOWN))
