"""Folding two phases of the table tracker into one: ``overlap`` (two phases over one noisy
behaviour), ``retire`` (a short-lived phase into its nearest) and the full table's ``merge``
(docs/quality.md, issue 28, stops 47 and 48). A mixin of :class:`phasescope.engine.tracker.Tracker`,
which owns the slots it folds."""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple

import numpy as np

from phasescope.engine.phase_table import Match

OVERLAP_LEAST = 4  # ``overlap``: units matched (a segment's all) before a phase's spread counts (quality.md, stop 47)
FOLDED_REACH = 2.0  # ``overlap``: x its spread, where a phase that has folded takes no new phase
RETIRE_IDLE = 400  # ``retire``: intervals without a match after which a short-lived phase folds (stop 48)
RETIRED_KEPT = 256  # ``retire``: the most retired representatives a phase database keeps (newest)


class Folds:
    """Folds of the table's slots, and the relabels they give the log."""

    def _fold(self, a: int, b: int):
        """Fold slots ``a`` and ``b`` into one phase: a phase database's (:attr:`known`) before a
        new one, then the one matched by more intervals (ties: the older) keeps its ID and gets
        the hit-weighted mean; the other's slot is freed (the last slot moves into it). Returns
        ((gone ID, kept ID), slots whose content changed)."""
        keep, gone = sorted((a, b), key=lambda s: (int(self._ids[s]) not in self.known, -self._hits[s], self._ids[s]))
        ids = (int(self._ids[gone]), int(self._ids[keep]))
        h = self._hits[keep] + self._hits[gone]
        self._reps[keep] = (self._reps[keep] * self._hits[keep] + self._reps[gone] * self._hits[gone]) / h
        self._hits[keep] = h
        self._units_in[keep] += self._units_in[gone]
        self._dsum[keep] += self._dsum[gone]
        self._dsq[keep] += self._dsq[gone]
        self._carried[keep] += self._carried[gone]
        self._folded[keep] = True
        self._last_used[keep] = max(self._last_used[keep], self._last_used[gone])
        self.merges += 1
        return ids, self._free(gone, keep)

    def _free(self, gone: int, keep: int) -> List[int]:
        """Free slot ``gone`` (the last slot moves into it); the slots, ``keep``'s first, whose
        content changed."""
        last = self._used - 1
        self._null.clear()  # representatives changed and moved slots (a rare event)
        for arr in (self._reps, self._ids, self._hits, self._units_in, self._last_used, self._dsum, self._dsq,
                    self._carried, self._folded, self._prior):
            arr[gone] = arr[last]
        self._used -= 1
        if keep == last:
            keep = gone
        return [s for s in (keep, gone) if s < self._used]

    def _seqs_of(self, phase: int) -> Tuple[int, ...]:
        """Every interval so far whose settled label is ``phase`` (their ``seq``)."""
        return tuple(s for s, p in enumerate(self._settled) if p == phase)

    def _retire(self, match: Match, slots: List[int]):
        """``retire``: when a phase (not a phase database's) matched fewer than ``retire`` units has
        not been matched for :data:`RETIRE_IDLE` intervals, the one idle longest folds into the
        phase whose representative is nearest its own, which keeps its ID and its representative;
        ``match`` (one with no fold or relabel of its own) then carries the fold (``merged``) and
        the relabel of the retired phase's intervals. Returns (Match, slots whose content changed)."""
        n = self._used
        idle = (self._units_in[:n] < self.config.retire) & (self._last_used[:n] <= self._clock - RETIRE_IDLE)
        if self.known:
            idle &= ~np.isin(self._ids[:n], list(self.known))
        if n < 2 or not idle.any():
            return match, slots
        gone = int(np.flatnonzero(idle)[self._last_used[:n][idle].argmin()])
        d = np.abs(self._reps[:n] - self._reps[gone]).sum(axis=1)
        d[gone] = np.inf
        keep = int(d.argmin())
        ids = (int(self._ids[gone]), int(self._ids[keep]))
        self._hits[keep] += self._hits[gone]
        self._units_in[keep] += self._units_in[gone]
        self._last_used[keep] = max(self._last_used[keep], self._last_used[gone])
        self.retired += 1
        self.retired_reps.append(self._reps[gone].copy())
        self.merges += 1  # a fold too (``merged``), as the summary's ``merges`` counts them
        moved = self._free(gone, keep)[1:]
        phase = ids[1] if match.phase == ids[0] else match.phase  # an interval labelled with it as its nearest
        slots = sorted({s for s in slots if s < self._used} | set(moved))
        return dataclasses.replace(match, phase=phase, merged=ids, relabel=ids[1],
                                   relabel_seqs=self._seqs_of(ids[0]) or None), slots

    def retired_representatives(self) -> list:
        """The representatives of the phases this run retired: what a phase database keeps (the
        newest :data:`RETIRED_KEPT`), so that later runs make no new phase within the threshold of
        one (:meth:`_was_retired`)."""
        return [list(map(float, r)) for r in self.retired_reps]

    def _was_retired(self, rep: np.ndarray) -> bool:
        """Whether ``rep`` is within the threshold of a phase a phase database saw retired: its
        code was a short-lived phase of an earlier run, and makes no new ID each run (its intervals
        keep their nearest phase, where that run's log settled them)."""
        if not self._retired_before:
            return False
        return bool((np.abs(np.asarray(self._retired_before) - rep).sum(axis=1) < self._threshold_units).any())

    def _overlapping(self, slot: int) -> Optional[int]:
        """``overlap``: the stable slot nearest ``slot`` when their representatives are closer than
        ``overlap`` x the sum of the two phases' spreads (the mean distance of the intervals that
        carry each one, to its representative then), each phase matched :data:`OVERLAP_LEAST` times
        or more; else None."""
        hits = self._units_in[: self._used]
        if hits[slot] < OVERLAP_LEAST:
            return None
        others = np.flatnonzero(hits >= OVERLAP_LEAST)
        others = others[others != slot]
        if not len(others):
            return None
        spread = self._spreads()
        ratio = np.abs(self._reps[others] - self._reps[slot]).sum(axis=1) / np.maximum(spread[others] + spread[slot], 1e-12)
        j = int(ratio.argmin())
        return int(others[j]) if ratio[j] < self.config.overlap else None

    def _reach(self) -> np.ndarray:
        """Each slot's spread for :data:`FOLDED_REACH`: this run's (once it is matched
        :data:`OVERLAP_LEAST` times) or the one a phase database saved, the wider."""
        return np.maximum(self._spreads(), self._prior[: self._used])

    def folded_spreads(self) -> dict:
        """Phase -> spread (footprint units) of each phase in the table that has folded another
        in, this run or an earlier one: what a phase database keeps, so that the next run makes no
        new phase within :data:`FOLDED_REACH` x that spread either."""
        reach = self._reach()
        return {int(self._ids[s]): float(reach[s]) for s in np.flatnonzero(self._folded[: self._used])}

    def _spreads(self) -> np.ndarray:
        """Each stable slot's spread for ``overlap`` (0 until it is matched OVERLAP_LEAST times)."""
        n = self._used
        return np.where(self._units_in[:n] >= OVERLAP_LEAST, self._carried[:n, 0] / np.maximum(self._carried[:n, 1], 1), 0.0)
