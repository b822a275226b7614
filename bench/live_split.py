#!/usr/bin/env python3
"""Where a live sampled run's main thread spends its CPU: ``time.thread_time`` summed around the
engine's feed (one window each; ``batch``: a wake-up's windows together), the sampler's drains (ring reads, record parse, window cuts,
keys) and the loop's other steps, printed to stderr when phasescope exits. The arguments are
phasescope's; ``WAKE=S`` in the environment reads the windows every S seconds of CPU instead of
one (an experiment on fewer wake-ups, not an option: the loop's quiet bound, the checkpoints and
the status lines are stretched to 1.5 S alike).

    python3 bench/live_split.py --mode sampled --rate 1000 --no-dashboard -o /dev/null -f PROGRAM [ARGS]
"""

from __future__ import annotations

import os
import runpy
import sys
import time

SPLIT = {"feed": 0.0, "batch": 0.0, "drain": 0.0, "parse": 0.0, "window": 0.0, "checkpoint": 0.0, "tick": 0.0, "loop": 0.0}
CALLS = dict.fromkeys(SPLIT, 0)


def timed(cls, name: str, part: str) -> None:
    """Sum the main thread's CPU time inside ``cls.name`` under ``part``."""
    real = getattr(cls, name)

    def wrapper(*args, **kwargs):
        t0 = time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            SPLIT[part] += time.thread_time() - t0
            CALLS[part] += 1
    setattr(cls, name, wrapper)


def report(start: float) -> None:
    parts = ", ".join(f"{k} {1e3 * v:.1f} ms / {CALLS[k]}" for k, v in SPLIT.items())
    print(f"live_split: main thread {1e3 * (time.thread_time() - start):.1f} ms, process "
          f"{1e3 * time.process_time():.1f} ms; {parts}", file=sys.stderr, flush=True)


def main() -> None:
    from phasescope.pipeline import flow, live
    from phasescope.sources import sample_records, sampler
    from phasescope.view import plain
    wake = os.environ.get("WAKE")
    extra = []
    if wake:
        from phasescope.commands import sources
        sources.UNWATCHED_WAKE = float(wake)
        try:  # the loop's clock, since stop 47
            from phasescope.pipeline import loop_clock as clocks
        except ImportError:
            clocks = live
        clocks.MAX_QUIET = 1.5 * float(wake)
        clocks.CHECKPOINT_EVERY = max(clocks.CHECKPOINT_EVERY, 1.5 * float(wake))
        extra = ["--status-every", str(max(5.0, 1.5 * float(wake)))]
    if hasattr(flow.Flow, "feed_together"):  # a wake-up's windows in one batch (stop 46)
        timed(flow.Flow, "feed_together", "batch")
    for cls, name, part in ((flow.Flow, "feed", "feed"), (sampler.Sampler, "_drain", "drain"),
                            (sample_records.SampleRecords, "_parse", "parse"), (sampler.Sampler, "_window", "window"),
                            (live.LiveRun, "_checkpoint", "checkpoint"), (plain.PlainView, "tick", "tick"),
                            (live.LiveRun, "_loop", "loop")):
        timed(cls, name, part)
    start = time.thread_time()
    real_exit = os._exit

    def exit_(code):  # the command leaves by os._exit (its threads are daemons)
        report(start)
        real_exit(code)
    os._exit = exit_
    sys.argv = ["phasescope"] + sys.argv[1:] + extra
    try:
        runpy.run_module("phasescope.cli", run_name="__main__")
    finally:
        report(start)


if __name__ == "__main__":
    main()
