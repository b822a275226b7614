"""Command-line entry point: ``phasescope [SUBCOMMAND] ...``.

Each subcommand lives in its own module exposing ``build_parser(prog)`` and ``run(args) -> int``;
without a subcommand, phasescope runs the live monitor (:mod:`phasescope.monitor`).
"""

from __future__ import annotations

import importlib
import sys

from .errors import PhasescopeError

SUBCOMMANDS = {
    "replay": "phasescope.replay",
    "export-bbv": "phasescope.export_bbv",
    "bench": "phasescope.bench",
    "demo": "phasescope.demo",
    "score": "phasescope.score",
    "reference": "phasescope.reference",
}
DEFAULT = "phasescope.monitor"


def _usage_error(prog: str, message: str):
    """argparse's error, as one line (its default prints the whole usage first)."""
    print(f"{prog}: error: {message} (see {prog} --help)", file=sys.stderr)
    sys.exit(2)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        name, module_name, argv = argv[0], SUBCOMMANDS[argv[0]], argv[1:]
        prog = f"phasescope {name}"
    else:
        module_name, prog = DEFAULT, "phasescope"
    module = importlib.import_module(module_name)
    parser = module.build_parser(prog)
    parser.error = lambda message: _usage_error(prog, message)
    args = parser.parse_args(argv)  # exits 2 with a one-line usage error on bad options
    try:
        return int(module.run(args) or 0)
    except PhasescopeError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
