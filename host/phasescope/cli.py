"""Command-line entry point: ``phasescope [SUBCOMMAND] ...``.

Each subcommand is a :class:`~phasescope.commands.runner.Command` subclass; without one,
phasescope runs the live monitor (:mod:`phasescope.commands.monitor`).
"""

from __future__ import annotations

import importlib
import sys

SUBCOMMANDS = {
    "replay": ("phasescope.commands.replay", "ReplayCommand"),
    "export-bbv": ("phasescope.commands.export_bbv", "ExportBbvCommand"),
    "bench": ("phasescope.commands.bench", "BenchCommand"),
    "demo": ("phasescope.commands.demo", "DemoCommand"),
    "score": ("phasescope.commands.score", "ScoreCommand"),
    "reference": ("phasescope.commands.reference", "ReferenceCommand"),
    "plot": ("phasescope.commands.plot", "PlotCommand"),
    "profile": ("phasescope.commands.profile", "ProfileCommand"),
    "locality-model": ("phasescope.commands.locality_model", "LocalityModelCommand"),
}
DEFAULT = ("phasescope.commands.monitor", "MonitorCommand")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        (module_name, cls), prog, argv = SUBCOMMANDS[argv[0]], f"phasescope {argv[0]}", argv[1:]
    else:
        (module_name, cls), prog = DEFAULT, "phasescope"
    try:
        command = getattr(importlib.import_module(module_name), cls)(prog)
        return command.main(argv)
    except KeyboardInterrupt:  # Ctrl-C before the run installed its handlers (imports, parsing)
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
