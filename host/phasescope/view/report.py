"""The end-of-run report printed by the live monitor and by replay, from a summary dict."""

from __future__ import annotations

import sys
from typing import Optional, TextIO

from rich.console import Console
from rich.table import Table

from phasescope.engine.predict import PREDICTORS
from phasescope.engine.stats import final_ids


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _mean_cv(m: dict, scale: float = 1.0, fmt: str = "{:.3g}") -> str:
    if not m["n"]:
        return "-"
    cv = "" if m["cv"] is None else f" ({100 * m['cv']:.1f}%)"
    return fmt.format(m["mean"] / scale) + cv


class _Console(Console):
    """A rich Console whose closed pipe is a BrokenPipeError for the runner to end quietly on
    (rich's own answer is exit 1)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def _console(file: Optional[TextIO]) -> Console:
    """The report's console. No emoji codes: the report prints the target's names and arguments,
    where ``a:smile:b`` must not become a smiley (nor load rich's 5 ms table of emoji for it)."""
    file = file or sys.stdout
    return _Console(file=file, width=None if file.isatty() else 120, emoji=False)


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
    console = _console(file)
    w = summary["whole"]
    work = (f"{w['instructions']:,} instructions" if w["instructions"] is not None
            else f"{w.get('cpu_ns', 0) / 1e9:.2f} s of sampled CPU time")
    # a phase folded into another (overlap, retire, merge) is listed as it was, marked with the phase that counts it
    final = final_ids({p["phase"]: p["merged_into"] for p in summary["phases"] if p.get("merged_into") is not None})
    folded = f" ({len(final)} folded into others: {w['phases'] - len(final)} at the end)" if final else ""
    console.print(f"{w['intervals']:,} intervals, {work}, {w['threads']} thread(s), "
                  f"{w['phases']} phases{folded}, phase changes in {_pct(w['change_rate'])} of intervals")
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
        return "0 (transition)" if transition and phase == 0 else f"{phase}>{final[phase]}" if phase in final else str(phase)

    rows = [row("all", w, [])] + [row(label(p["phase"]), p, p["transitions"]) for p in summary["phases"][:top]]
    if len(summary["phases"]) > top:
        rest = summary["phases"][top:]
        rows.append([f"+{len(rest)} more", _pct(sum(p["share"] for p in rest)),
                     f"{sum(p['intervals'] for p in rest):,}", "", "", "", "", ""])
    keep = _fitting(columns, rows, console.width)
    t = Table(title="phases (mean (CV) per interval)", title_justify="left", header_style="bold")
    for i in keep:
        t.add_column(columns[i][0], justify=columns[i][1], no_wrap=True)
    for r in rows:
        t.add_row(*(r[i] for i in keep))
    console.print(t)
    s = Table(title="next-phase predictors (accuracy)", title_justify="left", header_style="bold")
    for name in ("predictor", "overall", "at changes", "steady"):
        s.add_column(name, justify="left" if name == "predictor" else "right", no_wrap=True)
    for name in PREDICTORS:
        sc = summary["predictors"][name]
        label = f"{name} *" if name == summary.get("primary_predictor") else name
        s.add_row(label, *(f"{_pct(sc[k]['accuracy'])} of {sc[k]['n']:,}" for k in ("overall", "changes", "steady")))
    console.print(s)
    console.print("* the prediction shown live", style="dim")


#: a phase with this share of the run or more is a main phase: the report names its hot code
MAIN_SHARE = 0.05


def print_hot_code(summary: dict, top: int, file: Optional[TextIO] = None) -> None:
    """The hottest block of each main phase (:data:`MAIN_SHARE` of the run or more) and of the
    ``top`` largest, named, and disassembled where the code could be read."""
    console = _console(file)
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
