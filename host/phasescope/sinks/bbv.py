"""The SimPoint ``.bb`` sink: one line per interval as it arrives (and exp-bbv's pc map)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from phasescope.formats.bbv import BbvEncoder, pc_map_line
from phasescope.sinks.base import LineFile, Sink

if TYPE_CHECKING:  # the engine loads after a live run's target has started (commands/monitor.py)
    from phasescope.engine import Interval, IntervalResult


class BbvWriter(Sink):
    """A ``.bb`` file (and optionally its pc map), flushed after every interval (to a pipe:
    :class:`~phasescope.sinks.base.LineFile`)."""

    def __init__(self, path: str, pc_path: Optional[str] = None):
        self._encoder = BbvEncoder()
        self.path, self.pc_path = path, pc_path
        self._f = LineFile(path)
        self._pc = LineFile(pc_path) if pc_path else None
        self.intervals = 0

    def write(self, iv: Interval) -> bool:
        """Append one interval; False (nothing written) if it holds no instructions."""
        if not len(iv.counts) or not iv.counts.any():
            return False
        line, new = self._encoder.encode(iv.keys, iv.counts)
        if self._pc is not None and new:
            self._pc.write("".join(pc_map_line(i, key) for i, key in new))
        self._f.write(line)
        self.intervals += 1
        return True

    def on_interval(self, result: IntervalResult, iv: Interval) -> None:
        self.write(iv)

    @property
    def blocks(self) -> int:
        """Distinct blocks written so far."""
        return len(self._encoder.ids)

    def close(self) -> None:
        try:
            self._f.close()
        finally:
            if self._pc is not None:
                self._pc.close()
