"""The interval log sink: one JSON line per classified interval (:mod:`phasescope.formats.log`)."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Optional

from phasescope.errors import PhasescopeError
from phasescope.formats.log import dumps, to_record
from phasescope.sinks.base import Sink, close_file, cut_off, open_write, write_failed, write_to_pipe

if TYPE_CHECKING:  # the engine loads after a live run's target has started (commands/monitor.py)
    from phasescope.engine import Interval, IntervalResult


class JsonlLog(Sink):
    """The interval log (:mod:`phasescope.formats.log`), flushed after every record. To a pipe (a
    FIFO, ``--log >(consumer)``) each record is written straight to the pipe, and a stop signal
    while the run finishes ends a write whose reader stopped reading: the log is cut off there
    (said at close, exit 1) and the other outputs are still written."""

    def __init__(self, path: str):
        self.path = path
        self._f = open_write(path)
        self._pipe = stat.S_ISFIFO(os.fstat(self._f.fileno()).st_mode)
        self._cut: Optional[PhasescopeError] = None

    def on_interval(self, result: IntervalResult, iv: Interval) -> None:
        """Append the record of a classified interval."""
        line = dumps(to_record(iv, result)) + "\n"
        try:
            if self._pipe:
                self._to_pipe(line.encode("utf-8"))
            else:
                self._f.write(line)
                self._f.flush()
        except OSError as e:
            raise write_failed(self.path, e) from None

    def _to_pipe(self, data: bytes) -> None:
        if self._cut is not None:
            return
        try:
            write_to_pipe(self._f.fileno(), data)
        except KeyboardInterrupt:
            self._cut = cut_off(self.path)

    def close(self) -> None:
        close_file(self._f, self.path)
        if self._cut is not None:
            raise self._cut
