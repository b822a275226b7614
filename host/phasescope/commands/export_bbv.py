"""``phasescope export-bbv LOG OUT.bb``: write a phasescope interval log as a SimPoint ``.bb`` file
(dense 1-based block ids in order of first appearance), so SimPoint can cluster what phasescope
recorded. ``--pc-out-file`` also writes the id -> stable key map in exp-bbv's format, so
``phasescope replay OUT.bb --pc-out-file MAP`` sees the same keys as the log."""

from __future__ import annotations

import argparse
import sys
from itertools import chain

from phasescope.errors import InputError
from phasescope.formats.log import read_log
from phasescope.commands.runner import Command
from phasescope.sinks.bbv import BbvWriter


class ExportBbvCommand(Command):
    """Log -> .bb."""

    description = "Convert a phasescope interval log to SimPoint .bb format."
    inputs = {"LOG": "log"}
    outputs = {"OUT.bb": "output", "--pc-out-file": "pc_out_file"}
    to_stdout = ("output", "pc_out_file")  # its one line goes to stderr

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("log", metavar="LOG", help="phasescope interval log (JSON Lines)")
        p.add_argument("output", metavar="OUT.bb", help="basic block vector file to write")
        p.add_argument("--pc-out-file", metavar="FILE", help="also write the block id -> stable key map here")
        p.add_argument("--thread", type=int, metavar="TID",
                       help="only this thread's intervals (default: every thread, in log order)")

    def run(self, args) -> int:
        intervals = (iv for iv in read_log(args.log) if args.thread is None or iv.thread == args.thread)
        first = next(intervals, None)  # an empty log (or thread) is refused before anything is written
        if first is None:
            raise InputError(f"{args.log}: no intervals" + (f" of thread {args.thread}" if args.thread is not None else ""))
        writer = BbvWriter(args.output, args.pc_out_file)
        try:
            for iv in chain([first], intervals):
                writer.write(iv)
        finally:
            writer.close()
        print(f"{args.output}: {writer.intervals:,} intervals, {writer.blocks:,} distinct blocks", file=sys.stderr)
        return 0
