"""Phase predictors beyond the paper's (issue 10), and the confidence of a prediction.

All follow the protocol of :mod:`phasescope.engine.predict`: ``observe(phase)`` once per interval of one
thread, then ``predict()`` names that thread's next phase. Tables are bounded and replace their
least-recently-used entry (:class:`LruTable`). A table miss predicts the last phase.

- :class:`RleMarkovQ` (``rle_markov_q``): RLE Markov whose run length is quantised into log2
  buckets (1, 2-3, 4-7, 8-15, ...). Entry ``(phase, bucket of the run length at its end)`` ->
  ``(next phase, that run length)``, inserted when the run ends. Inside a run of length r in
  bucket b, it predicts the stored next phase once r reaches the stored length, else the same
  phase; a run that goes on past the stored length moves it one further. One entry serves every
  run length of its bucket, so long runs need a handful of entries, not one per length.
- :class:`DurationPredictor` (``duration``): phase-duration prediction. Entry
  ``(previous phase, current phase)`` (falling back to ``(current phase,)``) -> the phase that
  followed and the median of the last three run lengths. It predicts a change to that phase once
  the run reaches the expected length; ``expected_remaining()`` is the expected number of further
  intervals in the current phase and ``next_different()`` the phase expected after it.
- :class:`Gpht` (``gpht``): the Global Phase History Table of Isci, Contreras & Martonosi
  (MICRO 2006): the last ``depth`` (8) interval phases index a fully associative, tagged table of
  ``entries`` (1024) with LRU replacement; each entry holds the phase that last followed that
  history.
- :class:`Confidence`: a 3-bit saturating counter per (predictor, context, predicted phase),
  +1 when such a prediction was right, -2 when wrong; confidence = counter / 7.
- :class:`Hybrid` (``hybrid``): each interval shows the prediction of whichever predictor has
  the highest confidence at its current context (ties: the order given), or the phase it is given
  as ``leaving_to`` (see :class:`phasescope.engine.predict.ThreadPredictors`).
- :class:`Gated` (``gated``): a member's prediction of a *change* is passed on only when its
  confidence counter at that context has risen above the start value (the same prediction in the
  same context has been right before, and not wrong since); otherwise the last phase. A program
  whose changes do not recur is then predicted as well as last-phase predicts it, and one whose
  changes do recur keeps the member's gains after one confirmation per context.
- :class:`ChangeGate` (exact mode's ``cycle``): a proposer's change is shown in a phase once the
  changes it proposed in that phase have beaten "no change" there (a counter per phase).
- :class:`Referee` (sampled mode's ``cycle``): ``measured``'s change is shown while the changes it
  proposed over the thread have come at least as often as the run outlived them.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, Hashable, Optional, Sequence, Tuple

from phasescope.engine.markov import LastPhase, Markov, RleMarkov
from phasescope.engine.periodic import Periodic  # noqa: F401  (one of this module's predictors)


class LruTable:
    """Fully associative table of ``entries`` with least-recently-used replacement."""

    def __init__(self, entries: int):
        self.entries = entries
        self._d: "OrderedDict[Hashable, object]" = OrderedDict()

    def get(self, key):
        v = self._d.get(key)
        if v is not None:
            self._d.move_to_end(key)
        return v

    def put(self, key, value) -> None:
        self._d[key] = value
        self._d.move_to_end(key)
        if len(self._d) > self.entries:
            self._d.popitem(last=False)

    def __len__(self) -> int:
        return len(self._d)


def log2_bucket(run: int) -> int:
    """1 -> 1, 2-3 -> 2, 4-7 -> 3, ..."""
    return int(run).bit_length()


class RleMarkovQ:
    def __init__(self, entries: int = 256):
        self.table = LruTable(entries)
        self.last: Optional[int] = None
        self.run = 0

    def observe(self, phase: int) -> None:
        if self.last is not None:
            if phase != self.last:
                self.table.put((self.last, log2_bucket(self.run)), [phase, self.run])
            else:
                e = self.table.get((self.last, log2_bucket(self.run)))
                if e is not None and self.run >= e[1]:
                    e[1] = self.run + 1  # the run went on past the stored length
        if phase == self.last:
            self.run += 1
        else:
            self.last, self.run = phase, 1

    def _entry(self):
        return self.table.get((self.last, log2_bucket(self.run)))

    def predict(self) -> int:
        e = self._entry()
        return e[0] if e is not None and self.run >= e[1] else self.last

    def context(self) -> Hashable:
        e = self._entry()
        return (self.last, log2_bucket(self.run), e is not None and self.run >= e[1])


class DurationPredictor:
    HISTORY = 3

    def __init__(self, entries: int = 256):
        self.table = LruTable(entries)
        self.last: Optional[int] = None
        self.before: Optional[int] = None  # the phase before the current run
        self.run = 0

    def observe(self, phase: int) -> None:
        if self.last is not None and phase != self.last:
            for key in ((self.before, self.last), (self.last,)):
                e = self.table.get(key)
                runs = ([] if e is None else e[1])[-(self.HISTORY - 1):] + [self.run]
                self.table.put(key, (phase, runs))
            self.before = self.last
        if phase == self.last:
            self.run += 1
        else:
            self.last, self.run = phase, 1

    def _entry(self):
        e = self.table.get((self.before, self.last))
        return e if e is not None else self.table.get((self.last,))

    @staticmethod
    def _expected(e) -> int:
        runs = sorted(e[1])
        return runs[len(runs) // 2]

    def expected_remaining(self) -> Optional[int]:
        """Expected further intervals in the current phase (0: a change is expected next); None
        when this phase has never ended before."""
        e = self._entry()
        return None if e is None else max(0, self._expected(e) - self.run)

    def next_different(self) -> Optional[int]:
        e = self._entry()
        return None if e is None else e[0]

    def due(self) -> bool:
        """The run is within one interval of the shortest of its context's last run lengths: a change
        may come next (runs of sampled windows vary by one)."""
        e = self._entry()
        return e is not None and self.run >= min(e[1]) - 1

    def predict(self) -> int:
        e = self._entry()
        return e[0] if e is not None and self.run >= self._expected(e) else self.last

    def context(self) -> Hashable:
        e = self._entry()
        if e is None:
            return (self.last, None)
        return (self.before, self.last, min(self._expected(e) - self.run, 2))


class Gpht:
    def __init__(self, depth: int = 8, entries: int = 1024):
        self.depth = depth
        self.table = LruTable(entries)
        self.history: Tuple[int, ...] = ()

    def observe(self, phase: int) -> None:
        if len(self.history) == self.depth:
            self.table.put(self.history, phase)
        self.history = (self.history + (phase,))[-self.depth:]

    def predict(self) -> int:
        hit = self.table.get(self.history) if len(self.history) == self.depth else None
        return self.history[-1] if hit is None else hit

    def context(self) -> Hashable:
        return self.history


class Confidence:
    """Saturating counters (0..7) per context, in an LRU table; unknown contexts start at 3."""

    MAX = 7
    START = 3

    def __init__(self, entries: int = 4096):
        self.table = LruTable(entries)

    def value(self, context: Hashable) -> int:
        d = self.table._d  # LruTable.get, written out: a dozen calls a window
        v = d.get(context)
        if v is None:
            return self.START
        d.move_to_end(context)
        return v

    def confidence(self, context: Hashable) -> float:
        return self.value(context) / self.MAX

    def update(self, context: Hashable, right: bool) -> None:
        d = self.table._d  # value() then LruTable.put, written out: one look-up, the same order
        v = d.get(context)
        if v is None:
            d[context] = min(self.MAX, self.START + 1) if right else max(0, self.START - 2)
            if len(d) > self.table.entries:
                d.popitem(last=False)
        else:
            d.move_to_end(context)
            d[context] = min(self.MAX, v + 1) if right else max(0, v - 2)


def context_of(name: str, predictor, prediction: int) -> Hashable:
    """Confidence context of a predictor's current prediction."""
    ctx = predictor.context() if hasattr(predictor, "context") else getattr(predictor, "last", None)
    return (name, ctx, prediction)


