"""``phasescope bench [options] -- PROGRAM [ARGS...]``: what tracing costs on your program.

Runs PROGRAM several times in each configuration, interleaved so that every configuration sees
the same machine load, and reports the minimum wall time of each:

* ``native``      -- the program alone (stdout discarded)
* ``bare``        -- spawned under Frida with every thread followed by a plain ``Stalker.follow``
                     (no transform): the floor any Stalker-based tracer sits on
* ``traced``      -- phasescope's agent: per-block counters, intervals, records shipped to the host
* ``end-to-end``  -- the traced run including spawn, injection and agent start-up
* ``exp-bbv``     -- ``valgrind --tool=exp-bbv`` with the same interval, when valgrind is installed
* ``sampled``     -- with ``--mode sampled``, instead of the three above: kernel CPU-clock sampling
                     with nothing injected (the kernel session), its windows classified by the phase engine
* ``bursts``      -- with ``--mode sampled --bursts``, also: the same with exact bursts (each new phase
                     has its thread followed by Stalker for one exact interval)

``bare`` and ``traced`` time the target from the moment it is resumed with every thread followed
until the host learns that it exited. ``traced/bare`` is also given in the CPU time of the target's
main thread (read when the agent reports its exit), which the machine's other work inflates less.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Optional

from phasescope.commands.options import DEFAULT_RATE, add_interval_option, add_source_options, validate_source_options
from phasescope.commands.runner import Command
from phasescope.commands.sources import SOURCES
from phasescope.engine import EngineConfig
from phasescope.engine.tracker import TrackerConfig, preset
from phasescope.errors import InputError, PhasescopeError
from phasescope.pipeline.flow import Flow
from phasescope.sources.procfs import main_thread_cpu
from phasescope.sources.sampled_source import DEFAULT_WINDOW_SAMPLES
from phasescope.sources.protocol import Bursts, capability
from phasescope.sources.session import TraceSession
from phasescope.sources.events import BurstEvent, Ended, IntervalEvent
from phasescope.sources.device import resolve_device, resolve_target


class BenchCommand(Command):
    """Overhead against native, on the user's program."""

    description = ("Measure phasescope's overhead on a program: exact mode against bare Stalker and valgrind "
                   "exp-bbv, or sampled mode (--bursts: with and without exact bursts).")
    usage = "phasescope bench [options] -- PROGRAM [ARGS...]"

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("-r", "--runs", type=int, default=3,
                       help="runs per configuration; the minimum counts (default 3)")
        add_interval_option(p)
        p.add_argument("--no-valgrind", action="store_true", help="skip the valgrind exp-bbv comparison")
        p.add_argument("--no-bare", action="store_true", help="skip the bare Stalker.follow baseline")
        p.add_argument("--json", action="store_true", help="print the results as one JSON object")
        p.add_argument("--trust-threshold", type=int, default=None, metavar="N",
                       help="exact mode: Stalker.trustThreshold for bare and traced runs (default: Frida's)")
        add_source_options(p)
        p.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")

    def run(self, args) -> int:
        command = list(args.command)
        if command and command[0] == "--":
            command = command[1:]
        if not command:
            raise InputError("no program given: phasescope bench [options] -- PROGRAM [ARGS...]")
        validate_source_options(args)
        given = TrackerConfig.interval if args.interval is None else args.interval
        interval = TrackerConfig(interval=given).interval  # the one check of an interval
        result = measure(command, runs=args.runs, interval=interval, valgrind=not args.no_valgrind,
                         bare=not args.no_bare, mode=args.mode,
                         options={"rate": args.rate, "window": args.window, "bursts": args.bursts},
                         trust_threshold=args.trust_threshold)
        print(json.dumps(result) if args.json else format_report(result))
        sys.stdout.flush()
        return 0


