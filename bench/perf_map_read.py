#!/usr/bin/env python3
"""CPU time of the first read of a big perf map: merged in one sort (``PerfMap``, since review r46a)
against one insertion per line (as before), on the same file in the same run. The map is node's
after compiling FUNCTIONS small functions (``node --perf-basic-prof``), or --map FILE.

    python3 bench/perf_map_read.py [--functions 150000] [--map FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))

from phasescope.sources.perf_map import PerfMap, _add, parse  # noqa: E402

SCRIPT = ("let s = 0; for (let i = 0; i < {n}; i++) {{ const f = new Function('x', `return x * ${{i}} + ${{i % 7}};`);"
          " for (let k = 0; k < 3; k++) s += f(k); }} console.log(s);")


def node_map(functions: int) -> str:
    """The perf map node leaves after compiling ``functions`` functions (moved to a temporary file)."""
    proc = subprocess.Popen(["node", "--perf-basic-prof", "-e", SCRIPT.format(n=functions)], stdout=subprocess.DEVNULL)
    if proc.wait() != 0:
        sys.exit(f"node exited with code {proc.returncode}")
    path = os.path.join(tempfile.mkdtemp(prefix="perf_map_read."), "perf.map")
    shutil.move(f"/tmp/perf-{proc.pid}.map", path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functions", type=int, default=150000)
    ap.add_argument("--map", help="a perf map to read instead of node's")
    args = ap.parse_args()
    path = args.map or node_map(args.functions)
    t = time.process_time()
    merged = PerfMap(0, path)
    merged.names([0])
    bulk = time.process_time() - t
    t = time.process_time()
    starts, ends, names = [], [], []
    with open(path) as f:
        for start, end, name in parse(f.read().splitlines()):
            _add(starts, ends, names, start, end, name)
    one = time.process_time() - t
    assert (starts, ends, names) == (merged._starts, merged._ends, merged._names)
    print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB, {len(starts)} entries kept; CPU s of the first read: "
          f"merged {bulk:.2f}, one insertion per line {one:.2f} ({one / bulk:.1f}x)")
    if not args.map:
        shutil.rmtree(os.path.dirname(path))


if __name__ == "__main__":
    main()
