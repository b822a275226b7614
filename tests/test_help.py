"""``phasescope --help`` fits on two screens and shows what most users need; ``phasescope help
tracker`` and ``help all`` show the rest; every option is still accepted. In-process, no target."""

from __future__ import annotations

import pytest

from phasescope.cli import SUMMARIES, main
from phasescope.commands.monitor import BRIEF, MonitorCommand


def _help(capsys, monkeypatch, *argv) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    assert code == 0
    return capsys.readouterr().out


def test_help_fits_two_screens_and_names_what_users_need_first(capsys, monkeypatch):
    text = _help(capsys, monkeypatch, "--help")
    assert len(text.splitlines()) <= 64
    for option in ("-p PID", "-f PROGRAM", "-a, --system-wide", "--mode", "--log", "--summary", "--events",
                   "--metrics", "--duration", "--no-dashboard"):
        assert option in text
    for research in ("--threshold", "--segment-mode", "--gpht-depth", "--locality-window", "--rate"):
        assert research not in text
    words = " ".join(text.split())
    assert "phasescope help tracker" in words and "phasescope help all" in words


def test_help_names_every_subcommand(capsys, monkeypatch):
    epilog = _help(capsys, monkeypatch, "--help").split("subcommands:", 1)[1]
    assert "help" in SUMMARIES
    for name in SUMMARIES:
        assert f"{name} (" in epilog.replace("\n", " ").replace("- ", "-")


def test_help_tracker_lists_the_research_knobs(capsys, monkeypatch):
    text = _help(capsys, monkeypatch, "help", "tracker")
    for option in ("--tracker", "--threshold", "--buckets", "--segment-mode", "--rle-entries", "--gpht-depth"):
        assert option in text
    assert "--log" not in text


@pytest.mark.parametrize("argv", [("help", "all"), ("--help-all",)])
def test_help_all_lists_every_option(capsys, monkeypatch, argv):
    text = _help(capsys, monkeypatch, *argv)
    options = {o for a in MonitorCommand("phasescope").parser()._actions for o in a.option_strings}
    assert options and all(o in text for o in options)


def test_every_option_is_still_parsed():
    """The short help hides options, never the parser's: a research knob parses as before."""
    args = MonitorCommand("phasescope").parse(["--threshold", "0.2", "--segment-mode", "qphase", "--rate", "500",
                                               "-f", "prog", "x"])
    assert (args.threshold, args.segment_mode, args.rate, args.argv) == (0.2, "qphase", 500, ["prog", "x"])


def test_brief_names_only_real_options():
    dests = {a.dest for a in MonitorCommand("phasescope").parser(full=True)._actions}
    assert set(BRIEF) <= dests


def test_help_of_a_subcommand_is_its_own(capsys, monkeypatch):
    assert "usage: phasescope replay" in _help(capsys, monkeypatch, "help", "replay")


def test_help_on_an_unknown_topic_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["help", "nope"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "tracker" in err