def _native(argv, cpu: Optional[list] = None) -> float:
    """Wall seconds of one native run; appends its main thread's CPU seconds to ``cpu`` if given."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError as e:
        raise InputError(f"cannot run {argv[0]}: {e.strerror}") from None
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # ended, not yet reaped: its counters remain
    except BaseException:  # Ctrl-C
        proc.kill()
        proc.wait()
        raise
    elapsed = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(main_thread_cpu(proc.pid))
    if proc.wait() != 0:
        raise PhasescopeError(f"{argv[0]} exited with code {proc.returncode} when run natively")
    return elapsed


@contextlib.contextmanager
def _stdout_to_devnull():
    """fd 1 on /dev/null while a traced target runs: it inherits it, as the native run's stdout is
    /dev/null (piping its output through Frida would cost it more than the native run pays)."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def _traced(session, what: str, classify: bool = False, preset_name: str = "sampled"):
    """(target wall seconds, end-to-end seconds, intervals, instructions, bursts, main thread CPU
    seconds or None) of one traced run: the target's from just before its resume to its exit() (as
    the agent reports it, holding the exiting thread: its CPU time is read then; else when the
    host learned that it ended); end to end from before the spawn to after the detach. (Not from
    when start() returns: on a busy machine a short target may be done by then.) ``classify``: the
    windows go through the phase engine (tracker preset ``preset_name``) as in a live run, so that
    new phases ask for bursts when the session offers them."""
    t0 = time.perf_counter()
    n = instructions = bursts = 0
    ended = None
    burster = capability(session, Bursts)
    flow = (Flow(EngineConfig(tracker=preset(preset_name)), burst=burster.burst if burster is not None else None)
            if classify else None)
    with _stdout_to_devnull():
        session.start()
        t1 = t_end = time.perf_counter()
        try:
            for event in session.events():
                if isinstance(event, IntervalEvent):
                    n += 1
                    instructions += event.interval.instructions or 0
                    if flow is not None:
                        flow.feed(event.interval)
                elif isinstance(event, BurstEvent):
                    bursts += 1
                elif isinstance(event, Ended):
                    ended, t_end = event, time.perf_counter()
        except BaseException:  # Ctrl-C: the target goes with the measurement
            session.kill()
            raise
        finally:
            session.stop()
    t2 = time.perf_counter()
    if ended is None or ended.how != "exited" or ended.code != 0:
        how = ended.describe() if ended else "ended without a report"
        raise PhasescopeError(f"{session.target.argv[0]} {how} under {what}")
    return (session.final_at or t_end) - (session.resumed_at or t1), t2 - t0, n, instructions, bursts, session.final_cpu


