"""The collector is held while phasescope starts up (phasescope/startup.py, issue 31): on again
and nothing frozen once a command returns, whatever way it ended; a caller's own choice kept."""

from __future__ import annotations

import gc

import pytest

from phasescope import startup
from phasescope.cli import main
from phasescope.commands.runner import Command


def test_hold_settle_release():
    assert gc.isenabled()
    startup.hold()
    assert not gc.isenabled()
    startup.settled()
    assert gc.isenabled() and gc.get_freeze_count() > 0  # what start-up made is walked no more
    startup.release()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_caller_that_turned_the_collector_off_keeps_it_off():
    gc.disable()
    try:
        startup.hold()
        startup.settled()
        startup.release()
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_the_command_line_is_parsed_held_and_the_command_runs_collected(monkeypatch):
    seen = []

    class Probe(Command):
        def add_options(self, parser):
            seen.append(("parse", gc.isenabled()))

        def run(self, args):
            seen.append(("run", gc.isenabled(), gc.get_freeze_count() > 0))
            return 0

    monkeypatch.setattr("phasescope.cli._command", lambda name, prog: Probe(prog))
    assert main(["plot"]) == 0
    assert seen == [("parse", False), ("run", True, True)]
    assert gc.isenabled() and gc.get_freeze_count() == 0


@pytest.mark.parametrize("argv", [["--bogus-option"], ["help", "tracker"], ["--help"]])
def test_the_collector_is_back_on_after_any_end(argv, capsys):
    try:
        main(argv)
    except SystemExit:
        pass
    assert gc.isenabled() and gc.get_freeze_count() == 0
