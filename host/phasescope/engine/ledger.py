"""Exact mode's shown changes held to their own record against "no change" (issue 28, stop 48).

The shown prediction and last-phase differ only after an interval where a change is shown: it
gains one misprediction on last-phase when the next interval comes in the phase shown, loses one
when the run goes on, and neither when both are wrong. :class:`ShownLedger` keeps two records of
those outcomes, and a change is shown only while both are above 0:

- **the thread's** scores the changes shown, and no others, from ``THREAD``: once the shown
  changes have lost that many more than they gained, the thread shows "no change". Stopped, it
  scores the changes it would have shown, and speaks again (record 1) once they have gained
  ``THREAD`` on last-phase, then 2x that after its second stop, 4x after its third: a long run whose
  behaviour turns predictable is not silenced for good, and the shown prediction makes at most
  ``THREAD`` + s mispredictions more than last-phase after s stops, where s grows as the log of the
  changes that came true while stopped (a stream made against it: 3000 intervals, +10).
- **the phase's** scores every change proposed after an interval in the phase, shown or not,
  from ``PHASE`` within -``MAX``..``MAX``: a phase whose changes lose stops within ``PHASE``
  losses from the start, and leaves the thread's budget to the phases that earn; a phase stopped
  early speaks again once its changes have come true more often than the run went on. (Scored
  only when shown, a phase stopped by two early losses stayed stopped: truth-D, held out, lost 5
  points against its earlier record; docs/quality.md.)

The priors let a change that the proposers' own gates have earned
(:class:`~phasescope.engine.predictors.ChangeGate`) speak on a program's first turn. On zstd the
changes `context` showed made 10 mispredictions more than last-phase's 620 (stop 47's captures);
docs/quality.md, "issue 28, stop 48: predictions".
"""

from __future__ import annotations

from typing import Optional, Tuple

from phasescope.engine.predictors import LruTable


class ShownLedger:
    THREAD = 3  # the most mispredictions the thread's shown changes may make beyond last-phase's
    PHASE = 2  # each phase's record before its first change is scored
    MAX = 7  # a phase's record saturates at -MAX and MAX

    def __init__(self, entries: int = 4096):
        self.thread = self.THREAD
        self.stops = 0  # how many times the thread's record has stopped its changes
        self._shadow = 0  # while stopped: what the changes it would have shown gained on last-phase
        self.phases = LruTable(entries)
        self._proposed: Optional[Tuple[int, int, bool]] = None  # (phase, change, shown) awaiting the next phase

    def observe(self, phase: int, proposal: int) -> bool:
        """Score the change proposed after the previous interval against ``phase``; whether
        ``proposal`` (a change after this interval, or ``phase`` itself: none) may be shown."""
        if self._proposed is not None:
            at, to, shown = self._proposed
            d = 1 if phase == to else -1 if phase == at else 0
            if shown:
                self.thread += d
                if self.thread <= 0:  # stopped: it speaks again after twice the evidence it last needed
                    self.stops, self._shadow = self.stops + 1, 0
            elif self.thread <= 0:  # the change it would have shown, scored as if shown
                self._shadow += d
                if self._shadow >= self.THREAD << (self.stops - 1):
                    self.thread = 1
            self.phases.put(at, max(-self.MAX, min(self.MAX, self.record(at) + d)))
        shown = proposal != phase and self.thread > 0 and self.record(phase) > 0
        self._proposed = None if proposal == phase else (phase, proposal, shown)
        return shown

    def record(self, phase: int) -> int:
        """The phase's record: ``PHASE`` plus what its proposed changes gained on last-phase (-``MAX``..``MAX``)."""
        v = self.phases.get(phase)
        return self.PHASE if v is None else v