class Hybrid:
    """Shows the prediction of the most confident of ``members`` (see the module docstring)."""

    def __init__(self, confidence: Confidence, order: Sequence[str]):
        self.conf, self.order = confidence, list(order)
        self.choice: Optional[str] = None

    def choose(self, predictions: Dict[str, int], contexts: Dict[str, Hashable],
               leaving_to: Optional[int] = None) -> Tuple[str, int, float]:
        """(member, its prediction, its confidence); ``contexts``: each member's :func:`context_of`;
        ``leaving_to``: the phase expected next after a held interval (it is shown)."""
        if leaving_to is not None:
            self.choice = "leaving"
            return "leaving", leaving_to, self.conf.confidence(("leaving", predictions["last_phase"]))
        best = None
        for name in self.order:
            c = self.conf.confidence(contexts[name])
            if best is None or c > best[2]:
                best = (name, predictions[name], c)
        self.choice = best[0]
        return best


class Gated:
    """Passes on ``member``'s change predictions once confirmed (see the module docstring)."""

    def __init__(self, confidence: Confidence):
        self.conf = confidence

    def choose(self, phase: int, prediction: int, context: Hashable) -> Tuple[int, float]:
        """The gated prediction after an interval in ``phase`` given the member's ``prediction``
        and its :func:`context_of`, and the confidence of that context."""
        c = self.conf.value(context)
        if prediction != phase and c <= Confidence.START:
            return phase, c / Confidence.MAX
        return prediction, c / Confidence.MAX


