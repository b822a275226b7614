"""The paper's next-phase predictors (ISCA 2003, section 5): last phase, RLE Markov, Markov-1/2.

Markov tables are direct-mapped, indexed by the low bits and tagged by the high 24 bits of a
64-bit hash of their history; a tag miss predicts the last phase. ``rle_markov`` (the paper's):
history = (last phase, times it was seen in a row); inserted on a phase change (the entry of the
run that just ended gets the new phase); on a tag hit inside a run the entry is overwritten with
the phase seen (the run went on longer than it said). ``markov1`` / ``markov2``: history = the
last 1 or 2 interval phases; updated every interval. How they are run and scored:
:mod:`phasescope.engine.predict`.
"""

from __future__ import annotations

from typing import Optional, Tuple

from phasescope.engine.hashing import M64, mix64_int


def _pack(history: Tuple[int, ...]) -> int:
    """One 64-bit word of a history of one or two small integers."""
    word = 0
    for x in history:
        word = ((word << 32) | (x & 0xFFFFFFFF)) & M64
    return word


class HashedTable:
    """Direct-mapped, tagged table history -> next phase (``entries`` slots).

    A history is hashed once to a slot ``(index, tag)``; callers keep the slot of their current
    history, so each interval costs one hash per predictor.
    """

    def __init__(self, entries: int):
        self.entries = entries
        self._tags = [-1] * entries
        self._values = [0] * entries

    def slot(self, history: Tuple[int, ...]) -> Tuple[int, int]:
        h = mix64_int(_pack(history))
        return h % self.entries, h >> 40

    def get(self, slot: Tuple[int, int]) -> Optional[int]:
        """Stored next phase on a tag hit, else None."""
        i, tag = slot
        return self._values[i] if self._tags[i] == tag else None

    def put(self, slot: Tuple[int, int], phase: int) -> None:
        i, tag = slot
        self._tags[i] = tag
        self._values[i] = phase


class LastPhase:
    """Predicts that the next phase is the one just seen."""

    def __init__(self):
        self.last: Optional[int] = None

    def observe(self, phase: int) -> None:
        self.last = phase

    def predict(self) -> int:
        return self.last


class RleMarkov:
    """The paper's run-length-encoded Markov predictor."""

    def __init__(self, entries: int = 256):
        self.table = HashedTable(entries)
        self.last: Optional[int] = None
        self.run = 0
        self._slot: Optional[Tuple[int, int]] = None  # slot of (last, run)

    def observe(self, phase: int) -> None:
        if self._slot is not None and (phase != self.last or self.table.get(self._slot) is not None):
            self.table.put(self._slot, phase)
        if phase == self.last:
            self.run += 1
        else:
            self.last, self.run = phase, 1
        self._slot = self.table.slot((self.last, self.run))

    def predict(self) -> int:
        hit = self.table.get(self._slot)
        return self.last if hit is None else hit

    def context(self) -> Tuple[int, int]:
        return (self.last, self.run)


class Markov:
    """Markov predictor over the last ``order`` (1 or 2) interval phases; updated every interval."""

    def __init__(self, order: int, entries: int = 256):
        self.order = order
        self.table = HashedTable(entries)
        self.history: Tuple[int, ...] = ()
        self._slot: Optional[Tuple[int, int]] = None  # slot of a full history

    def observe(self, phase: int) -> None:
        if self._slot is not None:
            self.table.put(self._slot, phase)
        self.history = (self.history + (phase,))[-self.order:]
        if len(self.history) == self.order:
            self._slot = self.table.slot(self.history)

    def predict(self) -> int:
        hit = None if self._slot is None else self.table.get(self._slot)
        return self.history[-1] if hit is None else hit
