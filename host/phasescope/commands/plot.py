"""``phasescope plot LOG -o FILE.png``: figures of a recorded run (:mod:`phasescope.view.plot`).

Needs matplotlib (``pip install 'phasescope[plot]'``); without it, one line and exit 2.
"""

from __future__ import annotations

import argparse
import sys

from phasescope.commands.options import add_engine_options, engine_config_from_args
from phasescope.commands.runner import Command
from phasescope.errors import InputError


class PlotCommand(Command):
    """Draw a log: phase barcode, shares, per-phase homogeneity (Fig. 7), footprints (Fig. 3)."""

    description = ("Draw a phasescope interval log: the phase barcode per thread over time, each phase's share, "
                   "per-phase CVs against the whole run (ISCA 2003 Fig. 7) and the intervals' footprints "
                   "(Fig. 3, recomputed with the tracker options below).")
    inputs = {"LOG": "log"}
    outputs = {"-o": "output"}
    stdout_why = "the image's format comes from the file name's extension"

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("log", metavar="LOG", help="phasescope interval log (--log)")
        p.add_argument("-o", "--output", metavar="FILE", required=True, help="image to write (.png, .svg, .pdf)")
        p.add_argument("--title", help="figure title")
        add_engine_options(p)

    def run(self, args) -> int:
        from phasescope.formats.lines import refuse_pipe
        from phasescope.formats.log import read_log
        from phasescope.view.plot import check_output, plot_log
        refuse_pipe(args.log, "plot reads the log more than once: give a file")
        first = next(read_log(args.log), None)  # a log that cannot be read is said before the import
        try:
            check_output(args.output)  # imports matplotlib (about 1 s of CPU) once the names are checked
        except ImportError:
            raise InputError("plot needs matplotlib: pip install 'phasescope[plot]' (or matplotlib>=3.7)") from None
        sampled = first is not None and first.mode == "sampled"
        config = engine_config_from_args(args, interval_default=None, preset_default="sampled" if sampled else "default")
        info = plot_log(args.log, args.output, config, args.title)
        print(f"{args.output}: {info['intervals']} intervals, {info['phases']} phases, {info['threads']} thread(s)",
              file=sys.stderr)
        return 0
