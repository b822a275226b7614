"""Next-phase predictors (ISCA 2003, section 5) and their online scoring.

Each predictor sees one thread's phase stream: ``observe(phase)`` for every interval, then
``predict()`` gives that thread's next phase. Markov tables are direct-mapped, indexed by the low
bits and tagged by the high 24 bits of a 64-bit hash of their history; a tag miss predicts the
last phase.

- ``rle_markov`` (the paper's): history = (last phase, times it was seen in a row). Inserted on a
  phase change (the entry of the run that just ended gets the new phase); on a tag hit inside a
  run the entry is overwritten with the phase seen (the run went on longer than it said).
- ``last_phase``: the phase just seen.
- ``markov1`` / ``markov2``: history = the last 1 or 2 interval phases; updated every interval.
- ``rle_markov_q``, ``duration``, ``gpht``, ``hybrid``, ``gated``: see
  :mod:`phasescope.engine.predictors`; ``gated`` is RLE Markov whose change predictions are shown
  only once confirmed at their (phase, run length) context.
- ``measured``: the hybrid's (or the duration predictor's) change, shown only where it has been
  right more often than "no change" at the same (phase, run length, held) context
  (:class:`phasescope.engine.predictors.Measured`).
- ``order_length``: the phase order and the run lengths learned apart, a change claimed where both
  speak and shown once claims of its kind have been right more often than not
  (:class:`phasescope.engine.predictors.OrderLength`).

Every predictor runs and is scored on every interval; one is shown (``PredictorConfig.shown``,
``--shown-prediction``; ``rle_markov`` is the paper's, bit for bit), with a confidence (0..1) and
the expected remaining run length of the current phase.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from phasescope.engine.hashing import M64, mix64_int
from phasescope.engine.config import PREDICTORS, PRIMARY, PredictorConfig  # noqa: F401
from phasescope.engine.predictors import (Confidence, DurationPredictor, Gated, Gpht, Hybrid, Measured, OrderLength,
                                          RleMarkovQ, context_of)

HYBRID_MEMBERS = ("gpht", "rle_markov_q", "duration", "rle_markov", "last_phase")  # ties: the first
GATED_MEMBER = "rle_markov"  # whose change predictions ``gated`` passes on once confirmed


def _pack(history: Tuple[int, ...]) -> int:
    """One 64-bit word of a history of one or two small integers."""
    word = 0
    for x in history:
        word = ((word << 32) | (x & 0xFFFFFFFF)) & M64
    return word


class HashedTable:
    """Direct-mapped, tagged table history -> next phase (``entries`` slots).

    A history is hashed once to a slot ``(index, tag)``; callers keep the slot of their current
    history, so each interval costs one hash per predictor.
    """

    def __init__(self, entries: int):
        self.entries = entries
        self._tags = [-1] * entries
        self._values = [0] * entries

    def slot(self, history: Tuple[int, ...]) -> Tuple[int, int]:
        h = mix64_int(_pack(history))
        return h % self.entries, h >> 40

    def get(self, slot: Tuple[int, int]) -> Optional[int]:
        """Stored next phase on a tag hit, else None."""
        i, tag = slot
        return self._values[i] if self._tags[i] == tag else None

    def put(self, slot: Tuple[int, int], phase: int) -> None:
        i, tag = slot
        self._tags[i] = tag
        self._values[i] = phase


class LastPhase:
    """Predicts that the next phase is the one just seen."""

    def __init__(self):
        self.last: Optional[int] = None

    def observe(self, phase: int) -> None:
        self.last = phase

    def predict(self) -> int:
        return self.last


class RleMarkov:
    """The paper's run-length-encoded Markov predictor."""

    def __init__(self, entries: int = 256):
        self.table = HashedTable(entries)
        self.last: Optional[int] = None
        self.run = 0
        self._slot: Optional[Tuple[int, int]] = None  # slot of (last, run)

    def observe(self, phase: int) -> None:
        if self._slot is not None and (phase != self.last or self.table.get(self._slot) is not None):
            self.table.put(self._slot, phase)
        if phase == self.last:
            self.run += 1
        else:
            self.last, self.run = phase, 1
        self._slot = self.table.slot((self.last, self.run))

    def predict(self) -> int:
        hit = self.table.get(self._slot)
        return self.last if hit is None else hit

    def context(self) -> Tuple[int, int]:
        return (self.last, self.run)


class Markov:
    """Markov predictor over the last ``order`` (1 or 2) interval phases; updated every interval."""

    def __init__(self, order: int, entries: int = 256):
        self.order = order
        self.table = HashedTable(entries)
        self.history: Tuple[int, ...] = ()
        self._slot: Optional[Tuple[int, int]] = None  # slot of a full history

    def observe(self, phase: int) -> None:
        if self._slot is not None:
            self.table.put(self._slot, phase)
        self.history = (self.history + (phase,))[-self.order:]
        if len(self.history) == self.order:
            self._slot = self.table.slot(self.history)

    def predict(self) -> int:
        hit = None if self._slot is None else self.table.get(self._slot)
        return self.history[-1] if hit is None else hit


