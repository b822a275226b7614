"""``phasescope demo``: trace the bundled phased workload (:mod:`phasescope.workloads.phased`).

The workload is a python3 program, so the demo runs on any machine with Python: no compiler.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from phasescope.commands import monitor
from phasescope.errors import InputError
from phasescope.workloads import phased


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Trace phasescope's demo workload, a python3 program "
                                "that cycles through zlib, SHA-256, regex, sort and JSON phases, with the "
                                "live dashboard. Takes the options of a live run.")
    p.add_argument("--rounds", type=int, default=6, help="rounds of the workload's schedule (default 6)")
    p.add_argument("--no-thread", action="store_true", help="run the workload without its second thread")
    monitor.add_device_options(p)
    monitor.add_output_options(p)
    return p


def workload_argv(rounds: int, thread: bool = True) -> list:
    """The command line of the demo workload, run by this Python interpreter."""
    argv = [sys.executable, str(Path(phased.__file__).resolve()), "--rounds", str(rounds)]
    return argv + ([] if thread else ["--no-thread"])


def run(args) -> int:
    if args.rounds <= 0:
        raise InputError(f"--rounds must be positive (got {args.rounds})")
    args.pid = args.name = args.argv = None
    return monitor.run(args, argv=workload_argv(args.rounds, not args.no_thread))