def _valgrind(argv, interval: int) -> float:
    with tempfile.TemporaryDirectory(prefix="phasescope-bench-") as tmp:
        out = os.path.join(tmp, "bb.out")
        t0 = time.perf_counter()
        proc = subprocess.run(
            ["valgrind", "--tool=exp-bbv", f"--interval-size={interval}", f"--bb-out-file={out}", *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise PhasescopeError(f"valgrind --tool=exp-bbv {argv[0]} exited with code {proc.returncode}")
    return elapsed


def measure(argv, runs: int = 3, interval: int = 10_000_000, valgrind: bool = True, bare: bool = True,
            mode: str = "exact", options: Optional[dict] = None, trust_threshold: Optional[int] = None) -> dict:
    """Minimum wall seconds per configuration and the ratios to native. ``mode``: the source timed
    (:data:`~phasescope.commands.sources.SOURCES`), built as a live run builds it from
    ``options`` (its command-line options by dest: ``rate``, ``window``, ``bursts``); with
    ``bursts`` also without them. Bare Stalker and valgrind exp-bbv only for a source that has
    them as baselines (exact mode). ``trust_threshold``: Stalker's, for the bare and traced runs."""
    if runs < 1:
        raise InputError("--runs must be at least 1")
    kind = SOURCES[mode]
    args = argparse.Namespace(**{"rate": DEFAULT_RATE, "window": DEFAULT_WINDOW_SAMPLES, "bursts": False,
                                 **(options or {}), "trust_threshold": trust_threshold})
    timed = {kind.timed: args}
    if args.bursts:  # the same source without bursts, to compare
        timed = {kind.timed: argparse.Namespace(**{**vars(args), "bursts": False}), "bursts": args}
    device = resolve_device()
    target = resolve_target(device, argv=list(argv))
    argv = target.argv
    bare = bare and kind.baselines
    valgrind = valgrind and kind.baselines
    use_valgrind = valgrind and shutil.which("valgrind") is not None
    times = {"native": [], kind.timed: [], "end-to-end": [], **{name: [] for name in timed},
             **({"bare": []} if bare else {}), **({"exp-bbv": []} if use_valgrind else {})}
    cpu = {"bare": [], kind.timed: []}  # main thread CPU seconds (exact mode reports them)
    intervals = instructions = bursts = 0
    for _ in range(runs):
        times["native"].append(_native(argv))
        if bare:
            run = _traced(TraceSession(device, target, interval=interval, stdio="inherit", bare=True,
                                       trust_threshold=trust_threshold), "bare Stalker")
            times["bare"].append(run[0])
            cpu["bare"].append(run[5])
        for name, opts in timed.items():
            session = kind.build(opts, device, target, "inherit", interval)
            what = f"phasescope --mode {mode}" + ("" if name == kind.timed else f" --{name}")
            wall, e2e, n, count, burst_count, main_cpu = _traced(session, what, classify=not kind.baselines,
                                                                 preset_name=kind.preset)
            times[name].append(wall)
            if name == kind.timed:
                times["end-to-end"].append(e2e)
                cpu[name].append(main_cpu)
                intervals, instructions = n, count
            else:
                bursts = burst_count
        if use_valgrind:
            times["exp-bbv"].append(_valgrind(argv, interval))
    best = {k: min(v) for k, v in times.items()}
    ratios = {k: best[k] / best["native"] for k in best if k != "native"}
    if bare:
        ratios[f"{kind.timed}/bare"] = best[kind.timed] / best["bare"]
        if all(None not in cpu[k] for k in cpu):
            ratios[f"{kind.timed}/bare cpu"] = min(cpu[kind.timed]) / min(cpu["bare"])
    if "bursts" in best:
        ratios[f"bursts/{kind.timed}"] = best["bursts"] / best[kind.timed]
    return {
        "command": argv,
        "mode": mode,
        "trust_threshold": trust_threshold,
        "sampled": None if kind.baselines else {"rate_hz": args.rate, "window_samples": args.window,
                                                "bursts": args.bursts},  # the sampling options
        "valgrind": "used" if use_valgrind else ("not installed" if valgrind else "skipped"),
        "runs": runs,
        "interval": interval,
        "intervals": intervals,
        "instructions": instructions,
        "bursts": bursts,
        "seconds": best,
        "ratios": ratios,
    }


def format_report(result: dict) -> str:
    lines = [
        f"program     {' '.join(result['command'])}",
        f"runs        {result['runs']} per configuration (minimum wall time shown)",
    ]
    s = result["sampled"]
    if s is not None:
        lines.append(f"{result['mode']:<11} {s['rate_hz']} Hz, {result['intervals']} intervals of {s['window_samples']} samples"
                     + (f", {result['bursts']} exact bursts" if s.get("bursts") else ""))
    else:
        lines.append(f"traced      {result['instructions']:,} instructions in {result['intervals']} intervals "
                     f"of {result['interval']:,}")
    for name, secs in result["seconds"].items():
        ratio = "" if name == "native" else f"  {result['ratios'][name]:6.2f}x native"
        lines.append(f"{name:<11} {secs:8.3f} s{ratio}")
    for name, ratio in result["ratios"].items():
        if name.startswith("bursts/"):
            lines.append(f"{name} {ratio:5.3f}x")
        elif name.endswith("/bare"):
            cpu = result["ratios"].get(f"{name} cpu")
            lines.append(f"{name} {ratio:8.2f}x" + (f"  (main thread CPU: {cpu:.2f}x)" if cpu is not None else ""))
    if result["valgrind"] == "not installed":
        lines.append("exp-bbv     (valgrind is not installed)")
    return "\n".join(lines)

