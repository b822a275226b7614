"""Exact mode's shown changes held to their own record against "no change" (issue 28, stop 48).

The shown prediction and last-phase differ only after an interval where a change is shown: it
gains one misprediction on last-phase when the next interval comes in the phase shown, loses one
when the run goes on, and neither when both are wrong. :class:`ShownLedger` keeps two records of
those outcomes, and a change is shown only while both are above 0:

- **the thread's** scores the changes shown, and no others. It starts at ``THREAD``, so the
  shown prediction of a thread never makes more than ``THREAD`` mispredictions more than
  last-phase, at any point of any run, by construction (once it has lost that many more than it
  gained, it shows "no change" for the rest of the run).
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
        self.phases = LruTable(entries)
        self._proposed: Optional[Tuple[int, int, bool]] = None  # (phase, change, shown) awaiting the next phase

    def observe(self, phase: int, proposal: int) -> bool:
        """Score the change proposed after the previous interval against ``phase``; whether
        ``proposal`` (a change after this interval, or ``phase`` itself: none) may be shown."""
        if self._proposed is not None:
            at, to, shown = self._proposed
            d = 1 if phase == to else -1 if phase == at else 0
            self.thread += d if shown else 0
            self.phases.put(at, max(-self.MAX, min(self.MAX, self.record(at) + d)))
        shown = proposal != phase and self.thread > 0 and self.record(phase) > 0
        self._proposed = None if proposal == phase else (phase, proposal, shown)
        return shown

    def record(self, phase: int) -> int:
        """The phase's record: ``PHASE`` plus what its proposed changes gained on last-phase (-``MAX``..``MAX``)."""
        v = self.phases.get(phase)
        return self.PHASE if v is None else v
