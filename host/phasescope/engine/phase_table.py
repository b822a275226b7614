"""The slots of a bounded phase table and their eviction, and :class:`Match`, a classification:
shared by the paper's tracker (:mod:`phasescope.engine.tracker`) and the page tracker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np


@dataclass(frozen=True)
class Match:
    """Classification of one footprint. ``distance`` (fraction of the interval) is to the nearest
    representative before this interval was added, None when the table was empty; ``evicted`` is
    the phase ID dropped from the table to make room, if any; ``transition``: the interval got the
    transition ID (it matched no stable phase); ``merged``: (gone, kept) when the ``merge`` policy
    folded phase ``gone`` into phase ``kept`` to make room (``gone`` is never used again); ``held``:
    the interval fitted no phase and kept its thread's current one for now (the page tracker), a
    sign that the thread is leaving that phase; ``relabel``: the phase that the earlier intervals
    ``relabel_seqs`` belong to after all (None: every label stands), numbered as the tracker
    classified them from 0 (the engine's ``seq``): the thread's previous interval, which the page
    tracker held and this one agreed with, or the intervals of a candidate that this one confirmed
    as a new phase (the table tracker's ``transition``), or every earlier interval of the phase
    ``merged`` folded away (``overlap``, the page tracker's young phase); see :func:`settled`. ``revisable``: a later
    interval may still relabel this one (the page tracker's run of one window, see its look-back; the
    table tracker's ``offshoot``, which carries its phase and waits in a candidate too)."""

    phase: int
    distance: Optional[float]
    new_phase: bool
    evicted: Optional[int] = None
    transition: bool = False
    merged: Optional[Tuple[int, int]] = None
    held: bool = False
    relabel: Optional[int] = None
    relabel_seqs: Optional[Tuple[int, ...]] = None
    revisable: bool = False


def settled(matches) -> list:
    """The phases of a classified stream (matches or the engine's results, all from
    the start, in order) with every ``relabel`` applied: the labels a log ends with."""
    phases = [m.phase for m in matches]
    for m in matches:
        if m.relabel is not None:
            for seq in m.relabel_seqs:
                phases[seq] = m.relabel
    return phases


class BoundedTable:
    """The slots of a bounded phase table and their eviction (``config.evict_policy``), shared by
    :class:`Tracker` and the page tracker: ``_ids``, ``_hits``, ``_last_used`` per slot, ``_used``
    slots in use, ``evictions`` so far."""

    def _take_slot(self) -> Tuple[int, Optional[int]]:
        """A slot for a new phase: a free one, else the victim's; (slot, the phase ID evicted)."""
        if self._used < self.config.table_size:
            self._used += 1
            return self._used - 1, None
        slot = self._victim()
        self.evictions += 1
        return slot, int(self._ids[slot])

    def _victim(self) -> int:
        """Slot to drop from a full table (``evict_policy``)."""
        if self.config.evict_policy == "lfu":
            return int(np.lexsort((self._last_used[: self._used], self._hits[: self._used]))[0])
        return int(self._last_used[: self._used].argmin())
