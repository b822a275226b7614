"""The live terminal dashboard (rich): renders a :class:`Snapshot` of the monitor's state.

Rendering is a pure function of the snapshot, so the monitor refreshes it on its own clock (a few
times a second) however fast intervals arrive. The layout adapts to the terminal: at 80x24 every
panel is there in compact form; larger terminals get longer timelines, a taller heat map and more
table rows.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from rich.console import Group
from rich.layout import Layout
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from phasescope.view.snapshot import Snapshot

#: Phase colours, chosen to stay distinct on 256-colour terminals; IDs wrap around.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
           "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#f7b6d2", "#dbdb8d"]
_HEAT = ["#000000", "#1b0c41", "#4a0c6b", "#781c6d", "#a52c60", "#cf4446", "#ed6925", "#fb9b06",
         "#f7d13d", "#fcffa4"]  # inferno


def phase_color(phase: Optional[int]) -> str:
    return "grey50" if phase is None or phase < 0 else PALETTE[phase % len(PALETTE)]


def phase_label(phase: Optional[int]) -> Text:
    if phase is None or phase < 0:
        return Text("-", style="grey50")
    return Text(f"P{phase}", style=f"bold {phase_color(phase)}")


def _human(n: float) -> str:
    for unit in ("", "K", "M", "G", "T"):
        if abs(n) < 1000:
            return f"{n:.0f}{unit}" if unit == "" else f"{n:.1f}{unit}"
        n /= 1000
    return f"{n:.1f}P"


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _header(s: Snapshot) -> Text:
    t = Text()
    t.append("phasescope ", style="bold cyan")
    t.append(f"{s.target} ", style="bold")
    t.append(f"pid {s.pid}  ", style="dim")
    t.append(f"{s.status}  ", style="green" if s.status == "tracing" else "yellow")
    t.append(f"{s.mode}  ", style="bold magenta")
    work = f"instr {_human(s.weight)}" if s.unit == "instructions" else f"cpu {s.weight / 1e9:.1f}s"
    t.append(f"threads {s.threads_followed}  {work}  intervals {s.intervals} ({s.rate:.1f}/s)  ")
    t.append(f"dropped {s.dropped}", style="bold red" if s.dropped else "dim")
    t.append(f"  {s.elapsed:.0f}s", style="dim")
    return t


def _strip(phases: Sequence[int], width: int) -> Text:
    """The phase barcode: one cell per interval, coloured by phase ID, newest on the right."""
    t = Text()
    for p in list(phases)[-width:]:
        t.append("█", style=phase_color(p))
    return t


def _threads(s: Snapshot, max_rows: int, strip_width: int) -> Table:
    table = Table(box=None, pad_edge=False, expand=True, show_edge=False, header_style="bold")
    table.add_column("thread", no_wrap=True)
    table.add_column("now", no_wrap=True)
    table.add_column("run", justify="right", no_wrap=True)
    table.add_column("next", no_wrap=True)
    table.add_column("sure", justify="right", no_wrap=True)
    table.add_column("timeline (newest right)", no_wrap=True, overflow="crop", ratio=1)
    rows = sorted(s.threads, key=lambda r: -r.intervals)
    for r in rows[:max_rows]:
        table.add_row(str(r.tid), phase_label(r.phase), str(r.run_length), phase_label(r.predicted),
                      _pct(r.confidence), _strip(r.timeline, strip_width))
    if len(rows) > max_rows:
        table.add_row(Text(f"+{len(rows) - max_rows} more", style="dim"), "", "", "", "", "")
    return table


def _heatmap(s: Snapshot, rows: int, width: int) -> Text:
    """The paper's Figure 3, live: time on x, buckets on y (two buckets per text row)."""
    fps = s.footprints
    if fps is None or len(fps) == 0:
        return Text("waiting for the first interval...", style="dim")
    fps = np.asarray(fps, dtype=float)[-width:]
    buckets = fps.shape[1]
    groups = max(1, int(np.ceil(buckets / (2 * rows))))  # buckets merged per half-row
    usable = (buckets // groups) * groups
    folded = fps[:, :usable].reshape(len(fps), -1, groups).sum(axis=2)
    top = max(float(folded.max()), 1e-9)
    levels = np.minimum((np.sqrt(folded / top) * (len(_HEAT) - 1)).round().astype(int), len(_HEAT) - 1)
    out = Text()
    half = levels.shape[1]
    for y in range(0, half, 2):
        for x in range(levels.shape[0]):
            upper = _HEAT[levels[x, y]]
            lower = _HEAT[levels[x, y + 1]] if y + 1 < half else "#000000"
            out.append("▀", style=f"{upper} on {lower}")
        if y + 2 < half:
            out.append("\n")
    out.append("\n")
    out.append_text(_strip(s.footprint_phases, width))
    return out


def _size(n: int) -> str:
    """4096 -> 4K, 1048576 -> 1M."""
    return f"{n >> 20}M" if n >= 1 << 20 else f"{n >> 10}K"


def _phases(s: Snapshot, max_rows: int) -> Table:
    table = Table(box=None, pad_edge=False, expand=True, header_style="bold")
    table.add_column("ID", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    table.add_column("occ", justify="right", no_wrap=True)
    table.add_column("run", justify="right", no_wrap=True)
    miss = s.locality_size is not None
    if miss:
        table.add_column(f"miss@{_size(s.locality_size)}", justify="right", no_wrap=True)
    table.add_column("top code", no_wrap=True, overflow="ellipsis", ratio=1)
    for r in s.phases[:max_rows]:
        extra = [("-" if r.miss_rate is None else f"{100 * r.miss_rate:.0f}%")] if miss else []
        table.add_row(phase_label(r.phase), f"{100 * r.share:.1f}%", str(r.occurrences), f"{r.mean_run:.1f}",
                      *extra, r.top_code)
    if len(s.phases) > max_rows:
        rest = sum(r.share for r in s.phases[max_rows:])
        table.add_row(Text(f"+{len(s.phases) - max_rows}", style="dim"), f"{100 * rest:.1f}%", "", "",
                      *([""] if miss else []), "")
    return table


def _scores(s: Snapshot) -> Table:
    table = Table(box=None, pad_edge=False, expand=True, header_style="bold")
    table.add_column("predictor", no_wrap=True)
    table.add_column("all", justify="right", no_wrap=True)
    table.add_column("chg", justify="right", no_wrap=True)
    table.add_column("steady", justify="right", no_wrap=True)
    for r in s.scores:
        table.add_row(r.name, _pct(r.overall), _pct(r.at_changes), _pct(r.steady))
    return table


def _changes(s: Snapshot, max_rows: int) -> Text:
    t = Text()
    for c in s.changes[-max_rows:][::-1]:
        t.append(f"{c.when} #{c.seq} {c.tid} ", style="dim")
        t.append_text(phase_label(c.before))
        t.append("→")
        t.append_text(phase_label(c.after))
        t.append("\n")
    if not s.changes:
        t.append("none yet", style="dim")
    t.rstrip()
    return t


def render(s: Snapshot, width: int, height: int) -> Layout:
    """Lay the snapshot out for a ``width`` x ``height`` terminal."""
    thread_rows = max(1, min(len(s.threads) or 1, 2 if height < 30 else 6))
    heat_rows = 4 if height < 30 else 8 if height < 44 else 16
    strip_width = max(10, width - 34)
    heat_width = max(10, width - 4)
    header_rows = 1 if width >= 110 else 2
    bottom_rows = max(5, height - header_rows - (thread_rows + 3) - (heat_rows + 3))

    root = Layout()
    root.split_column(
        Layout(_header(s), name="header", size=header_rows),
        Layout(Panel(_threads(s, thread_rows, strip_width), title="threads", title_align="left",
                     padding=(0, 1)), name="threads", size=thread_rows + 3),
        Layout(Panel(_heatmap(s, heat_rows, heat_width), title="footprints (buckets x intervals)",
                     title_align="left", padding=(0, 1)), name="heat", size=heat_rows + 3),
        Layout(name="bottom", size=bottom_rows),
    )
    table_rows = max(1, bottom_rows - 3)
    right = Group(_scores(s), Text(""), _changes(s, max(1, bottom_rows - 9)))
    root["bottom"].split_row(
        Layout(Panel(_phases(s, table_rows), title="phases", title_align="left", padding=(0, 1)), ratio=3),
        Layout(Panel(right, title="prediction / changes", title_align="left", padding=(0, 1)), ratio=2),
    )
    return root
