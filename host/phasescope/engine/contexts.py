"""A change proposer from the runs before (issue 28): what followed the same run context before.

:class:`RunContexts` counts, per context of the current run, the phase of the interval that came
next. A context is the phase and its run length (:func:`~phasescope.engine.predictors.run_key`),
preceded by the phases of up to ``DEPTH`` runs before it: ``(phase, run)``, ``(before, phase,
run)``, ... The longest context seen before decides: in a block cycle such as bzip2's (sorting,
MTF, Huffman coding) or a compiler's passes, one phase is followed now by one phase and now by
another, and the runs before it tell which. It proposes the phase that came most often after that
context when it came more often than the run went on, else no change. Exact mode's shown
prediction passes its changes on only once they have beaten "no change" in their phase
(:class:`~phasescope.engine.predictors.ChangeGate`; docs/quality.md, stop 41).
"""

from __future__ import annotations

from typing import Optional, Tuple

from phasescope.engine.predictors import LruTable, run_key


class RunContexts:
    DEPTH = 3  # runs before the current one in the longest context (1, 2, 4: docs/quality.md)
    UNSEEN = 0.5

    def __init__(self, entries: int = 4096):
        self.table = LruTable(entries)  # context -> {next phase: times}; the phase itself: the run went on
        self.before: Tuple[int, ...] = ()  # the phases of the last runs, the latest last
        self.last: Optional[int] = None
        self.run = 0
        self._open: Tuple[tuple, ...] = ()  # the contexts of the previous interval, awaiting this phase

    def observe(self, phase: int) -> Tuple[int, float]:
        """Score the previous interval's contexts against ``phase``; the phase proposed next
        (``phase`` itself: no change) and the share of the times it came after that context."""
        for key in self._open:
            e = self.table.get(key)
            if e is None:
                e = {}
                self.table.put(key, e)
            e[phase] = e.get(phase, 0) + 1
        if phase == self.last:
            self.run += 1
        else:
            if self.last is not None:
                self.before = (self.before + (self.last,))[-self.DEPTH:]
            self.last, self.run = phase, 1
        tail = (phase, run_key(self.run))
        self._open = tuple(self.before[len(self.before) - d:] + tail for d in range(len(self.before) + 1))
        for key in reversed(self._open):  # the longest context seen before
            e = self.table.get(key)
            if e is not None:
                to = max(e, key=e.get)
                if e[to] <= e.get(phase, 0):
                    to = phase
                return to, e[to] / sum(e.values())
        return phase, self.UNSEEN
