"""Exact bursts in sampled mode: which new phases get one, and what each phase's burst saw.

Sampled windows find phases cheaply but see code only through a hundred or so samples. When a
thread enters a phase never seen before, :class:`BurstPlanner` asks the source to follow that
thread for one exact interval (``request(tid) -> bool``); the interval that comes back is that
phase's burst (:func:`burst_summary`, ``phases[].burst`` in the summary). At most one burst per
phase; a refused request (another burst runs) is retried on the phase's next intervals, at most
:data:`ATTEMPTS` times in all.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from phasescope.engine.interval import Interval

ATTEMPTS = 3
TOP_BLOCKS = 8
_GRANTED = -1


def burst_summary(iv: Interval, top: int = TOP_BLOCKS) -> dict:
    """What a phase's burst saw: its thread, instructions, distinct blocks, CPU and wall time, and
    its ``top`` blocks (key, raw pc, share of the instructions), heaviest first."""
    order = np.argsort(iv.counts, kind="stable")[::-1][:top]
    total = int(iv.counts.sum()) or 1
    return {"thread": iv.thread, "instructions": iv.instructions, "blocks": len(iv.keys),
            "cpu_ns": iv.cpu_ns, "wall_ns": iv.wall_ns,
            "top_code": [{"key": int(iv.keys[i]), "pc": None if iv.pcs is None else int(iv.pcs[i]),
                          "share": int(iv.counts[i]) / total} for i in order]}


class BurstPlanner:
    """Requests bursts for new phases and tells which phase a finished burst belongs to: the phase
    its thread was in when it was requested. Subscribe :meth:`on_interval` to the engine.
    ``clock``: CLOCK_REALTIME ns, the clock of the intervals' ``start_ns`` (a burst given up by
    the source leaves no record; the next one of its thread is told apart by its start)."""

    def __init__(self, request: Callable[[int], bool], clock: Callable[[], int] = time.time_ns):
        self.request = request
        self.clock = clock
        self._phases: Dict[int, int] = {}  # phase -> failed attempts, or _GRANTED
        self._pending: Dict[int, List[Tuple[int, int]]] = {}  # thread -> [(requested ns, phase)]

    def on_interval(self, result, iv: Interval) -> None:
        """Engine subscriber: request a burst for a new phase (or retry one refused before)."""
        if result.new_phase:
            self._phases[result.phase] = 0
        tries = self._phases.get(result.phase)
        if tries is None or tries == _GRANTED or tries >= ATTEMPTS:
            return
        asked = self.clock()
        if self.request(iv.thread):
            self._phases[result.phase] = _GRANTED
            self._pending.setdefault(iv.thread, []).append((asked, result.phase))
        else:
            self._phases[result.phase] = tries + 1

    def finished(self, iv: Interval) -> Optional[int]:
        """The phase a burst's interval belongs to (None: no burst was asked of its thread)."""
        pending = self._pending.get(iv.thread, [])
        before = [i for i, (asked, _) in enumerate(pending) if asked <= iv.start_ns]
        if not before:
            return None
        phase = pending[before[-1]][1]
        del pending[:before[-1] + 1]  # and the bursts before it, which were given up
        return phase
