"""The one wiring of a run: intervals -> segmenter -> phase engine -> sinks (and whoever else
subscribes: the view, the burst planner). The live monitor (:mod:`phasescope.pipeline.live`),
replay and bench build one; ``-a`` (:mod:`phasescope.pipeline.system`) has one engine per
process and shares only the sinks' part (:meth:`Flow.start`, :meth:`Flow.checkpoint`,
:meth:`Flow.end`, :meth:`Flow.close`).

The sinks' lifecycle is: ``prepare(engine)`` when the flow is made, ``on_start`` once,
``on_interval`` per classified interval, ``on_checkpoint`` now and then, ``on_end`` once with the
final summary, ``close`` on every exit path.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, List, Optional

from phasescope.engine import EngineConfig, Interval, PhaseEngine
from phasescope.engine.bursts import BurstPlanner
from phasescope.engine.segments import Segmenter
from phasescope.sinks.base import Sink, Sinks


class Flow:
    """Segmenter -> engine -> sinks. ``burst``: a source's ``burst(tid)``, for sampled mode's exact
    bursts (new phases get one exact interval each); ``engine``: False for a run whose engines
    are elsewhere (``-a``), the flow then carries the sinks only."""

    def __init__(self, config: EngineConfig, sinks: Iterable[Sink] = (), *,
                 burst: Optional[Callable[[int], bool]] = None, engine: bool = True):
        self.config = config
        self.sinks = Sinks(sinks)
        self.engine = PhaseEngine(config) if engine else None
        self.segmenter = Segmenter(config.segments)  # fixed: intervals pass through
        self.bursts = BurstPlanner(burst) if burst is not None else None
        if self.engine is not None:
            self.sinks.prepare(self.engine)
            self.engine.subscribe(self.sinks.on_interval)
            if self.bursts is not None:
                self.engine.subscribe(self.bursts.on_interval)

    def subscribe(self, fn: Callable) -> None:
        """Call ``fn(result, interval)`` for every interval classified from now on."""
        self.engine.subscribe(fn)

    def start(self, info: dict) -> None:
        self.sinks.on_start(info)

    def feed(self, interval: Interval) -> None:
        """One interval as it comes: the units it completes are classified now."""
        for unit in self.segmenter.push(interval):
            self.engine.feed(unit)

    def feed_together(self, intervals: List[Interval]) -> None:
        """Intervals that came together (a wake-up's windows): the units they complete classified in
        one batch, with the results (and the subscribers' calls, in order) of :meth:`feed` on each."""
        self.engine.feed_many([unit for iv in intervals for unit in self.segmenter.push(iv)])

    def units(self, intervals: Iterable[Interval]) -> Iterator[Interval]:
        """A recorded stream re-cut into units (for :meth:`feed_many`), the last pending ones included."""
        for iv in intervals:
            yield from self.segmenter.push(iv)
        yield from self.segmenter.flush()

    def feed_many(self, units: List[Interval]) -> None:
        """Units (from :meth:`units`) classified in one batch."""
        self.engine.feed_many(units)

    def burst(self, interval: Interval) -> Optional[int]:
        """A burst that came back: the phase it was asked for (its statistics now carry it), or
        None when no burst was asked for that thread or that phase is gone (relabelled away)."""
        phase = self.bursts.finished(interval) if self.bursts is not None else None
        if phase is None or not self.engine.add_burst(phase, interval):
            return None
        return phase

    def flush(self) -> None:
        """The end of the stream: threads whose last unit never came are classified."""
        for unit in self.segmenter.flush():
            self.engine.feed(unit)

    def checkpoint(self, summary: Callable[[], dict]) -> None:
        """The summary so far to the sinks that read checkpoints; ``summary()`` is built only if one does."""
        if self.sinks.read_checkpoints:
            self.sinks.on_checkpoint(summary())

    def end(self, summary: dict) -> None:
        """The final ``summary``, completed with the sinks' own sections, to every sink."""
        summary.update(self.sinks.summary_sections())
        self.sinks.on_end(summary)

    def close(self) -> None:
        self.sinks.close()