def run_key(run: int) -> int:
    """A run length as a context: exact up to 64 intervals, then its log2 bucket (64 + bits)."""
    return run if run <= 64 else 64 + log2_bucket(run)


class Measured:
    """Shows a change only where it has beaten "no change" (see the module docstring).

    Per context an LRU table counts the occasions ``n``, how often the next phase was the same
    (``stays``: last-phase's accuracy there) and how often it was the candidate (``hits``: the
    change's accuracy there). Two contexts are counted: ``(phase, run_key(run), candidate)`` and
    the same with the tracker's held flag; the finer one decides once it has been seen ``FINE``
    times. The candidate is shown when ``hits > stays`` (or they tie at ``tie`` or more); the
    confidence shown is the measured accuracy of what is shown (``UNSEEN`` at a context not seen
    before). ``table``: the counts, which the threads of one process may share (sampled mode: a
    thread that runs a share of a server's work has few runs of its own, and one lucky change
    opened a context; docs/quality.md, stop 45).
    """

    UNSEEN = 0.5
    TIE = 2
    FINE = 2

    def __init__(self, entries: int = 4096, table: Optional[LruTable] = None, tie: int = TIE):
        self.table, self.tie = LruTable(entries) if table is None else table, tie
        self._open: Tuple[Hashable, ...] = ()  # contexts awaiting the next phase
        self._last: Optional[int] = None
        self.stay_accuracy = self.UNSEEN  # "no change"'s measured accuracy at the latest context

    def observe(self, phase: int, run: int, held: bool, candidate: Optional[int]) -> Tuple[int, float]:
        """Score the previous interval's contexts against ``phase``, then the prediction after this
        interval and its measured confidence."""
        for key in self._open:
            e = self.table.get(key)
            if e is None:
                e = [0, 0, 0]
                self.table.put(key, e)
            e[0] += 1
            e[1] += phase == self._last
            e[2] += phase == key[2]
        if candidate == phase:
            candidate = None
        coarse = (phase, run_key(run), candidate)
        fine = coarse + (held,)
        self._open, self._last = (coarse, fine), phase
        e = self.table.get(fine)
        if e is None or e[0] < self.FINE:
            e = self.table.get(coarse)
        if e is None:
            self.stay_accuracy = self.UNSEEN
            return phase, self.UNSEEN
        n, stays, hits = e
        self.stay_accuracy = stays / n
        if candidate is not None and (hits > stays or hits == stays >= self.tie):
            return candidate, hits / n
        return phase, stays / n


class ChangeGate:
    """Exact mode's gate on one proposer's changes (issue 28): a change is shown in a phase only
    once the changes that proposer proposed in that phase have beaten "no change" there.

    Per phase (of one thread) a saturating counter 0..``MAX`` is scored by every change proposed
    after an interval in it, shown or not: +1 when the next interval came in the phase proposed,
    -1 when the run went on (last-phase was right), unchanged when both were wrong. It starts at
    ``START``, one below ``SHOW``: a phase's first proposal is never shown, and a proposal may be
    shown while the counter is at least ``SHOW``. ``measured`` compares its candidate with "no
    change" per (phase, run length, candidate), whose counts are thin and go stale as the
    tracker's representatives move; on exact-mode logs its changes lost to last-phase on xz and
    zstd (2-4% more mispredictions), which the phase's own recent record stops (docs/quality.md).
    """

    MAX, START, SHOW = 7, 1, 2

    def __init__(self, entries: int = 4096):
        self.table = LruTable(entries)
        self._proposed: Optional[Tuple[int, int]] = None  # (phase, change proposed) awaiting the next phase

    def observe(self, phase: int, proposal: int) -> int:
        """Score the previous proposal against ``phase``; the counter of ``phase`` after it
        (``proposal``: the change proposed after this interval, or ``phase`` itself: none)."""
        if self._proposed is not None:
            at, to = self._proposed
            v = self.earned(at)
            self.table.put(at, min(self.MAX, v + 1) if phase == to else max(0, v - 1) if phase == at else v)
        self._proposed = None if proposal == phase else (phase, proposal)
        return self.earned(phase)

    def earned(self, phase: int) -> int:
        v = self.table.get(phase)
        return self.START if v is None else v