class ThreadPredictors:
    """All predictors of one thread, fed the same stream, and the prediction shown.

    After each ``observe``: ``prediction`` (the ``config.shown`` predictor's), ``confidence`` (0..1,
    the saturating counter of that prediction's context, :class:`phasescope.engine.predictors.Confidence`)
    and ``expected_remaining`` (further intervals expected in the current phase: 0 when a change
    is predicted, the duration predictor's estimate otherwise, None when unknown).

    ``leaving`` (the page tracker's streams): the hybrid shows the phase that followed the current
    one before (the duration predictor's) once the run is within a window of the shortest of its
    recent lengths, or after an interval the tracker held, as long as successions have held: two
    confidence counters, the thread's and the phase's, are scored once per run, when the run ends
    (right if it ends in the phase expected), so a program whose phases follow each other in no
    fixed order soon stops showing it. Sampled windows cut an activity of fixed CPU time into runs that
    vary by a window, which the confidence of an exact-length context never trusts
    (bench/truth/run.py: changes foretold on the fixed cycles 0-30% -> 74-82%).
    """

    def __init__(self, config: PredictorConfig, leaving: bool = False):
        self.leaving = leaving  # the page tracker's: show the next phase when a change is due or held
        self.shown = config.shown
        self.predictors = {
            "rle_markov": RleMarkov(config.rle_entries),
            "last_phase": LastPhase(),
            "markov1": Markov(1, config.markov_entries),
            "markov2": Markov(2, config.markov_entries),
            "rle_markov_q": RleMarkovQ(config.rle_entries),
            "duration": DurationPredictor(config.rle_entries),
            "gpht": Gpht(config.gpht_depth, config.gpht_entries),
        }
        self.confidences = Confidence()
        self.hybrid = Hybrid(self.confidences, HYBRID_MEMBERS)
        self.gated = Gated(self.confidences)
        self.measured = Measured()
        self.order_length = OrderLength(config.rle_entries)
        self._contexts: Dict[str, tuple] = {}
        self._leaving: Optional[tuple] = None  # (phase, the phase expected after it) of the current run
        self.prediction: Optional[int] = None
        self.confidence: Optional[float] = None
        self.expected_remaining: Optional[int] = None

    def observe(self, phase: int, held: bool = False) -> Dict[str, int]:
        """Feed one phase; returns each predictor's prediction of the next one. ``held``: the
        tracker held this interval (:class:`~phasescope.engine.tracker.Match`)."""
        for ctx in self._contexts.values():
            self.confidences.update(ctx, ctx[2] == phase)
        if self._leaving is not None and phase != self._leaving[0]:  # the run ended: was it the succession?
            for ctx in (("leaving",), ("leaving", self._leaving[0])):  # the thread's successions, the phase's
                self.confidences.update(ctx, self._leaving[1] == phase)
        out = {}
        for name, p in self.predictors.items():
            p.observe(phase)
            out[name] = p.predict()
        self._contexts = {n: context_of(n, p, out[n]) for n, p in self.predictors.items()}
        duration = self.predictors["duration"]
        after = duration.next_different() if self.leaving else None
        self._leaving = None if after is None else (phase, after)
        leaving_to = after if after is not None and (held or duration.due()) and \
            min(self.confidences.value(("leaving",)), self.confidences.value(("leaving", phase))) >= Confidence.START \
            else None
        chosen, out["hybrid"], hybrid_confidence = self.hybrid.choose(out, self._contexts, leaving_to)
        out["gated"], gated_confidence = self.gated.choose(phase, out[GATED_MEMBER], self._contexts[GATED_MEMBER])
        candidate = out["hybrid"] if out["hybrid"] != phase else duration.next_different()
        out["measured"], measured_confidence = self.measured.observe(phase, duration.run, held, candidate)
        out["order_length"], order_length_confidence = self.order_length.observe(phase, held)
        self.prediction = out[self.shown]
        own = {"hybrid": hybrid_confidence, "gated": gated_confidence, "measured": measured_confidence,
               "order_length": order_length_confidence}
        self.confidence = own[self.shown] if self.shown in own else \
            self.confidences.confidence(self._contexts[self.shown])
        remaining = self.predictors["duration"].expected_remaining()
        self.expected_remaining = 0 if self.prediction != phase else None if remaining is None else max(1, remaining)
        return out


class Score:
    __slots__ = ("n", "correct")

    def __init__(self):
        self.n = 0
        self.correct = 0

    @property
    def accuracy(self) -> Optional[float]:
        return self.correct / self.n if self.n else None

    def to_dict(self) -> dict:
        return {"n": self.n, "correct": self.correct, "accuracy": self.accuracy}


class Scoreboard:
    """Online accuracy of every predictor: overall, at phase changes, in steady state.

    A prediction made after a thread's interval is scored when that thread's next interval is
    classified: a phase change if its phase differs from the previous one, steady otherwise.
    """

    def __init__(self, names=PREDICTORS, shown: str = PRIMARY):
        self.shown = shown
        self.scores = {n: {"overall": Score(), "changes": Score(), "steady": Score()} for n in names}
        self._pending: Dict[int, Tuple[int, Dict[str, int]]] = {}

    def score(self, thread: int, phase: int) -> Optional[bool]:
        """Score the predictions pending for ``thread`` against its new ``phase``; whether the
        primary one was right (None when nothing was pending: the thread's first interval)."""
        pending = self._pending.get(thread)
        if pending is None:
            return None
        previous, predictions = pending
        kind = "changes" if phase != previous else "steady"
        for name, predicted in predictions.items():
            s = self.scores[name]
            overall, part = s["overall"], s[kind]
            overall.n += 1
            part.n += 1
            if predicted == phase:
                overall.correct += 1
                part.correct += 1
        return predictions.get(self.shown) == phase

    def expect(self, thread: int, phase: int, predictions: Dict[str, int]) -> None:
        """Record the predictions made for ``thread`` after an interval in ``phase``."""
        self._pending[thread] = (phase, predictions)

    def to_dict(self) -> dict:
        return {n: {k: s.to_dict() for k, s in kinds.items()} for n, kinds in self.scores.items()}
