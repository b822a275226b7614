"""A change proposer from the runs before (issue 28): what followed the same run context before.

:class:`RunContexts` counts, per context of the current run, the phase of the interval that came
next. A context is the phase and its run length (:func:`~phasescope.engine.predictors.run_key`),
preceded by the phases of up to ``DEPTH`` runs before it: ``(phase, run)``, ``(before, phase,
run)``, ... The longest context seen before decides: in a block cycle such as bzip2's (sorting,
MTF, Huffman coding) or a compiler's passes, one phase is followed now by one phase and now by
another, and the runs before it tell which. It proposes the phase that came most often after that
context when it came more than half the times (so it beats "no change" and every other phase
together), else no change; and only while its proposals over the thread, shown or not, have come at
least as often as the run outlived them (``margin``, -``MAX``..``MAX``, scored per interval as
:class:`~phasescope.engine.predictors.Periodic` scores its claims). Exact mode's shown prediction
passes its changes on only once they have beaten "no change" in their phase too
(:class:`~phasescope.engine.predictors.ChangeGate`; docs/quality.md, stops 41-42).
"""

from __future__ import annotations

from typing import Optional, Tuple

from phasescope.engine.predictors import LruTable, run_key


class RunContexts:
    DEPTH = 3  # runs before the current one in the longest context (1-5: docs/quality.md, stops 41-42)
    UNSEEN = 0.5
    MAX = 7

    def __init__(self, entries: int = 4096):
        self.table = LruTable(entries)  # context -> {next phase: times}; the phase itself: the run went on
        self.before: Tuple[int, ...] = ()  # the phases of the last runs, the latest last
        self.last: Optional[int] = None
        self.run = 0
        self._open: Tuple[tuple, ...] = ()  # the contexts of the previous interval, awaiting this phase
        self._made: Optional[int] = None  # the change proposed after the previous interval, shown or not
        self.margin = 0  # proposals that came less proposals the run outlived (-MAX..MAX)

    def observe(self, phase: int) -> Tuple[int, float]:
        """Score the previous interval's contexts and proposal against ``phase``; the phase proposed
        next (``phase`` itself: no change) and the share of the times it came after that context."""
        if self._made is not None:
            self.margin = min(self.MAX, self.margin + 1) if phase == self._made else (
                max(-self.MAX, self.margin - 1) if phase == self.last else self.margin)
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
        self._made = None
        for key in reversed(self._open):  # the longest context seen before
            e = self.table.get(key)
            if e is not None:
                to, total = max(e, key=e.get), sum(e.values())
                if to != phase and 2 * e[to] > total:
                    self._made = to
                    if self.margin >= 0:
                        return to, e[to] / total
                return phase, e.get(phase, 0) / total
        return phase, self.UNSEEN