class Referee:
    """A thread's record of one proposer's changes against "no change" (sampled mode's ``measured``
    in ``cycle``, issue 27, stop 46): every change proposed after an interval, shown or not, scores
    ``margin`` (-``MAX``..``MAX``, from 0) when the next interval comes: +1 when it came in the phase
    proposed, -1 when the run went on; a change is shown while the margin is at least 0. On random
    orders whose runs end in a window the tracker held, ``measured``'s contexts of (phase, run
    length, candidate, held) opened by chance and lost to last-phase by up to 5 points."""

    MAX = 7

    def __init__(self):
        self.margin = 0
        self._made: Optional[Tuple[int, int]] = None  # (phase, change proposed) awaiting the next phase

    def observe(self, phase: int, proposal: int) -> bool:
        """Score the previous proposal against ``phase``; whether ``proposal`` (a change after this
        interval, or ``phase`` itself: none) may be shown."""
        if self._made is not None:
            at, to = self._made
            self.margin = min(self.MAX, self.margin + 1) if phase == to else (
                max(-self.MAX, self.margin - 1) if phase == at else self.margin)
        self._made = None if proposal == phase else (phase, proposal)
        return self.margin >= 0


class OrderLength:
    """Order and length learned apart, their claims scored together (``order_length``).

    Order: ``(phase before, phase)`` -> the phase that followed last (else ``(phase,)`` -> it).
    Length: the last ``RUNS`` run lengths of each phase. After each interval it *claims* a change
    to the phase the order names when the tracker held the interval (a window that fits no phase:
    the run is ending) or when the run is one short of, at or past the phase's longest past run
    (runs of sampled windows vary by one). Claims are counted per kind (``"held"``, -1, 0, 1),
    pooled over every phase and run length: a fixed cycle of four phases confirms a kind within a
    turn, where a context of (phase, run length) would need several turns. A claim is shown once
    its kind has been right at least ``MIN_HITS`` times and at least as often as the run went on
    (``stays``); a random order, whose claims mostly miss, shows "no change". Confidence: the
    kind's measured accuracy of what is shown. Measured in docs/quality.md (issue 27).
    """

    RUNS = 4
    MIN_HITS = 2
    UNSEEN = 0.5

    def __init__(self, entries: int = 256):
        self.order = LruTable(entries)
        self.lengths = LruTable(entries)
        self.kinds: Dict[Hashable, list] = {}  # kind -> [claims, stays, hits]
        self.last: Optional[int] = None
        self.before: Optional[int] = None
        self.run = 0
        self._claim: Optional[Tuple[Hashable, int]] = None  # (kind, claimed phase) awaiting the next phase

    def observe(self, phase: int, held: bool = False) -> Tuple[int, float]:
        """Feed one phase (``held``: the tracker held this interval); the prediction and its confidence."""
        if self._claim is not None:
            kind, to = self._claim
            e = self.kinds.setdefault(kind, [0, 0, 0])
            e[0] += 1
            e[1] += phase == self.last
            e[2] += phase == to
        if phase != self.last:
            if self.last is not None:
                self.order.put((self.before, self.last), phase)
                self.order.put((self.last,), phase)
                runs = self.lengths.get(self.last) or []
                self.lengths.put(self.last, (runs + [self.run])[-self.RUNS:])
            self.before, self.last, self.run = self.last, phase, 1
        else:
            self.run += 1
        to = self.order.get((self.before, phase))
        to = self.order.get((phase,)) if to is None else to
        runs = self.lengths.get(phase) or []
        past = self.run - max(runs) if runs else None
        kind = "held" if held else None if past is None or past < -1 else min(past, 1)
        if to is None or kind is None:
            self._claim = None
            return phase, self.UNSEEN
        self._claim = (kind, to)
        n, stays, hits = self.kinds.get(kind, (0, 0, 0))
        if hits >= self.MIN_HITS and hits >= stays:
            return to, hits / n
        return phase, stays / n if n else self.UNSEEN


#: name -> one thread's instance from the :class:`~phasescope.engine.config.PredictorConfig`: every
#: predictor that predicts from the phase stream alone, in the order of ``PREDICTORS`` (``hybrid``,
#: ``gated`` and ``measured`` combine them: :class:`~phasescope.engine.predict.ThreadPredictors`).
#: A new predictor: its class and its entry here, its name in ``engine/config.py`` ``PREDICTORS``.
STREAM_PREDICTORS = {
    "rle_markov": lambda c: RleMarkov(c.rle_entries),
    "last_phase": lambda c: LastPhase(),
    "markov1": lambda c: Markov(1, c.markov_entries),
    "markov2": lambda c: Markov(2, c.markov_entries),
    "rle_markov_q": lambda c: RleMarkovQ(c.rle_entries),
    "duration": lambda c: DurationPredictor(c.rle_entries),
    "gpht": lambda c: Gpht(c.gpht_depth, c.gpht_entries),
}
