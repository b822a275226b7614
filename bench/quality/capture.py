#!/usr/bin/env python3
"""Capture the quality harness's logs: exact-mode phasescope logs (1M-instruction intervals, which
bench/quality/run.py merges to 10M) of the real programs of bench/sampled_overhead.py: bzip2 and xz
(compressors), python3 (an interpreter), cc1 -O2 (a compiler) and sqlite3 (a database).

    python3 bench/quality/capture.py DIR && python3 bench/quality/run.py DIR/*.jsonl
"""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
sys.path.insert(0, os.path.join(HERE, ".."))
from sampled_overhead import make_data, workloads  # noqa: E402


def capture(runs: dict, out: str, interval: int) -> None:
    """Trace each ``name -> argv`` in exact mode at ``interval`` instructions into ``out/name.jsonl``."""
    for name, argv in runs.items():
        log = os.path.join(out, name + ".jsonl")
        cmd = [sys.executable, "-m", "phasescope.cli", "--no-dashboard", "--interval", str(interval), "--log", log,
               "-f", argv[0], "--", *argv[1:]]
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
        print(f"{name}: exit {r.returncode}, {sum(1 for _ in open(log))} intervals -> {log}", flush=True)


def main(runs_in=lambda out: {name.split()[0]: argv for name, argv in workloads(make_data(out), out)},
         interval: int = 1_000_000, usage: str = __doc__) -> int:
    """``script DIR``: make the inputs in DIR (``runs_in(DIR)`` -> name -> argv), then capture them."""
    if len(sys.argv) != 2:
        print(usage, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    capture(runs_in(out), out, interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
