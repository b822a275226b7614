"""Exact mode's shown changes held to their own record against "no change" (issue 28, stop 48).

The shown prediction and last-phase differ only after an interval where a change is shown: it
gains one misprediction on last-phase when the next interval comes in the phase shown, loses one
when the run goes on, and neither when both are wrong. :class:`ShownLedger` scores exactly those
outcomes of the changes it lets through, and of no others, so its counts are the shown
prediction's own record against last-phase:

- **the thread's**: it starts at ``THREAD`` and a change is shown only while it is above 0, so
  the shown prediction of a thread never makes more than ``THREAD`` mispredictions more than
  last-phase, at any point of any run (once it has lost that many more than it gained, it shows
  "no change" for the rest of the run);
- **the phase's**: each phase starts at ``PHASE``, at most ``MAX``, and shows changes only while
  above 0, so a phase whose shown changes lose stops within ``PHASE`` losses from the start (or
  within ``MAX`` once earned) and leaves the thread's budget to the phases that earn.

The prior lets a change that the proposers' own gates have earned
(:class:`~phasescope.engine.predictors.ChangeGate`) speak on a program's first turn. On zstd the
changes `context` showed lost 10 mispredictions more than they gained (630 against 620;
docs/quality.md, "issue 28, stop 48: predictions").
"""

from __future__ import annotations

from typing import Optional, Tuple

from phasescope.engine.predictors import LruTable


class ShownLedger:
    THREAD = 3  # the most mispredictions the thread's shown changes may make beyond last-phase's
    PHASE = 2  # each phase's record before its first shown change
    MAX = 7  # a phase's record saturates here

    def __init__(self, entries: int = 4096):
        self.thread = self.THREAD
        self.phases = LruTable(entries)
        self._shown: Optional[Tuple[int, int]] = None  # (phase, change shown) awaiting the next phase

    def observe(self, phase: int, proposal: int) -> bool:
        """Score the change shown after the previous interval against ``phase``; whether
        ``proposal`` (a change after this interval, or ``phase`` itself: none) may be shown."""
        if self._shown is not None:
            at, to = self._shown
            d = 1 if phase == to else -1 if phase == at else 0
            self.thread += d
            self.phases.put(at, min(self.MAX, self.record(at) + d))
        shown = proposal != phase and self.thread > 0 and self.record(phase) > 0
        self._shown = (phase, proposal) if shown else None
        return shown

    def record(self, phase: int) -> int:
        """The phase's record: ``PHASE`` plus what its shown changes gained on last-phase (at most ``MAX``)."""
        v = self.phases.get(phase)
        return self.PHASE if v is None else v
