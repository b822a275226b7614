"""Options several subcommands take mean the same in each: one definition, one check."""

from __future__ import annotations

import pytest

from conftest import run_cli
from phasescope.commands.bench import BenchCommand
from phasescope.commands.monitor import MonitorCommand
from phasescope.commands.replay import ReplayCommand

SOURCE = ("--mode", "--rate", "--window", "--bursts", "--interval")
OUTPUTS = ("--log", "--summary", "--events", "--events-allow-remote", "--events-queue", "--metrics",
           "--metrics-allow-remote", "--profile", "--phase-db")


def actions(parser) -> dict:
    return {o: a for a in parser._actions for o in a.option_strings}


def described(action) -> tuple:
    return (action.option_strings, action.dest, action.default, action.choices, action.type, action.help)


@pytest.mark.parametrize("other, options", [(BenchCommand("bench"), SOURCE), (ReplayCommand("replay"), OUTPUTS)])
def test_shared_options_are_declared_once(other, options):
    # the live monitor's help as declared (its --help shows shorter texts for some: monitor.BRIEF)
    live, theirs = actions(MonitorCommand("phasescope").parser(full=True)), actions(other.parser())
    for option in options:
        assert described(theirs[option]) == described(live[option]), option


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["bench", "--bursts", "--", "/bin/true"], ["--bursts", "-f", "/bin/true"]])
def test_bursts_outside_sampled_mode_is_refused_alike(argv):
    r = run_cli(*argv)
    assert r.returncode == 2
    assert r.stderr.strip().endswith("--bursts needs --mode sampled (exact mode follows every interval already)"), r.stderr


@pytest.mark.parametrize("argv", [["--rate", "5000", "-f", "prog"], ["--window", "50", "-f", "prog"],
                                  ["bench", "--rate", "5000", "--", "prog"]])
def test_sampled_options_in_exact_mode_are_refused_not_ignored(argv):
    """``--rate 5000`` in exact mode ran as if not given (the docstring promised a refusal)."""
    from phasescope.commands.options import validate_source_options
    from phasescope.errors import InputError
    command = BenchCommand("bench") if argv[0] == "bench" else MonitorCommand("phasescope")
    args = command.parse(argv[1:] if argv[0] == "bench" else argv)
    with pytest.raises(InputError, match="give --mode sampled"):
        validate_source_options(args)
