"""The ``cycle`` predictor's proposer on the page tracker's streams (sampled mode): the next phase
of a recurring order (:class:`Periodic`), one of the predictors of :mod:`phasescope.engine.predictors`."""

from __future__ import annotations

from collections import deque
from typing import List, Optional, Tuple


class Periodic:
    """Changes of a recurring order, claimed from the first repetition (``cycle``, issue 27).

    The phase stream is kept as its last ``HISTORY`` runs (phase, length). The context of the
    current run is the pair (phase before, phase), or the phase alone where that pair has not come
    before: where it came, the runs of the phase that followed give the phase next and the lengths
    seen. A change to that phase is claimed when every earlier occurrence was followed by the same
    phase and, where the lengths seen vary by one at most (sampled windows cut a fixed CPU budget
    into runs that vary by one), the run is from the shortest to one past the longest; where they
    vary more, only where at least half the runs that lasted this long ended here (so the claim
    beats "no change"), or one past the longest. A window the tracker held (it fitted no phase:
    the run is ending) claims anywhere from one short of the shortest to one past the longest. A fixed cycle is claimed from
    its second turn on, where a context of (phase, run length) needs several turns. Claims are
    shown only while they have held: each run with a claim scores a saturating counter (0..7)
    once it ends, +1 when it went to the phase claimed, -2 when not; it starts at 2, so the first
    claim must come true unseen, and claims are shown while it is at least 3 and while the claims
    made (shown or not) have come at least as often as the run outlived them (``margin``, per
    interval), or at a window the tracker held, whatever the margin: a held window is followed by
    a change most of the time, so the claim costs little there (issue 27, stop 46: claims made
    early in runs that came long had hidden the claims at the changes' own held windows). A random
    order, whose contexts recur now and then by chance, then shows none. Else
    no claim (None). ``accuracy``: the share of the claims shown so far that came (``UNSEEN``
    before any).
    """

    HISTORY = 64
    UNSEEN = 0.5
    MAX, START = 7, 3

    def __init__(self):
        self.runs: deque = deque(maxlen=self.HISTORY)  # completed runs, (phase, length)
        self.last: Optional[int] = None
        self.run = 0
        self.claims = self.hits = 0
        self.trust = self.START - 1  # the counter of runs whose claims held: the first must hold unseen
        self._claim: Optional[int] = None  # the claim shown after the previous interval
        self._claimed: Optional[int] = None  # the latest claim made in the current run, shown or not
        self._made: Optional[int] = None  # the claim made after the previous interval, shown or not
        self.margin = 0  # claims that came less claims the run outlived, per interval (-MAX..MAX)
        self._seen: Optional[tuple] = None  # :meth:`_context` of the current run, once looked up

    @property
    def accuracy(self) -> float:
        return self.hits / self.claims if self.claims else self.UNSEEN

    def observe(self, phase: int, held: bool = False) -> Optional[int]:
        """Feed one phase; the change claimed after it (None: none)."""
        if self._claim is not None:
            self.claims += 1
            self.hits += phase == self._claim
        if self._made is not None:  # against "no change": a claim that came wins, one the run outlived loses
            self.margin = min(self.MAX, self.margin + 1) if phase == self._made else (
                max(-self.MAX, self.margin - 1) if phase == self.last else self.margin)
        if phase != self.last and self._claimed is not None:
            self.trust = min(self.MAX, self.trust + 1) if phase == self._claimed else max(0, self.trust - 2)
            self._claimed = None
        claim = self._next(phase, held)
        self._made = claim
        self._claimed = claim if claim is not None else self._claimed
        self._claim = claim if self.trust >= self.START and (self.margin >= 0 or held) else None
        return self._claim

    def _next(self, phase: int, held: bool) -> Optional[int]:
        if phase == self.last:
            self.run += 1
        else:
            if self.last is not None:
                self.runs.append((self.last, self.run))
            self.last, self.run = phase, 1
            self._seen = None
        if not self.runs:
            return None
        if self._seen is None:  # the run's context changed (a run ended): look it up again
            self._seen = self._context(phase)
        after, lengths = self._seen
        if after is None:
            return None
        lo, hi = min(lengths), max(lengths)
        if hi - lo <= 1 or held:  # lengths that vary by one (or the run is ending: it fitted no phase)
            return after if lo - held <= self.run <= hi + 1 else None
        # lengths that vary more: a change next is claimed only where it beats "no change": at
        # least half the runs seen that lasted this long ended here, or the run is one past them all
        alive = sum(n >= self.run for n in lengths)
        ends = sum(n == self.run for n in lengths)
        return after if 2 * ends >= alive > 0 or self.run == hi + 1 else None

    def _context(self, phase: int) -> Tuple[Optional[int], List[int]]:
        """(the one phase that followed the current run's context in the runs kept, or None, and the
        lengths of those earlier runs): the same for every interval of a run, so looked up once."""
        runs, before = list(self.runs), self.runs[-1][0]
        after, lengths = set(), []
        for i in range(1, len(runs) - 1):
            if runs[i][0] == phase and runs[i - 1][0] == before:
                after.add(runs[i + 1][0])
                lengths.append(runs[i][1])
        if not after:  # the pair not seen yet: the phase alone
            for i in range(len(runs) - 1):
                if runs[i][0] == phase:
                    after.add(runs[i + 1][0])
                    lengths.append(runs[i][1])
        return (after.pop() if len(after) == 1 else None), lengths
