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


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, argv in workloads(make_data(out), out):
        log = os.path.join(out, name.split()[0] + ".jsonl")
        cmd = [sys.executable, "-m", "phasescope.cli", "--no-dashboard", "--interval", "1000000", "--log", log,
               "-f", argv[0], "--", *argv[1:]]
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        print(f"{name}: exit {r.returncode}, {sum(1 for _ in open(log))} intervals -> {log}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
