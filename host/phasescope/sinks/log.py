"""The interval log sink: one JSON line per classified interval (:mod:`phasescope.formats.log`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from phasescope.formats.log import dumps, to_record
from phasescope.sinks.base import LineFile, Sink
from phasescope.sources.modules import JIT_MODULE, METHOD_KEY, METHOD_KEY_END, jit_function

if TYPE_CHECKING:  # the engine loads after a live run's target has started (commands/monitor.py)
    from phasescope.engine import Interval, IntervalResult


class JsonlLog(Sink):
    """The interval log (:mod:`phasescope.formats.log`), flushed after every record (to a pipe:
    :class:`~phasescope.sinks.base.LineFile`)."""

    def __init__(self, path: str):
        self.path = path
        self._f = LineFile(path)
        self._methods = set()  # exact mode's compiled Java method keys logged

    def on_interval(self, result: IntervalResult, iv: Interval) -> None:
        """Append the record of a classified interval."""
        self._f.write(dumps(to_record(iv, result)) + "\n")
        if iv.keys.size and iv.keys.max() >= METHOD_KEY:
            self._methods.update(iv.keys[(iv.keys >= np.uint64(METHOD_KEY)) & (iv.keys < np.uint64(METHOD_KEY_END))].tolist())

    def before_end(self, name) -> None:
        """The ``names`` record: the logged method keys as the JVM's tables name them now (they are gone
        afterwards, and ``phasescope profile LOG`` showed them as keys)."""
        methods = sorted(self._methods)
        functions = [(k, jit_function(n)) for k, n in zip(methods, name(methods) if methods else ())]
        frames = [[k, JIT_MODULE, f] for k, f in functions if f is not None]
        if frames:
            self._f.write(dumps({"names": frames}) + "\n")

    def close(self) -> None:
        self._f.close()
