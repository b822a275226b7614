"""Next-phase predictors (ISCA 2003, section 5) and their online scoring.

Each predictor sees one thread's phase stream: ``observe(phase)`` for every interval, then
``predict()`` gives that thread's next phase. Each thread gets one of every predictor of
:data:`phasescope.engine.predictors.STREAM_PREDICTORS`, and those that keep contexts of their
own (``hybrid``, ``gated``, ``measured``, ``order_length``, ``cycle``, ``context``).

- ``rle_markov`` (the paper's), ``last_phase``, ``markov1`` / ``markov2``: see
  :mod:`phasescope.engine.markov`.
- ``rle_markov_q``, ``duration``, ``gpht``, ``hybrid``, ``gated``: see
  :mod:`phasescope.engine.predictors`; ``gated`` is RLE Markov whose change predictions are shown
  only once confirmed at their (phase, run length) context.
- ``measured``: the hybrid's (or the duration predictor's) change, shown only where it has been
  right more often than "no change" at the same (phase, run length, held) context
  (:class:`phasescope.engine.predictors.Measured`). On the page tracker's streams the threads of
  one process count those contexts together (``evidence``, :func:`process_evidence`), and a tie
  is shown only after ``SHARED_TIE`` of each.
- ``order_length``: the phase order and the run lengths learned apart, a change claimed where both
  speak and shown once claims of its kind have been right more often than not
  (:class:`phasescope.engine.predictors.OrderLength`).
- ``cycle``: on the page tracker's streams (sampled mode), the next phase of a
  recurring order, claimed within the lengths seen once such claims have held
  (:class:`phasescope.engine.predictors.Periodic`), else ``measured``'s while its changes over the
  thread have held (:class:`phasescope.engine.predictors.Referee`). In exact mode (on
  exact-mode logs the claims lost to last-phase on bc and gzip: docs/quality.md), the change of
  ``measured`` or ``hybrid`` once the changes that one proposed in the same phase have beaten "no
  change" there (:class:`phasescope.engine.predictors.ChangeGate`; the one that has earned more,
  ``measured`` on a tie), else "no change".
- ``context`` (the default): ``cycle``, and in exact mode a third gated proposer, the phase that
  came more than half the times after the same phase and run length after the same runs before,
  while its proposals hold (:class:`phasescope.engine.contexts.RunContexts`; docs/quality.md,
  stops 41-42); in exact mode its changes are shown only while they are ahead of "no change" in
  the phase (every change proposed there) and in the thread (the changes shown:
  :class:`phasescope.engine.ledger.ShownLedger`, at most 3 mispredictions more than last-phase per
  thread, and one more each time a stopped thread speaks again; stop 48).

Every predictor runs and is scored on every interval; one is shown (``PredictorConfig.shown``,
``--shown-prediction``; ``rle_markov`` is the paper's, bit for bit), with a confidence (0..1) and
the expected remaining run length of the current phase.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from phasescope.engine.config import PREDICTORS, PRIMARY, PredictorConfig  # noqa: F401
from phasescope.engine.predictors import (STREAM_PREDICTORS, ChangeGate, Confidence, Gated, Hybrid, LruTable,
                                          Measured, OrderLength, Periodic, Referee)
from phasescope.engine.contexts import RunContexts
from phasescope.engine.ledger import ShownLedger

HYBRID_MEMBERS = ("gpht", "rle_markov_q", "duration", "rle_markov", "last_phase")  # ties: the first
GATED_MEMBER = "rle_markov"  # whose change predictions ``gated`` passes on once confirmed
EVIDENCE_ENTRIES = 4 * 4096  # contexts a process's threads count together (one thread's: 4096)
SHARED_TIE = 3  # counted together, a tie is shown after 3 of each (one thread's: 2; tuned on go-*-A)


def process_evidence() -> LruTable:
    """The counts of ``measured``'s contexts that the threads of one process share on the page
    tracker's streams (:class:`ThreadPredictors` ``evidence``). A thread that runs a share of a
    server's work (Go moves its handler between 4-5 threads) sees each context a few times, and a
    context opened by one lucky change lost to last-phase by up to 5 points; counted together,
    the threads that run the same phases learn from each other (docs/quality.md, stop 45)."""
    return LruTable(EVIDENCE_ENTRIES)


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
    fixed order soon stops showing it. ``cycle`` claims the next phase of a recurring order on these
    streams only. Sampled windows cut an activity of fixed CPU time into runs that
    vary by a window, which the confidence of an exact-length context never trusts
    (bench/truth/run.py: changes foretold on the fixed cycles 0-30% -> 74-82%).

    ``evidence``: the table of ``measured``'s counts, shared by the threads of a process
    (:func:`process_evidence`; None: the thread's own); the page tracker's streams show no change
    where a change and "no change" have come equally often, until each has come ``SHARED_TIE`` times.
    """

    def __init__(self, config: PredictorConfig, leaving: bool = False, evidence: Optional[LruTable] = None):
        self.leaving = leaving  # the page tracker's: show the next phase when a change is due or held
        self.shown = config.shown
        self.predictors = {name: make(config) for name, make in STREAM_PREDICTORS.items()}
        self.confidences = Confidence()
        self.hybrid = Hybrid(self.confidences, HYBRID_MEMBERS)
        self.gated = Gated(self.confidences)
        self.measured = Measured(table=evidence, tie=SHARED_TIE if leaving else Measured.TIE)
        self.order_length = OrderLength(config.rle_entries)
        self.periodic = Periodic()
        self.referee = Referee()  # the page tracker's streams: ``measured``'s changes in ``cycle``
        self.run_contexts = RunContexts()  # exact mode's ``context``: a third proposer
        self.gates = {"context": ChangeGate(), "measured": ChangeGate(), "hybrid": ChangeGate()}  # earned changes
        self.ledger = ShownLedger()  # exact mode's ``context``: its shown changes against "no change"
        self._contexts: Dict[str, tuple] = {}
        #: (name, its context now) of each stream predictor: :func:`context_of` without its look-ups
        self._context_of = [(n, p.context if hasattr(p, "context") else (lambda p=p: getattr(p, "last", None)))
                            for n, p in self.predictors.items()]
        self._leaving: Optional[tuple] = None  # (phase, the phase expected after it) of the current run
        self.prediction: Optional[int] = None
        self.confidence: Optional[float] = None
        self.expected_remaining: Optional[int] = None

    def observe(self, phase: int, held: bool = False, folded: Optional[Dict[int, int]] = None) -> Dict[str, int]:
        """Feed one phase; returns each predictor's prediction of the next one. ``held``: the
        tracker held this interval (:class:`~phasescope.engine.phase_table.Match`); ``folded``:
        phase folded away -> the phase it is now, which the engine shows for it (the ledger scores
        that change)."""
        for ctx in self._contexts.values():
            self.confidences.update(ctx, ctx[2] == phase)
        if self._leaving is not None and phase != self._leaving[0]:  # the run ended: was it the succession?
            for ctx in (("leaving",), ("leaving", self._leaving[0])):  # the thread's successions, the phase's
                self.confidences.update(ctx, self._leaving[1] == phase)
        out = {}
        for name, p in self.predictors.items():
            p.observe(phase)
            out[name] = p.predict()
        self._contexts = {n: (n, context(), out[n]) for n, context in self._context_of}  # as context_of
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
        claim = self.periodic.observe(phase, held) if self.leaving else None  # runs of sampled windows
        refereed = self.referee.observe(phase, out["measured"]) if self.leaving else False
        if claim is not None:
            out["cycle"], cycle_confidence = claim, self.periodic.accuracy
        elif self.leaving:
            out["cycle"], cycle_confidence = (out["measured"], measured_confidence) if refereed else \
                (phase, self.measured.stay_accuracy)
        else:  # exact mode: the change whose proposer has earned most in this phase, if any has
            proposals = {"context": self.run_contexts.observe(phase), "measured": (out["measured"], measured_confidence),
                         "hybrid": (out["hybrid"], hybrid_confidence)}
            earned = {name: self.gates[name].observe(phase, to) for name, (to, _) in proposals.items()}
            out["cycle"], cycle_confidence = self._earned(phase, proposals, earned, ("measured", "hybrid"))
            out["context"], context_confidence = self._earned(phase, proposals, earned, tuple(proposals))
            if folded:  # the tables may propose a folded phase: scored as the engine shows it
                out["context"] = folded.get(out["context"], out["context"])
            if not self.ledger.observe(phase, out["context"]):  # no change, or one its record has not earned
                out["context"], context_confidence = phase, self.measured.stay_accuracy
        if self.leaving:
            out["context"], context_confidence = out["cycle"], cycle_confidence
        self.prediction = out[self.shown]
        own = {"hybrid": hybrid_confidence, "gated": gated_confidence, "measured": measured_confidence,
               "order_length": order_length_confidence, "cycle": cycle_confidence, "context": context_confidence}
        self.confidence = own[self.shown] if self.shown in own else \
            self.confidences.confidence(self._contexts[self.shown])
        remaining = self.predictors["duration"].expected_remaining()
        self.expected_remaining = 0 if self.prediction != phase else None if remaining is None else max(1, remaining)
        return out

    def _earned(self, phase: int, proposals: dict, earned: dict, names: tuple) -> Tuple[int, float]:
        """Exact mode: the change of whichever of ``names`` has earned most in ``phase`` (ties: the
        first), once it has earned it (:class:`ChangeGate`), else no change with ``measured``'s
        accuracy of "no change" at this context."""
        best, shown = ChangeGate.SHOW - 1, (phase, self.measured.stay_accuracy)
        for name in names:
            if proposals[name][0] != phase and earned[name] > best:
                best, shown = earned[name], proposals[name]
        return shown


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
