"""The interval log sink: one JSON line per classified interval (:mod:`phasescope.formats.log`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from phasescope.formats.log import dumps, to_record
from phasescope.sinks.base import Sink, close_file, open_write, write_failed

if TYPE_CHECKING:  # the engine loads after a live run's target has started (commands/monitor.py)
    from phasescope.engine import Interval, IntervalResult


class JsonlLog(Sink):
    """The interval log (:mod:`phasescope.formats.log`), flushed after every record."""

    def __init__(self, path: str):
        self.path = path
        self._f = open_write(path)

    def on_interval(self, result: IntervalResult, iv: Interval) -> None:
        """Append the record of a classified interval."""
        rec = to_record(iv, result)
        try:
            self._f.write(dumps(rec) + "\n")
            self._f.flush()
        except OSError as e:
            raise write_failed(self.path, e) from None

    def close(self) -> None:
        close_file(self._f, self.path)
