"""The phase engine: tracker + per-thread predictors + statistics, fed one :class:`Interval` at a time.

The phase table is shared by all threads of a process (the same code is the same phase ID);
each thread has its own predictors, fed its own phase stream (in sampled mode they count the
evidence for ``measured``'s changes together: :func:`phasescope.engine.predict.process_evidence`).
``feed`` (live) is ``feed_many`` (replay) on one interval, so both give identical results. ``feed_many`` hashes the whole batch
at once; only the table match, the predictors and the statistics run per interval, and its
callbacks run after the batch is classified.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np

from phasescope.engine.bursts import burst_summary
from phasescope.engine.interval import Interval
from phasescope.engine.config import EngineConfig, TrackerConfig  # noqa: F401
from phasescope.engine.macro import MacroTracker
from phasescope.engine.predict import PREDICTORS, Scoreboard, ThreadPredictors, process_evidence
from phasescope.engine.stats import Stats
from phasescope.engine.page_tracker import PageTracker
from phasescope.engine.phase_table import Match

BATCH = 1024
NO_MACRO = Match(None, None, False)  # macro phases off
SUMMARY_VERSION = 1


@dataclass
class IntervalResult:
    """What the engine concluded about one interval.

    ``distance``: to the nearest representative before classification, as a fraction of the
    interval (None when the table was empty). ``predictions``: each predictor's prediction of this
    thread's next phase. ``previous_phase``: the thread's phase in its previous interval.
    ``predicted``: whether the primary prediction made after that interval named this phase (None
    for a thread's first interval). ``prediction``: the prediction shown (the primary predictor's),
    ``confidence`` its confidence (0..1), ``expected_remaining`` the further intervals expected in
    this phase (0: a change is predicted next; None: unknown). ``merged``: (gone, kept) when making
    room for this interval's new phase folded phase ``gone`` into ``kept`` (the ``merge`` policy).
    ``macro``: the macro phase of the thread's window ending here (None: macro phases off);
    ``macro_relabel``: the macro phase the thread's earlier intervals ``macro_relabel_seqs`` belong
    to after all (the change began before the change point saw it, engine/macro.py), else None.
    ``relabel``: the phase the intervals ``relabel_seqs`` (their ``seq``) belong to after all: the
    thread's previous interval, which the page tracker held and this one confirmed where it went,
    or the intervals of a candidate that this one confirmed as a new phase (``transition``);
    None when their labels stand (the live statistics keep the labels given at the time).
    """

    seq: int
    thread: int
    thread_seq: int
    instructions: int
    phase: int
    distance: Optional[float]
    new_phase: bool
    evicted: Optional[int]
    previous_phase: Optional[int]
    predictions: Dict[str, int]
    footprint: np.ndarray
    predicted: Optional[bool]
    prediction: Optional[int] = None
    confidence: Optional[float] = None
    expected_remaining: Optional[int] = None
    merged: Optional[Tuple[int, int]] = None
    macro: Optional[int] = None
    relabel: Optional[int] = None
    relabel_seqs: Optional[Tuple[int, ...]] = None
    macro_relabel: Optional[int] = None
    macro_relabel_seqs: Optional[Tuple[int, ...]] = None

    @property
    def phase_changed(self) -> bool:
        return self.previous_phase is not None and self.previous_phase != self.phase


def make_tracker(config: TrackerConfig):
    """The tracker ``config.method`` names: the paper's table, the page tracker or online k-means
    (each module loaded only when named: a sampled run starts its target sooner without them)."""
    if config.method == "pages":
        return PageTracker(config)
    if config.method == "kmeans":
        from phasescope.engine.kmeans_tracker import KMeansTracker
        return KMeansTracker(config)
    from phasescope.engine.tracker import Tracker
    return Tracker(config)


class PhaseEngine:
    """Classify intervals into phases, predict each thread's next phase, keep statistics.

    Subscribers (:meth:`subscribe`) are called as ``fn(result, interval)`` for every classified
    interval, in order.
    """

    def __init__(self, config: Optional[EngineConfig] = None, recent: int = 256):
        self.config = config or EngineConfig()
        self.tracker = make_tracker(self.config.tracker)
        self.macro = MacroTracker(self.config.macro) if self.config.macro.window else None
        self._pages, self._scale = self.config.tracker.method == "pages", self.config.tracker.scale  # macro groups: exact mode's
        self.stats = Stats()
        self.scoreboard = Scoreboard(PREDICTORS, self.config.predictors.shown)
        self.recent: deque = deque(maxlen=recent)  # latest IntervalResults (footprints for a heat map)
        self.skipped_empty = 0
        self._predictors: Dict[int, ThreadPredictors] = {}
        self._folded: Dict[int, int] = {}  # phase folded away -> the phase it is now (predictions name that)
        #: sampled mode: the threads count ``measured``'s contexts together (predict.process_evidence)
        self._evidence = process_evidence() if self.config.tracker.method == "pages" else None
        self._subscribers: List[Callable[[IntervalResult, Interval], None]] = []
        self._seq = 0

    def subscribe(self, fn: Callable[[IntervalResult, Interval], None]) -> None:
        """Call ``fn(result, interval)`` for every interval classified from now on."""
        self._subscribers.append(fn)

    @property
    def threads(self):
        """Per-thread state (thread id -> :class:`phasescope.engine.stats.ThreadState`)."""
        return self.stats.threads

    def phase_table(self) -> List[dict]:
        """The tracker's current representatives."""
        return self.tracker.table()

    def feed(self, interval: Interval) -> Optional[IntervalResult]:
        """Classify one interval; None if it holds no instructions (it is skipped)."""
        out = self.feed_many([interval])
        return out[0] if out else None

    def feed_many(self, intervals: Iterable[Interval]) -> List[IntervalResult]:
        """Classify intervals in arrival order (batched); intervals without instructions are skipped."""
        intervals = list(intervals)
        out: List[IntervalResult] = []
        for start in range(0, len(intervals), BATCH):
            out.extend(self._feed_batch(intervals[start:start + BATCH]))
        return out

    def _feed_batch(self, batch: List[Interval]) -> List[IntervalResult]:
        fps, totals = self.tracker.footprints([iv.keys for iv in batch], [iv.counts for iv in batch])
        keep = np.nonzero(totals > 0)[0]
        self.skipped_empty += len(batch) - len(keep)
        if len(keep) < len(batch):
            batch, fps = [batch[i] for i in keep], fps[keep]
        sampled = bool(batch) and batch[0].mode == "sampled"  # a stream is all one mode
        matches = self.tracker.classify_many(fps, totals[keep] if sampled else None,
                                             np.array([iv.thread for iv in batch]), np.array([iv.units for iv in batch]))
        results = []
        for iv, fp, m in zip(batch, fps, matches):
            predictors = self._predictors.get(iv.thread)
            if predictors is None:
                predictors = self._predictors[iv.thread] = ThreadPredictors(
                    self.config.predictors, leaving=self.config.tracker.method == "pages", evidence=self._evidence)
            predicted = self.scoreboard.score(iv.thread, m.phase)
            if m.merged is not None:
                self.stats.merged(*m.merged)
                self._folded = {g: m.merged[1] if k == m.merged[0] else k for g, k in self._folded.items()}
                self._folded[m.merged[0]] = m.merged[1]
            previous = self.stats.add(iv, m.phase, self._seq, pending=m.transition or m.held or m.revisable)
            if m.relabel is not None:
                self.stats.relabel(m.relabel, m.relabel_seqs)
            predictions = predictors.observe(m.phase, m.held, self._folded)
            if self._folded:  # the predictors' tables still hold a folded phase's ID
                predictions = {n: self._folded.get(p, p) for n, p in predictions.items()}
                predictors.prediction = self._folded.get(predictors.prediction, predictors.prediction)
            self.scoreboard.expect(iv.thread, m.phase, predictions)
            self.stats.threads[iv.thread].predictions = predictions
            mm = self.macro.observe(iv.thread, m.phase, m.relabel, m.relabel_seqs, None if self._pages else fp / self._scale) \
                if self.macro else NO_MACRO
            r = IntervalResult(self._seq, iv.thread, iv.seq, iv.instructions, m.phase, m.distance, m.new_phase,
                               m.evicted, previous, predictions, self.tracker.display(fp), predicted, predictors.prediction,
                               predictors.confidence, predictors.expected_remaining, m.merged,
                               mm.phase, m.relabel, m.relabel_seqs, mm.relabel, mm.relabel_seqs)
            self._seq += 1
            self.recent.append(r)
            results.append(r)
            for fn in self._subscribers:
                fn(r, iv)
        return results

    def add_burst(self, phase: int, interval: Interval) -> bool:
        """Attach an exact interval of ``phase`` (sampled mode's burst) to its statistics; it is
        never classified (exact and sampled vectors do not mix in one tracker). False: ``phase`` is
        gone (its only windows were relabelled to another phase while the burst ran)."""
        if phase not in self.stats.phases:
            return False
        self.stats.phases[phase].burst = burst_summary(interval)
        return True

    def summary(self) -> dict:
        """JSON-serialisable summary: config, whole run, phases, threads, predictor scores, table."""
        stats = self.stats.to_dict()
        for p in stats["phases"]:
            rep = self.tracker.representative(p["phase"])
            p["in_table"] = rep is not None
            p["known"] = p["phase"] in self.tracker.known
            p["representative"] = rep.tolist() if isinstance(rep, np.ndarray) else rep
        return {
            "version": SUMMARY_VERSION,
            "config": self.config.to_dict(),
            "whole": stats["whole"],
            "phases": stats["phases"],
            "threads": stats["threads"],
            "predictors": self.scoreboard.to_dict(),
            "primary_predictor": self.config.predictors.shown,
            "table": {"size": self.config.tracker.table_size, "used": len(self.tracker.table()),
                      "evictions": self.tracker.evictions, "merges": self.tracker.merges,
                      "next_id": self.tracker.next_id},
            "skipped_empty": self.skipped_empty,
        }
