"""``phasescope plot LOG -o FILE.png``: figures of a recorded run (:mod:`phasescope.view.plot`).

Needs matplotlib (``pip install 'phasescope[plot]'``); without it, one line and exit 2.
"""

from __future__ import annotations

import argparse
import importlib

from phasescope.commands.options import add_engine_options, engine_config_from_args
from phasescope.commands.runner import Command
from phasescope.errors import InputError


class PlotCommand(Command):
    """Draw a log: phase barcode, shares, per-phase homogeneity (Fig. 7), footprints (Fig. 3)."""

    description = ("Draw a phasescope interval log: the phase barcode per thread over time, each phase's share, "
                   "per-phase CVs against the whole run (ISCA 2003 Fig. 7) and the intervals' footprints "
                   "(Fig. 3, recomputed with the tracker options below).")

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("log", metavar="LOG", help="phasescope interval log (--log)")
        p.add_argument("-o", "--output", metavar="FILE", required=True, help="image to write (.png, .svg, .pdf)")
        p.add_argument("--title", help="figure title")
        add_engine_options(p)

    def run(self, args) -> int:
        try:
            importlib.import_module("matplotlib")
        except ImportError:
            raise InputError("plot needs matplotlib: pip install 'phasescope[plot]' (or matplotlib>=3.7)") from None
        from phasescope.view.plot import plot_log
        config = engine_config_from_args(args, interval_default=None)
        info = plot_log(args.log, args.output, config, args.title)
        print(f"{args.output}: {info['intervals']} intervals, {info['phases']} phases, {info['threads']} thread(s)")
        return 0
