"""``phasescope help [TOPIC]``: the options ``phasescope --help`` leaves out. ``tracker``: the phase
tracker's, segments' and predictors' (live runs, demo, replay, plot); ``all``: every option of the
live monitor; a subcommand's name: its ``--help``."""

from __future__ import annotations

import argparse
import importlib

from phasescope.commands.options import add_engine_options
from phasescope.commands.registry import DEFAULT, SUBCOMMANDS
from phasescope.commands.runner import Command
from phasescope.errors import InputError

TOPICS = ("tracker", "all")


class HelpCommand(Command):
    """Print the help of a topic."""

    description = "Help on a topic: tracker (the tracker, segment and predictor options), all (every option), " \
                  "or a subcommand's name."

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("topic", nargs="?", default="all", metavar="TOPIC",
                       help=f"one of {', '.join(TOPICS)}, or a subcommand (default all)")

    def run(self, args) -> int:
        if args.topic == "tracker":
            p = argparse.ArgumentParser(
                prog="phasescope", add_help=False,
                usage="phasescope [options] ... (live runs, demo), phasescope {replay,plot} [options] ...",
                description="The phase tracker's, segments' and predictors' options. Defaults are ISCA 2003's "
                            "(--tracker default); the sampled-mode default is --tracker sampled.")
            add_engine_options(p)
            p.print_help()
        elif args.topic == "all" or args.topic in SUBCOMMANDS:
            module, cls = DEFAULT if args.topic == "all" else SUBCOMMANDS[args.topic][:2]
            prog = "phasescope" if args.topic == "all" else f"phasescope {args.topic}"
            command = getattr(importlib.import_module(module), cls)(prog)
            parser = command.parser(full=True) if args.topic == "all" else command.parser()
            parser.print_help()
        else:
            raise InputError(f"no help on {args.topic!r}: give {', '.join(TOPICS)} or a subcommand "
                             f"({', '.join(SUBCOMMANDS)})")
        return 0
