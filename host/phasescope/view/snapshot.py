"""What the live monitor shows: per-thread timelines, recent changes and prediction confidence,
collected from the engine's callbacks and turned into a dashboard :class:`Snapshot` or plain lines.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable, Deque, Dict, Optional

import numpy as np

from phasescope.view.dashboard import ChangeRow, PhaseRow, ScoreRow, Snapshot, ThreadRow
from phasescope.engine.phase_engine import IntervalResult, PhaseEngine
from phasescope.engine.interval import Interval
from phasescope.engine.predict import PREDICTORS, PRIMARY

TIMELINE = 512  # intervals kept per thread for the barcode
CONFIDENCE_WINDOW = 32  # recent primary predictions scored per thread
CHANGES = 64

LABELS = {"rle_markov": "RLE Markov", "last_phase": "last phase", "markov1": "Markov-1", "markov2": "Markov-2"}


def short_name(name: str) -> str:
    """``libpython3.11.so.1.0!f`` -> ``libpython3.11!f``: the library version suffix is noise on screen."""
    module, sep, rest = name.partition("!")
    if not sep:
        module, sep, rest = name.partition("+")
    return module.split(".so")[0] + sep + rest


class LiveState:
    """Observes a :class:`PhaseEngine` and keeps what the dashboard and the plain output need."""

    def __init__(self, engine: PhaseEngine, target: str, pid: int, describe: Callable[[int], str]):
        self.engine = engine
        self.target = target
        self.pid = pid
        self.describe = describe  # raw pc -> "module!symbol" (cached by the caller)
        self.status = "starting"
        self.started = time.monotonic()
        self.threads_followed = 0
        self.dropped = 0
        self.timelines: Dict[int, Deque[int]] = {}
        self.hits: Dict[int, Deque[bool]] = {}
        self.changes: Deque[ChangeRow] = deque(maxlen=CHANGES)
        self._rate: Deque[float] = deque(maxlen=64)  # arrival times of recent intervals
        engine.on("interval", self._on_interval)

    def _on_interval(self, r: IntervalResult, iv: Interval) -> None:
        timeline = self.timelines.setdefault(r.thread, deque(maxlen=TIMELINE))
        hits = self.hits.setdefault(r.thread, deque(maxlen=CONFIDENCE_WINDOW))
        if r.predicted is not None:
            hits.append(r.predicted)
        timeline.append(r.phase)
        self._rate.append(time.monotonic())
        if r.phase_changed or r.new_phase:
            when = time.strftime("%H:%M:%S", time.localtime(iv.end_ns / 1e9 if iv.end_ns else time.time()))
            self.changes.append(ChangeRow(when, r.seq, r.thread, r.previous_phase, r.phase))

    def rate(self) -> float:
        """Intervals per second over the recent arrivals."""
        if len(self._rate) < 2:
            return 0.0
        span = time.monotonic() - self._rate[0]
        return (len(self._rate) - 1) / span if span > 0 else 0.0

    def confidence(self, tid: int) -> Optional[float]:
        hits = self.hits.get(tid)
        return sum(hits) / len(hits) if hits else None

    def top_code(self, phase_stats) -> str:
        top = phase_stats.top_code(1)
        if not top:
            return ""
        t = top[0]
        name = short_name(self.describe(t["pc"])) if t["pc"] is not None else f"key {t['key']:#x}"
        return f"{name} ({100 * t['share']:.0f}%)"

    def snapshot(self, footprints: int = 200) -> Snapshot:
        """The dashboard's view of now."""
        e = self.engine
        stats = e.stats
        threads = [ThreadRow(tid, ts.phase, ts.run_length, ts.predictions.get(PRIMARY), self.confidence(tid),
                             ts.intervals, tuple(self.timelines.get(tid, ())))
                   for tid, ts in stats.threads.items()]
        recent = list(e.recent)[-footprints:]
        fps = np.array([r.footprint for r in recent]) if recent else None
        total = stats.instructions or 1
        phases = [PhaseRow(p.phase, p.instructions / total, p.runs, p.mean_run, self.top_code(p))
                  for p in stats.by_share()]
        board = e.scoreboard.to_dict()
        scores = [ScoreRow(LABELS.get(n, n), board[n]["overall"]["accuracy"], board[n]["changes"]["accuracy"],
                           board[n]["steady"]["accuracy"]) for n in PREDICTORS]
        return Snapshot(self.target, self.pid, self.status, self.threads_followed, stats.instructions,
                        stats.intervals, self.rate(), self.dropped, time.monotonic() - self.started,
                        threads, fps, tuple(r.phase for r in recent), phases, scores, list(self.changes))

    def status_line(self) -> str:
        """The periodic plain-output line."""
        s = self.engine.stats
        board = self.engine.scoreboard.to_dict()[PRIMARY]["overall"]["accuracy"]
        acc = "-" if board is None else f"{100 * board:.0f}%"
        return (f"[{time.monotonic() - self.started:6.1f}s] {self.status}: {s.intervals} intervals, "
                f"{s.instructions:,} instructions, {len(s.phases)} phases, {self.threads_followed} threads, "
                f"RLE Markov accuracy {acc}, dropped {self.dropped}")

    def change_line(self, r: IntervalResult) -> str:
        """The plain-output line for a phase change or a new phase."""
        before = "start" if r.previous_phase is None else f"P{r.previous_phase}"
        new = " (new)" if r.new_phase else ""
        dist = "" if r.distance is None else f" distance {r.distance:.3f}"
        return (f"#{r.seq} thread {r.thread}: {before} -> P{r.phase}{new}{dist}, "
                f"predicted next P{r.prediction}")
