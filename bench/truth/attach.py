"""Workloads traced as an operator would, attached with ``-p`` (bench/truth/run.py): the target is
started idle or stopped, phasescope attaches, and the truth is written on the target's user CPU
clock counted from the moment of attach (the clock the sampled windows measure from)."""

import json
import os
import random
import subprocess
import time
from typing import Callable, List

TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def user_ns(pid: int, every_thread: bool = False) -> int:
    """User CPU time of ``pid``'s main thread (``every_thread``: of all its threads), ns (10 ms
    ticks); -1 once it has gone."""
    try:
        with open(f"/proc/{pid}/stat" if every_thread else f"/proc/{pid}/task/{pid}/stat") as f:
            return int(f.read().rsplit(") ", 1)[1].split()[11]) * TICK_NS
    except (FileNotFoundError, ProcessLookupError):
        return -1


def attach(phasescope: list, pid: int, settle: float = 2.0) -> subprocess.Popen:
    """Start ``phasescope ... -p pid`` (with ``-o FILE``); returns once it reports tracing in FILE."""
    report = phasescope[phasescope.index("-o") + 1]
    proc = subprocess.Popen([*phasescope, "-p", str(pid)])
    deadline = time.monotonic() + 60
    while not (os.path.exists(report) and os.path.getsize(report) > 0):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"phasescope did not attach to {pid}")
        time.sleep(0.1)
    time.sleep(settle)
    return proc


def finish(tracer: subprocess.Popen, timeout: float = 120) -> int:
    """Wait for phasescope to end after its target did (killed when the bound is hit)."""
    try:
        return tracer.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        tracer.kill()
        raise


def run_activities(truth: str, names: List[str], order: str, seconds: float, seed: int,
                   clock: Callable[[], int], step: Callable[[str], None]) -> None:
    """Run activities (``step(name)`` repeated until ``clock``, CPU ns of the target, has advanced by
    the activity's budget) for ``seconds`` of that clock, in a random order (no activity twice in a
    row, 0.6-3 s each) or a fixed ``cycle`` (each name its own budget), and write one truth line per
    activity run: ``{"activity", "start_ns", "end_ns", "start_wall_ns", "end_wall_ns"}``."""
    rnd = random.Random(int(seed))
    budgets = {n: rnd.uniform(0.6, 3.0) for n in names}
    base = clock()
    with open(truth, "w") as out:
        i, last = 0, None
        while clock() - base < seconds * 1e9:
            if order == "cycle":
                name = names[i % len(names)]
                budget = budgets[name]
            else:
                name = rnd.choice([n for n in names if n != last])
                budget = rnd.uniform(0.6, 3.0)
            t0, w0 = clock(), time.time_ns()
            while clock() - t0 < budget * 1e9:
                step(name)
            out.write(json.dumps({"activity": name, "start_ns": t0 - base, "end_ns": clock() - base,
                                  "start_wall_ns": w0, "end_wall_ns": time.time_ns()}) + "\n")
            out.flush()
            last, i = name, i + 1
