#!/usr/bin/env python3
"""An observer's whole CPU when it runs the program itself, as a user would: start-up, every
window, the end report (with the hot block's disassembly) and the exit, against the target's.

``bench/peers.py`` wraps the program in ``/usr/bin/time``, so phasescope follows it as a forked
child: the report then names no hot block and capstone never loads. Here the observer spawns the
program directly, and both figures are read from the observer's own ``/proc/PID/stat`` once it has
exited but before it is reaped (``waitid(WNOWAIT)``): ``utime + stime`` is the observer's every
thread (its interpreter's teardown included), ``cutime + cstime`` the target it waited for. Clock
ticks (10 ms), so use several runs; each figure is the median (and min) of ``--runs``, in
interleaved rounds.

With several ``--rounds`` (e.g. ``70,430``: a 10 s and a 70 s program) every observer runs each
length in the same rounds, and a least-squares line through all its runs, observer CPU against
the target's CPU, splits its cost into a fixed part (the intercept: start-up, report, exit) and a
per-second part (the slope: % of a core per second of the target's CPU).

    python3 bench/observer_total.py [--runs 5] [--rates 97,1000] [--rounds 60[,430...]] [--vs OTHER/host]
                                    [--perf [--no-g]] [--program PATH ARGS...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from observer_steady import cpu_bound, observers  # noqa: E402  (the same observers, in the same order)

TICK = os.sysconf("SC_CLK_TCK")


def run_once(prefix: list, target: list):
    """(observer CPU, target CPU) in seconds, from the exited observer's /proc/PID/stat."""
    p = subprocess.Popen(prefix + target, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
        with open(f"/proc/{p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        utime, stime, cutime, cstime = (int(x) / TICK for x in fields[11:15])
    finally:
        p.wait()
    if p.returncode != 0:
        sys.exit(f"observer_total: {' '.join(prefix + target)} exited with {p.returncode}")
    return utime + stime, cutime + cstime


def fit(xs: list, ys: list):
    """(intercept, slope) of the least-squares line through (xs, ys); None if xs do not vary."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rates", default="97,1000")
    ap.add_argument("--rounds", default="60", help="rounds of bench/cpu_bound.c (about 0.16 s of CPU each); "
                                                    "several, comma-separated: a fixed and a per-second part")
    ap.add_argument("--vs", default="", help="another tree's host/ directory: its sampled mode too")
    ap.add_argument("--perf", action="store_true", help="perf record (with and without -g) at the same rates too")
    ap.add_argument("--no-g", action="store_true", help="perf record without -g only")
    ap.add_argument("--program", nargs=argparse.REMAINDER, help="another program (and its arguments)")
    a = ap.parse_args()
    # an installed copy starts from cached bytecode (this machine's shell turns the cache off)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    lengths = [int(x) for x in a.rounds.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        if a.program:
            targets = [a.program]
        else:
            exe = cpu_bound(tmp)
            targets = [[exe, str(n)] for n in lengths]
        obs = {name: prefix for name, prefix in observers([int(x) for x in a.rates.split(",")], tmp, a.vs).items()
               if (a.perf or not name.startswith("perf")) and not (a.no_g and name.endswith("-g"))}
        for prefix in obs.values():  # warm-up: bytecode written, files cached
            run_once(prefix, targets[0])
        load = os.getloadavg()[0]
        runs = {(name, i): [] for i in range(len(targets)) for name in obs}
        for r in range(a.runs):
            for i, target in enumerate(targets):
                for name, prefix in obs.items():
                    runs[name, i].append(run_once(prefix, target))
                    print(f"  run {r + 1}, {os.path.basename(target[0])} {' '.join(target[1:])}: {name}: observer "
                          f"{runs[name, i][-1][0]:.2f} s, target {runs[name, i][-1][1]:.2f} s, load "
                          f"{os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)  # a long run's progress
    print(f"observer CPU (s) and as % of the target's CPU, median (min) of {a.runs}; "
          f"load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    for i, target in enumerate(targets):
        print(f"{' '.join(target)}:")
        for name in obs:
            xs = runs[name, i]
            obs_s = [o for o, _ in xs]
            pct = [100.0 * o / t if t else float("nan") for o, t in xs]  # a target that used no CPU: no share
            print(f"  {name:24s} {statistics.median(obs_s):6.3f} s ({min(obs_s):.3f})  "
                  f"{statistics.median(pct):5.2f}% ({min(pct):.2f})  "
                  f"target {statistics.median(t for _, t in xs):.2f} s", flush=True)
    if len(targets) > 1:
        print("fixed part (s) and per-second part (% of a core per second of the target's CPU), least squares:")
        for name in obs:
            xs = [r for i in range(len(targets)) for r in runs[name, i]]
            line = fit([t for _, t in xs], [o for o, _ in xs])
            if line is not None:
                print(f"  {name:24s} fixed {line[0]:6.3f} s  per second {100.0 * line[1]:5.3f}%")


if __name__ == "__main__":
    main()
