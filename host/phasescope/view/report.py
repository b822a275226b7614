"""The end-of-run report printed by the live monitor and by replay, from a summary dict.

To a terminal it goes through rich (colours, the terminal's width). To a file or a pipe it is
written as plain text whenever that is exactly what rich would write there (box-drawn tables at
120 columns, no styles): rich's import and layout were a sixth of a sampled run's fixed CPU
(issue 31). Anything rich would change (markup, emoji codes, a line to wrap, a table to shrink,
a non-UTF-8 file, FORCE_COLOR) sends the whole report through rich instead.
"""

from __future__ import annotations

import os
import re
import sys
from typing import List, Optional, TextIO

from phasescope.engine.predict import PREDICTORS

WIDTH = 120  # columns of a report to a file or pipe
#: what rich reads as an emoji code (``:name:``) or as markup (``[tag]``) in a markup line
_EMOJI, _MARKUP = re.compile(r":\S*:"), "["


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _mean_cv(m: dict, scale: float = 1.0, fmt: str = "{:.3g}") -> str:
    if not m["n"]:
        return "-"
    cv = "" if m["cv"] is None else f" ({100 * m['cv']:.1f}%)"
    return fmt.format(m["mean"] / scale) + cv


def _console(file: TextIO, width: Optional[int]):
    """A rich Console whose closed pipe is a BrokenPipeError for the runner to end quietly on
    (rich's own answer is exit 1)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return _Console(file=file, width=width)


def _styled(file: TextIO) -> bool:
    """Whether rich would write colours and styles to ``file`` (its own test of a terminal)."""
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    if os.environ.get("FORCE_COLOR") is not None:
        return os.environ["FORCE_COLOR"] != ""
    return file.isatty()


class _Report:
    """Lines (:meth:`print`, as rich's ``Console.print``) and tables, written by :meth:`end`."""

    def __init__(self, file: Optional[TextIO]):
        self.file = file or sys.stdout
        plain = (not self.file.isatty() and not _styled(self.file)
                 and (getattr(self.file, "encoding", None) or "utf-8").lower().startswith("utf"))
        self.console = None if plain else _console(self.file, None if self.file.isatty() else WIDTH)
        self.width = WIDTH if self.console is None else self.console.width
        self.items: list = []

    def print(self, text: str, **style) -> None:
        self.items.append((text, style))

    def table(self, title: str, columns, rows) -> None:
        """``columns``: ``(header, "left" | "right")``; ``rows``: lists of cells (str)."""
        self.items.append((title, list(columns), [list(r) for r in rows]))

    def end(self) -> None:
        if self.console is None:
            text = _plain_text(self.items, self.width)
            if text is not None:
                self.file.write(text)
                self.file.flush()
                return
            self.console = _console(self.file, WIDTH)
        from rich.table import Table
        for item in self.items:
            if len(item) == 2:
                self.console.print(item[0], **item[1])
                continue
            title, columns, rows = item
            t = Table(title=title, title_justify="left", header_style="bold")
            for header, justify in columns:
                t.add_column(header, justify=justify, no_wrap=True)
            for r in rows:
                t.add_row(*r)
            self.console.print(t)


def _plain_text(items: list, width: int) -> Optional[str]:
    """The report as rich writes it to a file, None where rich would change something."""
    def fits(text: str, markup: bool = True) -> bool:
        return (text.isascii() and text.isprintable() and text == text.rstrip() and not _EMOJI.search(text)
                and not (markup and _MARKUP in text))

    out: List[str] = []
    for item in items:
        if len(item) == 2:
            text, style = item
            if not fits(text, style.get("markup", True)) or (len(text) > width and not style.get("soft_wrap")):
                return None
            out.append(text)
            continue
        title, columns, rows = item
        cells = [[header for header, _ in columns]] + rows
        if not all(fits(c) for row in cells for c in row) or not fits(title):
            return None
        widths = [max(len(row[i]) for row in cells) + 2 for i in range(len(columns))]
        total = sum(widths) + len(widths) + 1
        if total > width or len(title) > total:
            return None

        def rule(left, fill, mid, right):
            return left + mid.join(fill * w for w in widths) + right

        def row(r, edge):
            return edge + edge.join(" " + (c.ljust(w - 2) if j == "left" else c.rjust(w - 2)) + " "
                                    for c, w, (_, j) in zip(r, widths, columns)) + edge

        out += [title.ljust(total), rule("┏", "━", "┳", "┓"), row(cells[0], "┃"), rule("┡", "━", "╇", "┩")]
        out += [row(r, "│") for r in rows] + [rule("└", "─", "┴", "┘")]
    return "".join(line + "\n" for line in out)


#: columns of the phase table given up, in this order, when the console is too narrow for all
_DROP_ORDER = ("ns/insn", "next", "ms/interval", "run mean/max")


def _fitting(columns, rows, width: int) -> list:
    """Indices of the columns to show: all when they fit ``width`` whole (a rich table with borders
    takes 3 characters a column and 1 more), else without the least needed ones; a column that is
    empty ("-") in every row goes first."""
    need = [max(len(c[0]), *(len(r[i]) for r in rows)) + 3 for i, c in enumerate(columns)]
    keep = [i for i in range(len(columns)) if any(r[i] not in ("-", "") for r in rows) or i == 0]
    for name in _DROP_ORDER:
        if sum(need[i] for i in keep) + 1 <= width:
            break
        keep = [i for i in keep if columns[i][0] != name]
    return keep


def print_report(summary: dict, top: int, file: Optional[TextIO] = None) -> None:
    """The per-phase table and the predictor scores of a summary, on ``file`` (default stdout)."""
    console = _Report(file)
    w = summary["whole"]
    work = (f"{w['instructions']:,} instructions" if w["instructions"] is not None
            else f"{w.get('cpu_ns', 0) / 1e9:.2f} s of sampled CPU time")
    console.print(f"{w['intervals']:,} intervals, {work}, {w['threads']} thread(s), "
                  f"{w['phases']} phases, phase changes in {_pct(w['change_rate'])} of intervals")
    session = summary.get("session", {})
    for reason in session.get("not_followed", ()):
        console.print(f"exact mode could not follow {reason}", style="yellow", highlight=False, markup=False,
                      soft_wrap=True)
    if session.get("not_followed_more"):
        console.print(f"exact mode could not follow {session['not_followed_more']} more (said at the time)",
                      style="yellow", highlight=False, markup=False)
    columns = (("phase", "left"), ("share", "right"), ("intervals", "right"), ("runs", "right"),
               ("run mean/max", "right"), ("next", "left"), ("ms/interval", "right"), ("ns/insn", "right"))

    def row(label, d, transitions):
        nxt = " ".join(f"{x['phase']}:{100 * x['count'] / max(1, sum(y['count'] for y in transitions)):.0f}%"
                       for x in transitions[:3])
        return [label, _pct(d.get("share", 1.0)), f"{d['intervals']:,}", f"{d['runs']:,}",
                f"{d['run_length']['mean']:.1f}/{d['run_length']['max']}", nxt,
                _mean_cv(d["metrics"]["wall_ns"], 1e6), _mean_cv(d["metrics"]["ns_per_instruction"])]

    tracker = summary.get("config", {}).get("tracker", {})  # ID 0 is the transition phase's when it labels one
    transition = tracker.get("transition") and tracker.get("transition_label", "transition") == "transition"

    def label(phase: int) -> str:
        return "0 (transition)" if transition and phase == 0 else str(phase)

    rows = [row("all", w, [])] + [row(label(p["phase"]), p, p["transitions"]) for p in summary["phases"][:top]]
    if len(summary["phases"]) > top:
        rest = summary["phases"][top:]
        rows.append([f"+{len(rest)} more", _pct(sum(p["share"] for p in rest)),
                     f"{sum(p['intervals'] for p in rest):,}", "", "", "", "", ""])
    keep = _fitting(columns, rows, console.width)
    console.table("phases (mean (CV) per interval)", [columns[i] for i in keep], [[r[i] for i in keep] for r in rows])
    scores = []
    for name in PREDICTORS:
        sc = summary["predictors"][name]
        label = f"{name} *" if name == summary.get("primary_predictor") else name
        scores.append([label] + [f"{_pct(sc[k]['accuracy'])} of {sc[k]['n']:,}"
                                 for k in ("overall", "changes", "steady")])
    console.table("next-phase predictors (accuracy)", [("predictor", "left")] + [
        (name, "right") for name in ("overall", "at changes", "steady")], scores)
    console.print("* the prediction shown live", style="dim")
    console.end()


#: a phase with this share of the run or more is a main phase: the report names its hot code
MAIN_SHARE = 0.05


def print_hot_code(summary: dict, top: int, file: Optional[TextIO] = None) -> None:
    """The hottest block of each main phase (:data:`MAIN_SHARE` of the run or more) and of the
    ``top`` largest, named, and disassembled where the code could be read."""
    console = _Report(file)
    phases = [p for i, p in enumerate(summary["phases"]) if i < top or p["share"] >= MAIN_SHARE]
    shown = False
    for p in phases:
        hottest = p["top_code"][0] if p["top_code"] else None
        if hottest is None:
            continue
        if not shown:
            console.print("hot code (the hottest block of each main phase)", style="bold")
            shown = True
        unit = "instructions" if p["instructions"] is not None else "CPU time"
        measured = "sampled CPU time" if p["instructions"] is None else "instructions"
        name = hottest.get("symbol") or (f"{hottest['pc']:#x}" if hottest.get("pc") is not None
                                         else f"key {hottest['key']:#x}")
        console.print(f"P{p['phase']} ({100 * p['share']:.1f}% of {unit}): {name}, "
                      f"{100 * hottest['share']:.0f}% of the phase's {measured}", highlight=False, markup=False)
        for line in hottest.get("disassembly") or ():
            console.print(f"    {line}", highlight=False, markup=False)
    console.end()
