"""The interval log sink: one JSON line per classified interval (:mod:`phasescope.formats.log`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from phasescope.formats.log import dumps, to_record
from phasescope.sinks.base import LineFile, Sink

if TYPE_CHECKING:  # the engine loads after a live run's target has started (commands/monitor.py)
    from phasescope.engine import Interval, IntervalResult


class JsonlLog(Sink):
    """The interval log (:mod:`phasescope.formats.log`), flushed after every record (to a pipe:
    :class:`~phasescope.sinks.base.LineFile`)."""

    def __init__(self, path: str):
        self.path = path
        self._f = LineFile(path)

    def on_interval(self, result: IntervalResult, iv: Interval) -> None:
        """Append the record of a classified interval."""
        self._f.write(dumps(to_record(iv, result)) + "\n")

    def close(self) -> None:
        self._f.close()
