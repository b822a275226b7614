"""The demo target: a python3 program with distinct, recurring phases in native code.

Each phase spends its time in a different part of the interpreter or a different shared library
(zlib's deflate, OpenSSL's SHA-256, the regex engine, the sort and the JSON codec), so the
branch footprints differ while the pattern repeats: the tracker should find one phase ID per
kind of work, and the RLE Markov predictor should learn the schedule. Each step does a fixed
amount of work (not a fixed time), so the instruction stream is the same on every run.

Run directly: ``python3 -m phasescope.workloads.phased [--rounds N] [--scale S]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import threading
import zlib

_rng = random.Random(42)
_WORDS = ["phase", "tracking", "stalker", "branch", "footprint", "markov", "interval", "bucket", "x86", "predict"]
_TEXT = " ".join(_rng.choice(_WORDS) for _ in range(2_000)).encode()
_NUMBERS = [_rng.randrange(1 << 30) for _ in range(4_000)]
_DOC = {"rows": [{"id": i, "name": f"row{i}", "tags": ["a", "b", i % 7], "v": i * 0.5} for i in range(40)]}
_WORD = re.compile(rb"(\w+)ing\b|\b(p\w+e)\b")

# Each unit of work is small (well under a million instructions) and repeated, so that every
# 10M-instruction interval of a step sees the same mix of code: one stable footprint per step.


def deflate(n):
    for _ in range(n * 20):
        zlib.compress(_TEXT, 6)


def sha256(n):
    for _ in range(n * 600):
        hashlib.sha256(_TEXT).digest()


def regex(n):
    for _ in range(n * 10):
        sum(1 for _ in _WORD.finditer(_TEXT))


def sort(n):
    for _ in range(n * 20):
        sorted(_NUMBERS)


def codec(n):
    for _ in range(n * 100):
        json.loads(json.dumps(_DOC))


#: The main thread's schedule: one round. Each step is 30-40 intervals of 10M instructions, so a
#: traced round shows six steps (five kinds of work, deflate twice) within a few seconds.
SCHEDULE = [(deflate, 11), (sha256, 12), (deflate, 11), (regex, 3), (sort, 9), (codec, 4)]


def background(rounds: int, scale: int) -> None:
    """A second thread with its own, simpler schedule, started after the first round."""
    for _ in range(rounds):
        sha256(8 * scale)
        sort(6 * scale)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="rounds of the schedule (default 6)")
    parser.add_argument("--scale", type=int, default=1, help="work per step multiplier (default 1)")
    parser.add_argument("--no-thread", action="store_true", help="do not start the second thread")
    args = parser.parse_args(argv)
    worker = None
    for r in range(args.rounds):
        for step, amount in SCHEDULE:
            step(amount * args.scale)
        if r == 0 and not args.no_thread:
            worker = threading.Thread(target=background, args=(args.rounds - 1, args.scale), name="background")
            worker.start()
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    if worker:
        worker.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
