"""The unit of work of the phase engine: one interval of one thread."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

#: Operating-system metrics recorded per interval (deltas over the interval).
OS_FIELDS = ("cpu_ns", "minflt", "majflt", "nvcsw", "nivcsw")


@dataclass
class Interval:
    """One interval of one thread, as the tracker consumes it.

    ``keys`` are ASLR-stable block keys (see :mod:`phasescope.target.modules`), one per executed
    branch-ending block, and ``counts`` the instructions each executed in the interval.
    ``pcs`` holds the raw branch addresses when known (live sessions), for symbolization.
    """

    thread: int
    seq: int  # per-thread sequence number, from 0
    instructions: int
    keys: np.ndarray  # uint64
    counts: np.ndarray  # uint64
    pcs: Optional[np.ndarray] = None  # uint64 raw addresses, same order as keys
    start_ns: int = 0  # wall-clock (CLOCK_REALTIME) nanoseconds; 0 when unknown
    end_ns: int = 0
    partial: bool = False  # cut short by thread exit, process exit or detach
    os: Optional[dict] = field(default=None)  # OS_FIELDS -> int, deltas over the interval

    @property
    def wall_ns(self) -> int:
        """Wall time the interval took, 0 when unknown."""
        return max(0, self.end_ns - self.start_ns)
