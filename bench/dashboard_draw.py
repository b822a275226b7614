#!/usr/bin/env python3
"""CPU per dashboard draw (view/dashboard.render through rich, into a string), at 80x24 and 160x50,
for the test suite's snapshot (random footprints: the worst case, every cell its own colour) and a
steady one (runs of one phase, as a program shows). Best of 7. At the default --refresh 4, the
share of a core drawing takes is 4 x this; view/screen.py spaces draws out when one takes long.

    python3 bench/dashboard_draw.py
"""
import dataclasses
import io
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "host"))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from test_dashboard_render import snapshot  # noqa: E402
from phasescope.view.dashboard import render  # noqa: E402


def snaps():
    """(name, snapshot): the tests' (random footprints) and a steady one."""
    s = snapshot()
    phases = np.repeat([1, 2, 3, 1, 4], 40)[:150]
    base = np.random.default_rng(1).random((5, 32))
    yield "random", s
    yield "steady", dataclasses.replace(
        s, footprints=base[phases % 5], footprint_phases=tuple(phases.tolist()),
        threads=[dataclasses.replace(t, timeline=tuple(phases.tolist())) for t in s.threads])


def main() -> None:
    print(f"load {os.getloadavg()[0]:.1f}")
    for name, s in snaps():
        for w, h in [(80, 24), (160, 50)]:
            console = Console(file=io.StringIO(), width=w, height=h, force_terminal=True, color_system="truecolor")
            best = float("inf")
            for _ in range(7):
                t = time.process_time()
                console.print(render(s, w, h))
                best = min(best, time.process_time() - t)
            print(f"{name} {w}x{h}: {best * 1000:.1f} ms CPU per draw")


if __name__ == "__main__":
    main()
