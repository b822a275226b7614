"""The live terminal dashboard (rich): renders a :class:`Snapshot` of the monitor's state.

Rendering is a pure function of the snapshot, so the monitor refreshes it on its own clock (a few
times a second) however fast intervals arrive. The layout adapts to the terminal: at 80x24 every
panel is there in compact form; larger terminals get longer timelines, a taller heat map and more
table rows.
"""

from __future__ import annotations

import itertools
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


def phase_label(phase: Optional[int], prefix: str = "P") -> Text:
    """``P3`` in phase 3's colour (``M3`` for a macro phase); ``-`` for none."""
    if phase is None or phase < 0:
        return Text("-", style="grey50")
    return Text(f"{prefix}{phase}", style=f"bold {phase_color(phase)}")


def _human(n: float) -> str:
    for unit in ("", "K", "M", "G", "T"):
        if abs(n) < 1000:
            return f"{n:.0f}{unit}" if unit == "" else f"{n:.1f}{unit}"
        n /= 1000
    return f"{n:.1f}P"


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _header(s: Snapshot, width: int) -> Text:
    """One line from 110 columns, else two; only the target's name is shortened, never a figure."""
    work = f"instr {_human(s.weight)}" if s.unit == "instructions" else f"cpu {s.weight / 1e9:.1f}s"
    fields = [(f"pid {s.pid}  ", "dim"), (f"{s.status}  ", "green" if s.status == "tracing" else "yellow"),
              (f"{s.mode}  ", "bold magenta")]
    figures = [(f"threads {s.threads_followed}  {work}  intervals {s.intervals} ({s.rate:.1f}/s)  ", ""),
               (f"dropped {s.dropped}", "bold red" if s.dropped else "dim"), (f"  {s.elapsed:.0f}s", "dim")]
    one_line = width >= 110
    first = fields + (figures if one_line else [])
    room = width - len("phasescope ") - sum(len(text) for text, _ in first) - 1
    target = s.target if len(s.target) <= room else s.target[:max(1, room - 1)] + "…"
    t = Text(no_wrap=True, overflow="crop")
    t.append("phasescope ", style="bold cyan")
    t.append(f"{target} ", style="bold")
    for text, style in first:
        t.append(text, style=style)
    if not one_line:
        t.append("\n")
        for text, style in figures:
            t.append(text, style=style)
    return t


def _strip(phases: Sequence[int], width: int) -> Text:
    """The phase barcode: one cell per interval, coloured by phase ID, newest on the right."""
    t = Text()
    for p, run in itertools.groupby(list(phases)[-width:]):  # one span per run: rich draws spans, not cells
        t.append("█" * len(list(run)), style=phase_color(p))
    return t


def _threads(s: Snapshot, max_rows: int, strip_width: int) -> Table:
    table = Table(box=None, pad_edge=False, expand=True, show_edge=False, header_style="bold")
    table.add_column("thread", no_wrap=True)
    table.add_column("now", no_wrap=True)
    table.add_column("run", justify="right", no_wrap=True)
    table.add_column("next", no_wrap=True)
    table.add_column("sure", justify="right", no_wrap=True)
    table.add_column("macro", no_wrap=True)
    table.add_column("timeline (newest right; macro phases below)", no_wrap=True, overflow="crop", ratio=1)
    rows = sorted(s.threads, key=lambda r: -r.intervals)
    for r in rows[:max_rows]:
        timeline = _strip(r.timeline, strip_width)
        if r.macro_timeline:  # the second time scale, under the 10M phases
            timeline.append("\n").append_text(_strip(r.macro_timeline, strip_width))
        table.add_row(str(r.tid), phase_label(r.phase), str(r.run_length), phase_label(r.predicted),
                      _pct(r.confidence), phase_label(r.macro, "M"), timeline)
    if len(rows) > max_rows:
        table.add_row(Text(f"+{len(rows) - max_rows} more", style="dim"), "", "", "", "", "", "")
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
        lower_row = levels[:, y + 1].tolist() if y + 1 < half else [None] * levels.shape[0]
        for (upper, lower), run in itertools.groupby(zip(levels[:, y].tolist(), lower_row)):
            out.append("▀" * len(list(run)), style=f"{_HEAT[upper]} on {'#000000' if lower is None else _HEAT[lower]}")
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


def _scores(s: Snapshot, rows: int, width: int) -> Table:
    """Predictor accuracies (the snapshot lists the shown one, marked *, then last phase, first); the
    names give way (…), never the figures."""
    table = Table(box=None, pad_edge=False, expand=True, header_style="bold")
    table.add_column("predictor", no_wrap=True, overflow="ellipsis", max_width=max(4, width - 3 * 6))
    for name in ("all", "chg", "stdy"):
        table.add_column(name, justify="right", no_wrap=True, min_width=4)
    for r in s.scores[:max(1, rows)]:
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


#: the smallest terminal that holds every panel
MIN_WIDTH, MIN_HEIGHT = 80, 24


def _too_small(s: Snapshot, width: int, height: int) -> Layout:
    """Below 80x24: the header, the threads and a line saying what is not shown."""
    root = Layout()
    note = Text(f"terminal {width}x{height}: below {MIN_WIDTH}x{MIN_HEIGHT}, threads only",
                style="yellow", no_wrap=True, overflow="ellipsis")
    header = _header(s, width)
    root.split_column(Layout(header, size=2 if width < 110 else 1), Layout(note, size=1),
                      Layout(_threads(s, max(1, height - 5), max(10, width - 34))))
    return root


def render(s: Snapshot, width: int, height: int) -> Layout:
    """Lay the snapshot out for a ``width`` x ``height`` terminal."""
    if width < MIN_WIDTH or height < MIN_HEIGHT:
        return _too_small(s, width, height)
    thread_rows = max(1, min(len(s.threads) or 1, 2 if height < 30 else 6))
    heat_rows = 4 if height < 30 else 8 if height < 44 else 16
    strip_width = max(10, width - 34)
    heat_width = max(10, width - 4)
    header_rows = 1 if width >= 110 else 2
    bottom_rows = max(5, height - header_rows - (thread_rows + 3) - (heat_rows + 3))

    root = Layout()
    root.split_column(
        Layout(_header(s, width), name="header", size=header_rows),
        Layout(Panel(_threads(s, thread_rows, strip_width), title="threads", title_align="left",
                     padding=(0, 1)), name="threads", size=thread_rows + 3),
        Layout(Panel(_heatmap(s, heat_rows, heat_width), title="footprints (buckets x intervals)",
                     title_align="left", padding=(0, 1)), name="heat", size=heat_rows + 3),
        Layout(name="bottom", size=bottom_rows),
    )
    table_rows = max(1, bottom_rows - 3)
    inner = bottom_rows - 2  # the panel's borders
    score_rows = min(len(s.scores), max(2, inner - 5))  # leave the last changes at least three rows
    right_width = width * 2 // 5 - 4
    right = Group(_scores(s, score_rows, right_width), Text(""), _changes(s, max(1, inner - score_rows - 2)))
    root["bottom"].split_row(
        Layout(Panel(_phases(s, table_rows), title="phases", title_align="left", padding=(0, 1)), ratio=3),
        Layout(Panel(right, title="prediction / changes", title_align="left", padding=(0, 1)), ratio=2),
    )
    return root
