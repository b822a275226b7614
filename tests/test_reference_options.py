"""The options table of docs/reference.md is the live monitor's --help: the same options, the same defaults (and
the log's `prediction` row names the option that chooses it)."""

from __future__ import annotations

import re
from pathlib import Path

from phasescope.commands.monitor import MonitorCommand
from phasescope.engine.config import PRIMARY
from phasescope.engine.tracker import PRESETS

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"


def table_rows():
    text = REFERENCE.read_text()
    block = text[text.index("## Options"):text.index("Every file is opened before")]
    rows = [line.split(" | ") for line in block.splitlines() if line.startswith("| `")]
    return [(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", cells[0]), cells[1]) for cells in rows]


def parser_actions():
    return [a for a in MonitorCommand("phasescope").parser()._actions if a.option_strings]


def test_every_option_is_in_the_table_and_nothing_else():
    documented = {o for opts, _ in table_rows() for o in opts}
    actions = parser_actions()
    known = {o for a in actions for o in a.option_strings} - {"-h", "--help", "--help-all", "--version"}
    # a row names one spelling of each option (-o, not --output)
    missing = {a.option_strings[-1] for a in actions if a.option_strings[0] not in ("-h", "--version", "--help-all")
               and not documented & set(a.option_strings)}
    assert not missing, f"options in --help but not in the reference's table: {sorted(missing)}"
    assert documented <= known, f"options in the reference's table that --help lacks: {sorted(documented - known)}"


def _shown(value) -> set:
    """The ways the reference may write a default."""
    if isinstance(value, bool) or value is None:
        return set()
    if isinstance(value, int):
        return {str(value), f"{value:,}"} | ({f"{value >> 20} MiB"} if value >= 1 << 20 and not value % (1 << 20) else set())
    if isinstance(value, float):
        return {f"{value:g}", f"{value:.2f}", f"{value:.1f}"}
    return {value} if isinstance(value, str) else set()  # (--bits: a sentinel for "not given")


def test_each_documented_default_is_the_one_in_force():
    by_option = {o: a for a in parser_actions() for o in a.option_strings}
    default_preset = PRESETS["default"]
    for opts, cell in table_rows():
        for opt in opts:
            action = by_option[opt]
            value = action.default if action.default is not None else default_preset.get(action.dest)
            shown = _shown(value)
            if shown:
                assert any(re.search(rf"(?<![\w.]){re.escape(s)}(?![\w])", cell) for s in shown), \
                    f"{opt}: default {value!r} in force, the reference says {cell!r}"


def test_the_logs_prediction_field_names_the_option_that_chooses_it_and_its_default():
    # The log's `prediction` row said "the hybrid's" long after the default became `cycle`, then `context`.
    row = next(line for line in REFERENCE.read_text().splitlines() if line.startswith("| `prediction`"))
    assert "`--shown-prediction`" in row and f"default `{PRIMARY}`" in row, row
