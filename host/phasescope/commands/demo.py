"""``phasescope demo``: trace the bundled phased workload (:mod:`phasescope.workloads.phased`).

The workload is a python3 program, so the demo runs on any machine with Python: no compiler.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from phasescope.commands.monitor import BRIEF, MonitorCommand
from phasescope.commands.options import add_device_options, add_run_options
from phasescope.errors import InputError
from phasescope.workloads import phased


#: work per step in sampled mode: each step then lasts 3-10 windows of 100 samples at 1 kHz
#: (0.3-1 s of CPU on a 2026 x86 core; the shortest, regex, 0.15 s at 10), so that each activity is
#: a phase of its own, recurring every round
SAMPLED_SCALE = 20


def workload_argv(rounds: int, thread: bool = True, scale: int = 1) -> list:
    """The command line of the demo workload, run by this Python interpreter."""
    argv = [sys.executable, str(Path(phased.__file__).resolve()), "--rounds", str(rounds), "--scale", str(scale)]
    return argv + ([] if thread else ["--no-thread"])


class DemoCommand(MonitorCommand):
    """The live monitor on the demo workload."""

    description = ("Trace phasescope's demo workload, a python3 program that cycles through zlib, SHA-256, regex, "
                   "sort and JSON phases, with the live dashboard. Takes the options of a live run.")
    brief = {**BRIEF, "rounds": None, "no_thread": None}
    intermixed = False
    owns_target = True

    def __init__(self, prog: str):
        super().__init__(prog)
        self.usage, self.epilog = f"{prog} [options]", None

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--rounds", type=int, default=6, help="rounds of the workload's schedule (default 6)")
        p.add_argument("--scale", type=int, default=None,
                       help=f"work per step (default 1; --mode sampled: {SAMPLED_SCALE}, so that each step spans "
                            "several windows)")
        p.add_argument("--no-thread", action="store_true", help="run the workload without its second thread")
        add_device_options(p)
        add_run_options(p)

    def parse(self, argv):
        args = self.parser().parse_args(argv)
        args.pid = args.name = None
        return args

    def more_inputs(self, args):
        """The interpreter and the workload's script."""
        interpreter, script = self.target_argv(args)[:2]
        return [("python3", interpreter), ("the demo workload", script)]

    def target_argv(self, args):
        if args.rounds <= 0:
            raise InputError(f"--rounds must be positive (got {args.rounds})")
        if args.scale is not None and not 0 < args.scale <= 1000:
            raise InputError(f"--scale must be in [1, 1000] (got {args.scale})")
        scale = args.scale or (SAMPLED_SCALE if args.mode == "sampled" else 1)
        return workload_argv(args.rounds, not args.no_thread, scale)
