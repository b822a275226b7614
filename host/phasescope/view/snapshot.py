"""What the live monitor shows, as data: per-thread timelines, recent changes and prediction
confidence, collected from the engine's callbacks into a :class:`Snapshot` that the dashboard renders
and the plain output prints. Names of code come from a non-blocking lookup: no refresh waits on the
target."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, List, Optional, Sequence

import numpy as np

from phasescope.engine.phase_engine import IntervalResult, PhaseEngine
from phasescope.engine.interval import Interval
from phasescope.engine.predict import PREDICTORS

@dataclass
class ThreadRow:
    tid: int
    phase: Optional[int]
    run_length: int
    predicted: Optional[int]
    confidence: Optional[float]  # the engine's confidence in the shown prediction (its context's counter)
    intervals: int
    timeline: Sequence[int] = ()  # this thread's last phase IDs, oldest first
    macro: Optional[int] = None  # its macro phase (engine/macro.py; None: off)
    macro_timeline: Sequence[int] = ()  # its last macro phase IDs, oldest first


@dataclass
class PhaseRow:
    phase: int
    share: float
    occurrences: int
    mean_run: float
    top_code: str
    miss_rate: Optional[float] = None  # --locality: estimated LRU miss rate at Snapshot.locality_size


@dataclass
class ScoreRow:
    name: str
    overall: Optional[float]
    at_changes: Optional[float]
    steady: Optional[float]


@dataclass
class ChangeRow:
    when: str
    seq: int
    tid: int
    before: Optional[int]
    after: int


@dataclass
class Snapshot:
    """One frame of the dashboard, as data (:meth:`LiveState.snapshot`); built with named fields."""

    target: str
    pid: int
    status: str
    threads_followed: int
    weight: int  # instructions (exact mode) or sampled CPU ns
    unit: str  # "instructions" or "cpu_ns"
    mode: str  # "exact", or "sampled 1000 Hz" and the like
    intervals: int
    rate: float  # intervals per second, recent
    dropped: int
    elapsed: float
    threads: List[ThreadRow] = field(default_factory=list)
    footprints: Optional[np.ndarray] = None  # (k, buckets): the last k footprints, oldest first
    footprint_phases: Sequence[int] = ()  # phase of each footprint row
    phases: List[PhaseRow] = field(default_factory=list)
    scores: List[ScoreRow] = field(default_factory=list)
    changes: List[ChangeRow] = field(default_factory=list)
    locality_size: Optional[int] = None  # --locality: cache bytes of PhaseRow.miss_rate (None: no column)


TIMELINE = 512  # intervals kept per thread for the barcode
CHANGES = 64
STOPPED_EVERY = 0.5  # seconds between looks at whether the target is stopped (/proc)

LABELS = {"rle_markov": "RLE Markov", "last_phase": "last phase", "markov1": "Markov-1", "markov2": "Markov-2",
          "rle_markov_q": "RLE Markov (log2 runs)", "duration": "next + duration", "gpht": "GPHT",
          "hybrid": "hybrid", "gated": "RLE Markov (confirmed)", "measured": "measured",
          "order_length": "order + length", "cycle": "cycle", "context": "context"}


def short_name(name: str) -> str:
    """``libpython3.11.so.1.0!f`` -> ``libpython3.11!f``: the library version suffix is noise on screen."""
    module, sep, rest = name.partition("!")
    if not sep:
        module, sep, rest = name.partition("+")
    return module.split(".so")[0] + sep + rest


def transition(r: IntervalResult) -> str:
    """``P0 -> P1``, ``start -> P0 (new)``: a thread's move as the plain output says it."""
    before = "start" if r.previous_phase is None else f"P{r.previous_phase}"
    return f"{before} -> P{r.phase}" + (" (new)" if r.new_phase else "")


