"""Workloads traced as an operator would, attached with ``-p`` (bench/truth/run.py): the target is
started idle or stopped, phasescope attaches, and the truth is written on the target's user CPU
clock counted from the moment of attach (the clock the sampled windows measure from)."""

import os
import subprocess
import time

TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def user_ns(pid: int) -> int:
    """User CPU time of ``pid``'s main thread, ns (10 ms ticks); -1 once it has gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat") as f:
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
