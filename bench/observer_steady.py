#!/usr/bin/env python3
"""An observer's CPU in steady state, read from inside the run: its CPU time (every thread's,
``/proc/PID/task/*/schedstat``, in ns) against its target's, between two points of the target's
own CPU time (after ``--skip`` s, when start-up is over, and ``--span`` s later). The observer's
fixed start-up cost and the machine's load drop out: what is left is what each second of the
target's CPU costs the observer, the figure issue 31's goals are about (phasescope's sampled mode
against ``perf record`` at the same rate, with and without ``-g``).

    python3 bench/observer_steady.py [--runs 3] [--rates 1000,97] [--rounds 16] [--skip 0.5] [--span 1.5]
                                     [--vs OTHER/host]

Observers run in interleaved rounds on ``bench/cpu_bound.c ROUNDS``; each figure is the median of
``--runs`` (and its range). ``--vs`` adds another tree's sampled mode (its ``host/`` directory), so
a change is measured against what it replaces in the same rounds.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of ``pid`` so far, in ns (0 once it is gone)."""
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def child_named(ppid: int, comm: str):
    """The pid of a child of ``ppid`` whose command name is ``comm``, or None."""
    for path in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1: text.rindex(")")]
        if name == comm and int(text[text.rindex(")") + 2:].split()[1]) == ppid:
            return int(path.split("/")[2])
    return None


def cpu_bound(tmp: str) -> str:
    """bench/cpu_bound.c compiled into ``tmp``: its path."""
    exe = os.path.join(tmp, "cpu_bound")
    subprocess.run(["cc", "-O2", "-fno-omit-frame-pointer", "-o", exe, os.path.join(HERE, "cpu_bound.c")], check=True)
    return exe


def observers(rates, tmp: str, vs: str) -> dict:
    """Observer name -> the command prefix that runs a target (``--`` then the target follows)."""
    trees = {"": [sys.executable]}
    if vs:
        trees[" (vs)"] = ["env", f"PYTHONPATH={os.path.abspath(vs)}", sys.executable]
    out = {}
    for hz in rates:
        for tag, python in trees.items():
            out[f"sampled {hz} Hz{tag}"] = python + ["-m", "phasescope.cli", "--mode", "sampled", "--rate", str(hz),
                                                     "--no-dashboard", "-o", os.devnull, "-f"]
        for g in ([], ["-g"]):
            out[" ".join(["perf record -F", str(hz), *g])] = ["perf", "record", "-q", "-e", "cpu-clock", *g, "-F",
                                                              str(hz), "-o", os.path.join(tmp, "perf.data"), "--"]
    return out


def run_once(prefix: list, target: list, skip_ns: int, span_ns: int):
    """(observer CPU, target CPU) in ns between the target's ``skip`` and ``skip + span`` of CPU."""
    p = subprocess.Popen(prefix + target, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        comm = os.path.basename(target[0])[:15]
        pid = None
        while pid is None and p.poll() is None:
            pid = child_named(p.pid, comm)
            time.sleep(0.02)
        marks = []
        for goal in (skip_ns, skip_ns + span_ns):
            while p.poll() is None:
                t = cpu_ns(pid)
                if t >= goal:
                    marks.append((cpu_ns(p.pid), t))
                    break
                time.sleep(0.02)
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if len(marks) < 2:
        sys.exit(f"observer_steady: the target ended before {(skip_ns + span_ns) / 1e9:.1f} s of CPU: raise --rounds")
    return marks[1][0] - marks[0][0], marks[1][1] - marks[0][1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rates", default="1000,97")
    ap.add_argument("--rounds", type=int, default=16, help="rounds of bench/cpu_bound.c (about 0.14 s of CPU each)")
    ap.add_argument("--skip", type=float, default=0.5, help="seconds of the target's CPU before the first reading")
    ap.add_argument("--span", type=float, default=1.5, help="seconds of the target's CPU between the readings")
    ap.add_argument("--vs", default="", help="another tree's host/ directory: its sampled mode too")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = cpu_bound(tmp)
        obs = observers([int(x) for x in a.rates.split(",")], tmp, a.vs)
        shares = {name: [] for name in obs}
        for _ in range(a.runs):
            for name, prefix in obs.items():
                o, t = run_once(prefix, [exe, str(a.rounds)], int(a.skip * 1e9), int(a.span * 1e9))
                shares[name].append(100.0 * o / t)
    print(f"observer CPU as % of the target's CPU, {a.skip:g} s to {a.skip + a.span:g} s of it "
          f"(median of {a.runs}, min-max), load average {os.getloadavg()[0]:.1f}:")
    for name, xs in shares.items():
        print(f"  {name:24s} {statistics.median(xs):6.2f}%  ({min(xs):.2f}-{max(xs):.2f})", flush=True)


if __name__ == "__main__":
    main()
