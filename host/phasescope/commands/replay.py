"""``phasescope replay FILE``: run the phase engine over a recorded stream, offline.

Inputs: a phasescope interval log (JSON Lines, :mod:`phasescope.formats.log`) or a SimPoint /
valgrind exp-bbv ``.bb`` file (:mod:`phasescope.formats.bbv`). Prints the per-phase table and the
predictor scores; ``--log`` and ``--summary`` write the same files as the live monitor.
"""

from __future__ import annotations

import argparse
from itertools import chain, islice
from typing import Iterator, List, Optional

from phasescope.commands.runner import Command
from phasescope.engine.phase_engine import BATCH
from phasescope.errors import InputError
from phasescope.engine.interval import Interval
from phasescope.engine.segments import NO_INSTRUCTIONS, merge_intervals
from phasescope.commands.options import add_engine_options, engine_config_from_args
from phasescope.commands.outputs import OUTPUT_FILES, add_output_options, open_sinks
from phasescope.formats.lines import numbered_lines, refuse_pipe
from phasescope.formats.log import read_log
from phasescope.view.report import print_report
from phasescope.formats.bbv import read_bb, read_pc_map
from phasescope.pipeline.flow import Flow
from phasescope.sinks.base import Sinks, as_typed
from phasescope.sources.modules import JIT_MODULE


def detect_format(path: str) -> str:
    """``log`` or ``bb`` from the first non-blank line."""
    refuse_pipe(path, "its format is read from its first line before the whole is read: give --format log or bb")
    for lineno, line in numbered_lines(path):
        text = line.strip()
        if not text:
            continue
        if text.startswith("{"):
            return "log"
        if text.startswith(("T", "#")):
            return "bb"
        raise InputError(f"{path}:{lineno}: neither a phasescope log record nor a .bb interval (use --format)")
    raise InputError(f"{path}: empty input")


def open_input(args, names: Optional[dict] = None) -> Iterator[Interval]:
    """The recording's intervals; a log's ``names`` record fills ``names`` once they are read."""
    fmt = detect_format(args.file) if args.format == "auto" else args.format
    if fmt == "log":
        if args.pc_out_file:
            raise InputError("--pc-out-file applies to .bb input only")
        return read_log(args.file, names)
    pc_map = read_pc_map(args.pc_out_file) if args.pc_out_file else None
    return read_bb(args.file, pc_map, args.pc_out_file or "")


def as_recorded(names: dict, keys: List[int]) -> List[str]:
    """Each key as the live run named it in the log's ``names`` record (``[jit]!java Holder.name``),
    else the key: what a live run's sinks are given before its target ends."""
    return [f"{JIT_MODULE}!{names[k][1]}" if k in names and names[k][1] else f"{k:#x}" for k in keys]


class ReplayCommand(Command):
    """Re-run the engine over a recording."""

    description = "Replay a recorded interval stream through the phase tracker and predictors, with any tracker setting."
    inputs = {"FILE": "file", "--pc-out-file": "pc_out_file"}
    outputs = OUTPUT_FILES
    stdout_why = "standard output carries replay's report"

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("file", metavar="FILE", help="phasescope interval log (.jsonl) or SimPoint/exp-bbv .bb file")
        p.add_argument("--format", choices=("auto", "log", "bb"), default="auto",
                       help="input format (default: detected from the first line)")
        p.add_argument("--pc-out-file", metavar="FILE",
                       help="exp-bbv --pc-out-file map for a .bb input: block ids become code addresses")
        add_engine_options(p)
        add_output_options(p)
        p.add_argument("--top", type=int, default=20, metavar="N", help="phases shown in the table (default 20)")

    def run(self, args) -> int:
        engine_config_from_args(args, interval_default=None)  # bad options fail before any file is touched
        if args.top < 0:
            raise InputError(f"--top must not be negative (got {args.top})")
        sinks, names = [], {}
        try:
            stream = open_input(args, names)
            first = next(stream, None)
            if first is None:
                raise InputError(f"{args.file}: no complete interval record to replay")
            sampled = first.mode == "sampled"
            if sampled and args.interval is not None:  # before --events/--metrics announce a server
                raise InputError(NO_INSTRUCTIONS)
            stream = chain([first], stream)
            config = engine_config_from_args(args, interval_default=None,
                                             preset_default="sampled" if sampled else "default")
            sinks = open_sinks(args, config)
            flow = Flow(config, sinks)
            if args.interval is not None:
                stream = merge_intervals(stream, args.interval)
            units = flow.units(stream)
            flow.start({"target": as_typed(args.file), "mode": "replay", "config": config.to_dict()})
            while True:
                batch = list(islice(units, BATCH))
                if not batch:
                    break
                flow.feed_many(batch)
            flow.sinks.before_end(lambda keys: as_recorded(names, keys))  # on into --log and --profile
            summary = flow.engine.summary()
            summary["input"] = {"path": as_typed(args.file), "pc_out_file": args.pc_out_file}
            summary["end"] = {"how": "replayed", "code": None, "signal": None, "reason": None}
            flow.end(summary)
        except KeyboardInterrupt:  # a stop signal: the old --profile stays, not one of part of FILE
            Sinks(sinks).abandon()
            raise
        finally:
            Sinks(sinks).close()
        print_report(summary, args.top)
        return 0
