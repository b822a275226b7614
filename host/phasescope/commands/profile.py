"""``phasescope profile LOG -o FILE``: the profile of a recorded run, labelled by phase, thread and
process, in the format of FILE's extension (or ``--format``): pprof ``.pb.gz``, speedscope
``.json``, collapsed stacks ``.folded``, Perfetto ``.perfetto-trace``. ``--diff A B`` compares two
phases (functions whose share changed most) and with ``-o`` writes B's pprof and A's as its
``-diff_base`` beside it. See docs/profiles.md."""

from __future__ import annotations

import argparse
import os
import sys

from phasescope.commands.runner import Command
from phasescope.errors import InputError
from phasescope.profiles import diff
from phasescope.profiles.model import read_profile
from phasescope.profiles.writers import WRITERS, format_of, write_profile
from phasescope.sinks.base import STDOUT


def base_path(path: str) -> str:
    """Where ``--diff`` writes the base profile: FILE.pb.gz -> FILE.base.pb.gz."""
    stem = path[:-len(".pb.gz")] if path.endswith(".pb.gz") else path
    return stem + ".base.pb.gz"


class ProfileCommand(Command):
    """Log -> pprof / speedscope / folded / Perfetto, or a comparison of two phases."""

    description = ("Write the profile of a phasescope interval log, per phase, thread and process: pprof (.pb.gz), "
                   "speedscope (.json), collapsed stacks (.folded) or a Perfetto trace (.perfetto-trace); or "
                   "compare two phases (--diff).")
    inputs = {"LOG": "log"}
    outputs = {"-o": "output"}
    to_stdout = ("output",)  # its lines go to stderr, but --diff's table (refused there)

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("log", metavar="LOG", help="phasescope interval log (--log)")
        p.add_argument("-o", "--output", metavar="FILE", help="profile to write (format from the extension)")
        p.add_argument("--format", choices=sorted(WRITERS), help="the output's format (default: from its extension)")
        p.add_argument("--phase", type=int, metavar="N", help="only phase N (pprof, speedscope, folded)")
        p.add_argument("--diff", nargs=2, metavar=("A", "B"),
                       help="compare phase A with phase B (each PHASE or LOG:PHASE); with -o, write B's pprof "
                            "and A's beside it as FILE.base.pb.gz for pprof -diff_base")
        p.add_argument("--binary", action="append", default=[], metavar="FILE",
                       help="name code no frame of the log names (exact-mode logs) from this ELF file's symbols; "
                            "repeatable")
        p.add_argument("--top", type=int, default=15, metavar="N", help="--diff: functions listed (default 15)")

    def run(self, args) -> int:
        if args.diff:
            return self._diff(args)
        if not args.output:
            raise InputError("profile needs -o FILE (or --diff A B)")
        fmt = format_of(args.output, args.format, f" (or --format {'/'.join(WRITERS)})")
        if fmt == "perfetto" and args.phase is not None:
            raise InputError("--phase does not apply to a Perfetto trace (it shows every phase in time)")
        prof = read_profile(args.log, args.binary)
        if args.phase is not None and args.phase not in prof.phases:
            raise InputError(f"{args.log}: no phase {args.phase} (its phases: {', '.join(map(str, prof.phases))})")
        write_profile(fmt, prof, args.output, args.phase)
        if prof.unit == "samples" and prof.with_stacks < len(prof.spans):
            print(f"{args.log}: {len(prof.spans) - prof.with_stacks} of {len(prof.spans)} intervals have no stacks "
                  "(recorded before stacks, or not sampled): their samples keep their leaf only", file=sys.stderr)
        print(f"{args.output}: {fmt}, {len(prof.phases)} phases, {prof.total():,} {prof.unit}", file=sys.stderr)
        return 0

    def _diff(self, args) -> int:
        if args.output == STDOUT:
            raise InputError("-o -: standard output carries --diff's table, and the base profile is written beside "
                             "-o's file; give a file name")
        if args.output and format_of(args.output, args.format) != "pprof":  # before the table, not after it
            raise InputError("--diff writes pprof (-o FILE.pb.gz)")
        (log_a, phase_a), (log_b, phase_b) = (diff.parse_side(s, args.log) for s in args.diff)
        if args.output and os.path.abspath(base_path(args.output)) in {os.path.abspath(p) for p in (log_a, log_b)}:
            raise InputError(f"--diff would write its base over an input: {base_path(args.output)}")
        a = read_profile(log_a, args.binary)
        b = a if log_b == log_a else read_profile(log_b, args.binary)
        rows = diff.changes(a, phase_a, b, phase_b)
        sa, sb = args.diff
        print(f"{'function':40} {sa:>9} {sb:>9} {'change':>8}")
        for c in rows[:args.top]:
            print(f"{c.function[:40]:40} {c.share_a:9.1%} {c.share_b:9.1%} {c.delta:+8.1%}")
        if args.output:
            write_profile("pprof", b, args.output, phase_b)
            write_profile("pprof", a, base_path(args.output), phase_a)
            print(f"{args.output}: phase {sb}; {base_path(args.output)}: phase {sa} "
                  f"(go tool pprof -diff_base {base_path(args.output)} {args.output})", file=sys.stderr)
        return 0