class LiveState:
    """Observes a :class:`PhaseEngine` and keeps what the dashboard and the plain output need."""

    def __init__(self, engine: PhaseEngine, target: str, pid: int, describe: Callable[[int], str],
                 mode: str = "exact", locality_size: Optional[int] = None, stopped: Callable[[], bool] = lambda: False):
        """``stopped()``: whether the target sits in a job-control stop (SIGSTOP, Ctrl-Z) now."""
        self.engine = engine
        self._stopped = stopped
        self._looked = (-STOPPED_EVERY, False)  # (time.monotonic(), stopped()) of the last look
        self.locality_size = locality_size
        self.mode = mode
        self.target = target
        self.pid = pid
        self.describe = describe  # raw pc -> "module!symbol" (cached by the caller)
        self.status = "starting"
        self.started = time.monotonic()
        self.threads_followed = 0
        self.dropped = 0
        self.timelines: Dict[int, Deque[int]] = {}
        self.macro_timelines: Dict[int, Deque[int]] = {}
        self.confidences: Dict[int, Optional[float]] = {}
        self.changes: Deque[ChangeRow] = deque(maxlen=CHANGES)
        self._rate: Deque[float] = deque(maxlen=64)  # arrival times of recent intervals
        engine.subscribe(self._on_interval)

    def _on_interval(self, r: IntervalResult, iv: Interval) -> None:
        timeline = self.timelines.setdefault(r.thread, deque(maxlen=TIMELINE))
        self.confidences[r.thread] = r.confidence
        timeline.append(r.phase)
        if r.macro is not None:
            self.macro_timelines.setdefault(r.thread, deque(maxlen=TIMELINE)).append(r.macro)
        self._rate.append(time.monotonic())
        if r.phase_changed or r.new_phase:
            when = time.strftime("%H:%M:%S", time.localtime(iv.end_ns / 1e9 if iv.end_ns else time.time()))
            self.changes.append(ChangeRow(when, r.seq, r.thread, r.previous_phase, r.phase))

    @property
    def shown_status(self) -> str:
        """:attr:`status` as shown: while tracing, a target the user stopped is said to be stopped (it
        said "tracing" with nothing coming in until it was continued; stop 47)."""
        if self.status != "tracing":
            return self.status
        now = time.monotonic()
        if now - self._looked[0] >= STOPPED_EVERY:
            self._looked = (now, self._stopped())
        return f"target stopped (kill -CONT {self.pid} continues it)" if self._looked[1] else self.status

    @property
    def unit(self) -> str:
        """What the weights count: the engine's, or before any interval the mode's (sampled mode said
        "0 instructions" until its first window)."""
        s = self.engine.stats
        return s.unit if s.intervals else ("instructions" if self.mode == "exact" else "cpu_ns")

    def version(self) -> tuple:
        """Changes whenever anything the dashboard shows does, but for its clock and rate."""
        return self.engine.stats.intervals, self.shown_status, self.threads_followed, self.dropped

    def rate(self) -> float:
        """Intervals per second over the recent arrivals."""
        if len(self._rate) < 2:
            return 0.0
        span = time.monotonic() - self._rate[0]
        return (len(self._rate) - 1) / span if span > 0 else 0.0

    def confidence(self, tid: int) -> Optional[float]:
        """The engine's confidence in the thread's shown prediction."""
        return self.confidences.get(tid)

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
        shown = e.config.predictors.shown
        macros = self.macro_timelines
        threads = [ThreadRow(tid, ts.phase, ts.run_length, ts.predictions.get(shown), self.confidence(tid),
                             ts.intervals, tuple(self.timelines.get(tid, ())),
                             macros[tid][-1] if macros.get(tid) else None, tuple(macros.get(tid, ())))
                   for tid, ts in stats.threads.items()]
        recent = list(e.recent)[-footprints:]
        fps = np.array([r.footprint for r in recent]) if recent else None
        total = stats.weight or 1
        size = self.locality_size
        phases = [PhaseRow(p.phase, p.weight / total, p.runs, p.mean_run, self.top_code(p),
                           None if size is None else stats.miss_rate(p.phase, size))
                  for p in stats.by_share()]
        board = e.scoreboard.to_dict()
        shown_first = sorted(PREDICTORS, key=lambda n: (n != shown, n != "last_phase"))  # the shown, the floor
        scores = [ScoreRow(LABELS.get(n, n) + (" *" if n == shown else ""), board[n]["overall"]["accuracy"],
                           board[n]["changes"]["accuracy"], board[n]["steady"]["accuracy"]) for n in shown_first]
        return Snapshot(target=self.target, pid=self.pid, status=self.shown_status,
                        threads_followed=self.threads_followed, weight=stats.weight, unit=self.unit,
                        mode=self.mode, intervals=stats.intervals, rate=self.rate(), dropped=self.dropped,
                        elapsed=time.monotonic() - self.started, threads=threads, footprints=fps,
                        footprint_phases=tuple(r.phase for r in recent), phases=phases, scores=scores,
                        changes=list(self.changes), locality_size=self.locality_size)

    def status_line(self) -> str:
        """The periodic plain-output line."""
        s = self.engine.stats
        board = self.engine.scoreboard.scores[self.engine.config.predictors.shown]["overall"].accuracy
        acc = "-" if board is None else f"{100 * board:.0f}%"
        work = f"{s.weight:,} instructions" if self.unit == "instructions" else f"{s.weight / 1e9:.2f} s CPU sampled"
        return (f"[{time.monotonic() - self.started:6.1f}s] {self.shown_status}: {s.intervals} intervals, "
                f"{work}, {len(s.phases)} phases, {self.threads_followed} threads, "
                f"prediction accuracy {acc}, dropped {self.dropped}")

    def subscribe(self, fn) -> None:
        """Call ``fn(result, interval)`` for every interval the engine classifies."""
        self.engine.subscribe(fn)

    def change_line(self, r: IntervalResult, iv: Optional[Interval] = None) -> str:
        """The plain-output line for a phase change or a new phase."""
        dist = "" if r.distance is None else f" distance {r.distance:.3f}"
        return f"#{r.seq} thread {r.thread}: {transition(r)}{dist}, predicted next P{r.prediction}"
