"""The unit of work of the phase engine: one interval of one thread."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # annotations only: importing the interval type does not load numpy
    import numpy as np

#: Operating-system metrics recorded per interval (deltas over the interval).
OS_FIELDS = ("cpu_ns", "minflt", "majflt", "nvcsw", "nivcsw")


@dataclass
class Interval:
    """One interval of one thread, as the tracker consumes it.

    ``keys`` are ASLR-stable block keys (see :mod:`phasescope.sources.modules`), one per executed
    branch-ending block, and ``counts`` the instructions each executed in the interval (exact
    mode); in sampled mode ``keys`` are the sampled code addresses' keys, ``counts`` samples per
    key, ``instructions`` is None (unknown, never invented), ``samples`` their sum and
    ``period_ns`` the CPU time each sample stands for. ``pcs`` holds the raw addresses when known
    (live sessions), for symbolization.
    """

    thread: int
    seq: int  # per-thread sequence number, from 0
    instructions: Optional[int]
    keys: np.ndarray  # uint64
    counts: np.ndarray  # uint64
    pcs: Optional[np.ndarray] = None  # uint64 raw addresses, same order as keys
    start_ns: int = 0  # wall-clock (CLOCK_REALTIME) nanoseconds; 0 when unknown
    end_ns: int = 0
    partial: bool = False  # cut short by thread exit, process exit or detach
    os: Optional[dict] = field(default=None)  # OS_FIELDS -> int, deltas over the interval
    mode: str = "exact"  # or "sampled"
    samples: int = 0
    period_ns: int = 0
    #: --locality: the window of sampled memory addresses (uint64, in access order) that ended in
    #: this interval, None when none did; ``locality_skipped``: its accesses not recorded (fs/gs);
    #: ``locality_reach``: how many of the thread's intervals before this one the window began in
    #: (0: it opened in this one)
    locality: Optional[np.ndarray] = None
    locality_skipped: int = 0
    locality_reach: int = 0
    #: recorded units merged into this interval (engine/segments.py; 1 for a recorded interval)
    units: int = 1
    #: the process and its command name, where one stream carries several processes (system-wide
    #: and followed children); None for the one process of a run
    pid: Optional[int] = None
    comm: Optional[str] = None
    #: sampled mode with stacks: ``[[count, leaf key, caller key, ...], ...]`` and the names of
    #: their keys, ``{key: (module, function)}`` (:mod:`phasescope.sources.stacks`); else None
    stacks: Optional[list] = None
    frames: Optional[dict] = None

    @property
    def wall_ns(self) -> int:
        """Wall time the interval took, 0 when unknown."""
        return max(0, self.end_ns - self.start_ns)

    @property
    def cpu_ns(self) -> Optional[int]:
        """CPU time of the interval: sampled, or measured by the OS (None when unknown)."""
        if self.mode == "sampled":
            return self.samples * self.period_ns
        return None if not self.os else self.os.get("cpu_ns")

    @property
    def unit(self) -> str:
        """What :attr:`weight` counts: ``instructions`` or ``cpu_ns``."""
        return "instructions" if self.instructions is not None else "cpu_ns"

    @property
    def weight(self) -> int:
        """The interval's share of execution: its instructions, else its sampled CPU time."""
        return self.instructions if self.instructions is not None else self.samples * self.period_ns
