"""``phasescope reference FILE -o LABELS``: the offline reference phases of a recorded stream.

SimPoint's method (:mod:`phasescope.quality.simpoint`) on the basic-block vectors of a phasescope
interval log or a ``.bb`` file; writes a SimPoint ``-saveLabels`` file (``label distance`` per
interval) that ``phasescope score LOG --reference LABELS`` reads. Needs scikit-learn
(``pip install 'phasescope[quality]'``).
"""

from __future__ import annotations

import argparse
import sys

from phasescope.errors import InputError
from phasescope.quality import simpoint
from phasescope.commands.replay import detect_format
from phasescope.engine.segments import merge_intervals
from phasescope.commands.runner import Command
from phasescope.formats.bbv import read_bb
from phasescope.formats.log import read_log
from phasescope.quality.labels import write_simpoint_labels
from phasescope.sinks.base import check_replaceable


def add_reference_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("offline reference (SimPoint)")
    g.add_argument("--max-k", type=int, default=simpoint.MAX_K, metavar="K",
                   help=f"largest number of clusters tried (default {simpoint.MAX_K})")
    g.add_argument("--dims", type=int, default=simpoint.DIMS, metavar="D",
                   help=f"random projection dimensions (default {simpoint.DIMS})")
    g.add_argument("--bic-threshold", type=float, default=simpoint.BIC_FRACTION, metavar="F",
                   help=f"smallest k whose BIC reaches this fraction of the range (default {simpoint.BIC_FRACTION})")
    g.add_argument("--seed", type=int, default=simpoint.SEED, help="projection and k-means seed")


def check_reference_options(args) -> None:
    if args.max_k < 1:
        raise InputError(f"--max-k must be at least 1 (got {args.max_k})")
    if args.dims < 1:
        raise InputError(f"--dims must be at least 1 (got {args.dims})")
    if not 0 <= args.bic_threshold <= 1:
        raise InputError(f"--bic-threshold must be from 0 to 1 (got {args.bic_threshold})")


def build_reference(path: str, args, fmt: str = "auto", interval=None) -> simpoint.Reference:
    simpoint.require_sklearn()  # fail before reading a large file
    fmt = detect_format(path) if fmt == "auto" else fmt
    stream = read_log(path) if fmt == "log" else read_bb(path)
    if interval is not None:
        if interval < 1:
            raise InputError(f"--interval must be at least 1 (got {interval})")
        stream = merge_intervals(stream, interval)
    return simpoint.reference_of(stream, args.dims, args.max_k, args.bic_threshold, args.seed)


class ReferenceCommand(Command):
    """LOG or .bb -> SimPoint labels."""

    description = ("Cluster a recorded stream offline as SimPoint does (random projection, k-means, k by BIC) "
                   "and write its labels.")
    inputs = {"FILE": "file"}
    outputs = {"-o": "output"}
    to_stdout = ("output",)  # its one line goes to stderr

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("file", metavar="FILE", help="phasescope interval log (.jsonl) or SimPoint/exp-bbv .bb file")
        p.add_argument("-o", "--output", required=True, metavar="LABELS", help="labels file to write")
        p.add_argument("--format", choices=("auto", "log", "bb"), default="auto",
                       help="input format (default: detected from the first line)")
        p.add_argument("--interval", type=int, default=None, metavar="INSNS",
                       help="merge consecutive recorded intervals of a thread up to this size first")
        add_reference_options(p)

    def run(self, args) -> int:
        check_reference_options(args)
        check_replaceable(args.output, ".phasescope-labels-")  # before the clustering, as every output is
        ref = build_reference(args.file, args, args.format, args.interval)
        write_simpoint_labels(args.output, ref.labels, ref.distances)
        print(f"{args.file}: {len(ref.labels)} intervals, k = {ref.k} (BIC for k = 1..{len(ref.bic)}: "
              + " ".join(f"{b:.4g}" for b in ref.bic) + ")", file=sys.stderr)
        return 0
