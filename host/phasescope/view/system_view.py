"""What ``phasescope -a`` shows: the busiest processes, each one's current phase, predicted next
phase and confidence, live (rich) and in the end-of-run report. Both are pure functions of the
run's rows (:meth:`phasescope.pipeline.processes.ProcessRun.row`), so they render at any size."""

from __future__ import annotations

from typing import List, Optional, TextIO

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from phasescope.view.dashboard import phase_label

#: columns in the order they are dropped when the terminal is narrow (last dropped first)
_COLUMNS = [("pid", "right"), ("command", "left"), ("cpu", "right"), ("phase", "left"), ("next", "left"),
            ("conf", "right"), ("run", "right"), ("phases", "right"), ("thr", "right"), ("changes", "right")]
#: each column's width in characters: pids up to 7 digits, shares up to 100%, counts up to 7 digits
_WIDTH = {"pid": 7, "command": 15, "cpu": 4, "phase": 5, "next": 5, "conf": 4, "run": 7, "phases": 6,
          "thr": 4, "changes": 7}


def _cells(row: dict, recent_s: float) -> dict:
    conf = row["confidence"]
    return {"pid": Text(str(row["pid"])), "command": Text(row["comm"] or "?"),
            "cpu": Text(f"{100 * row['recent_cpu_s'] / recent_s:.0f}%"),
            "phase": phase_label(row["phase"]), "next": phase_label(row["next"]),
            "conf": Text("-" if conf is None else f"{100 * conf:.0f}%"), "run": Text(str(row["run_length"])),
            "phases": Text(str(row["phases"])), "thr": Text(str(row["threads"])),
            "changes": Text(str(row["changes"]))}


def _columns_for(width: int) -> List[str]:
    """The columns that fit ``width`` (borders and padding included), most important first."""
    names, used = [], 1
    for name, _ in _COLUMNS:
        need = _WIDTH[name] + 3  # the cell's padding and its right border
        if used + need > width:
            break
        names.append(name)
        used += need
    return names


def process_table(rows: List[dict], width: int, recent_s: float, title: Optional[str] = None) -> Table:
    """The busiest processes as a table that fits ``width`` (columns dropped, never cut)."""
    names = _columns_for(width)
    justify = dict(_COLUMNS)
    t = Table(title=title, expand=False, header_style="bold")
    for name in names:
        t.add_column(name, justify=justify[name], no_wrap=True, width=_WIDTH[name],
                     overflow="ellipsis" if name == "command" else "fold")
    for row in rows:
        cells = _cells(row, recent_s)
        t.add_row(*[cells[n] for n in names])
    return t


def render(run, width: int, height: int):
    """The live dashboard of a system-wide run (``run``: a
    :class:`~phasescope.pipeline.system.SystemRun`)."""
    h = run.header()
    head = Text.assemble(("phasescope -a  ", "bold"), (f"{h['status']}  ", "green"),
                         (f"{h['filter']}  ", "magenta"),
                         f"{h['processes']} followed ({h['seen']} seen)  {h['cpus']} CPUs at {h['rate_hz']} Hz  ",
                         f"samples {h['samples']}  ", (f"lost {h['lost']}", "bold red" if h["lost"] else "dim"),
                         (f"  {h['elapsed']:.0f}s", "dim"))
    head_lines = len(head.wrap(Console(width=width), width))
    rows = run.busiest(max(1, height - head_lines - 6))  # panel 2 lines, table header 3, its bottom 1
    if height < 8 or width < 40:
        return Text(f"terminal too small ({width}x{height}): phasescope -a needs 40x8", style="bold yellow")
    table = process_table(rows, width - 4, h["recent_s"])  # inside the panel's border and padding
    return Group(head, Panel(table, title=f"busiest processes (CPU over the last {h['recent_s']:g} s)", expand=True))


def print_system_report(summary: dict, top: int = 20, file: Optional[TextIO] = None) -> None:
    """The end-of-run report: the busiest processes and the ended ones, with their main phases."""
    console = Console(file=file, highlight=False)
    shown = 4 if console.width >= 100 else 2  # main phases per process: a row stays one line
    procs = sorted(summary["processes"], key=lambda p: -p["cpu_s"])[:top]
    s = summary["session"]
    console.print(f"phasescope -a: {s['processes_seen']} processes followed ({s['filter']}), {s['samples']} samples "
                  f"({s['lost_samples']} lost) in {s['elapsed_s']:.1f} s")
    if not procs:
        return
    t = Table(title="busiest processes", header_style="bold", pad_edge=False)
    for name, justify in (("pid", "right"), ("command", "left"), ("cpu s", "right"), ("phases", "right"),
                          ("main phases (share)", "left"), ("end", "left")):
        t.add_column(name, justify=justify, overflow="ellipsis" if name == "command" else "fold",
                     no_wrap=name == "command")
    for p in procs:
        main = " ".join(f"P{ph['phase']} {100 * (ph['share'] or 0):.0f}%" for ph in p["phases"][:shown])
        t.add_row(str(p["pid"]), p["comm"] or "?", f"{p['cpu_s']:.2f}", str(p["phases_seen"]), main,
                  p["ended"] or "running")
    console.print(t)
