#!/usr/bin/env python3
"""How long `phasescope profile` takes on a long run (issue 26's goal: 60 s at 1000 Hz with stacks,
60,000 samples, exported in at most 2 s).

Records one short sampled run of tests/programs/profiled.c with stacks (``--log``), repeats its
records to at least 60,000 samples, then times reading that log and writing each format in
process (CPU time of this process, which the load barely moves, and wall time), best of
``--runs``.

    python3 bench/profile_export.py [--runs 3] [--samples 60000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "host"))
from phasescope.formats.log import log_records  # noqa: E402
from phasescope.profiles import folded, pprof, speedscope  # noqa: E402
from phasescope.profiles.model import read_profile  # noqa: E402

WRITERS = {"pprof": (pprof.write, "pb.gz"), "speedscope": (speedscope.write, "json"), "folded": (folded.write, "txt")}


def record(tmp: str) -> str:
    """A live sampled log, with stacks, of profiled.c built with frame pointers."""
    exe = os.path.join(tmp, "profiled")
    subprocess.run(["cc", "-O1", "-fno-omit-frame-pointer", "-o", exe, os.path.join(ROOT, "tests", "programs",
                                                                                    "profiled.c")], check=True)
    log = os.path.join(tmp, "run.log")
    subprocess.run([sys.executable, "-m", "phasescope.cli", "--mode", "sampled", "--no-dashboard", "--log", log,
                    "-f", exe, "400000", "300"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "host")))
    return log


def repeat(log: str, samples: int, out: str) -> int:
    """``out``: ``log``'s records repeated to at least ``samples`` samples; the samples written."""
    recs = [rec for _, rec in log_records(log)]
    per = sum(r["samples"] for r in recs)
    times = -(-samples // per)
    with open(out, "w") as f:
        for i in range(times):
            for r in recs:
                f.write(json.dumps(dict(r, thread_seq=r["thread_seq"] + i * len(recs))) + "\n")
    return per * times


def timed(fn) -> tuple:
    """(CPU s, wall s) of ``fn()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--samples", type=int, default=60_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = os.path.join(tmp, "big.log")
        n = repeat(record(tmp), a.samples, big)
        print(f"{n} samples; best of {a.runs}; load {os.getloadavg()[0]:.1f}")
        best = {}
        for _ in range(a.runs):
            profile = []
            best["read"] = min(best.get("read", (9e9,)), timed(lambda: profile.append(read_profile(big))))
            for name, (write, ext) in WRITERS.items():
                path = os.path.join(tmp, "big." + ext)
                best[name] = min(best.get(name, (9e9,)), timed(lambda: write(profile[0], path)))
        for step, (cpu, wall) in best.items():
            print(f"{step:>10}: {cpu:.3f} s CPU, {wall:.3f} s wall")
        total = best["read"][0] + best["pprof"][0]
        print(f"read + pprof: {total:.3f} s CPU (goal: 2 s)")


if __name__ == "__main__":
    main()
