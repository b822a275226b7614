"""``--profile FILE``: the run's phase-labelled profile (:mod:`phasescope.profiles`), built as
intervals are classified and written when the run ends, on every exit path, in the format of
FILE's extension (as ``phasescope profile LOG -o FILE`` writes it from a log)."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from phasescope import waits
from phasescope.errors import InputError
from phasescope.profiles.model import Profile
from phasescope.profiles.writers import format_of, write_profile
from phasescope.sinks.base import Sink, check_replaceable, not_read, write_failed, written_in_place
from phasescope.sources.modules import JIT_MODULE, METHOD_KEY, METHOD_KEY_END
from phasescope.sources.perf_map import PerfMap

if TYPE_CHECKING:  # the engine loads after a live run's target has started (commands/monitor.py)
    from phasescope.engine import Interval, IntervalResult



class ProfileWriter(Sink):
    """Collects every classified interval; writes FILE once, at :meth:`close` (not after
    :meth:`abandon`)."""

    def __init__(self, path: str):
        self.path = path
        self.format = format_of(path)
        self._in_place = written_in_place(path)
        if self._in_place:  # opening a FIFO here would hand its first reader an empty file
            if not os.access(path, os.W_OK):
                raise InputError(f"{path}: cannot write: Permission denied")
        else:  # an unwritable path fails now, before the target is touched; an old profile stays until the end
            check_replaceable(path, ".phasescope-profile-")
        self.profile = Profile()
        self._abandoned = False

    def on_interval(self, result: IntervalResult, iv: Interval) -> None:
        self.profile.add(iv, result.phase, result.prediction, result.confidence)

    def before_end(self, name) -> None:
        """Every compiled Java method named while the JVM's tables can be read (not only the
        phases' hot code: the tables are gone at :meth:`on_end`)."""
        methods = [k for k in self.profile.unnamed() if METHOD_KEY <= k < METHOD_KEY_END]
        for k, named in zip(methods, name(methods) if methods else ()):
            self.profile.name_jit(k, named)

    def on_end(self, summary: dict) -> None:
        """Names for what no frame names (exact mode's branch keys): the functions of the run's
        module files on disk, JIT code from the runtime's perf map, and compiled Java methods as
        the run named its phases' hot code."""
        files = [f for f in summary.get("session", {}).get("modules", ()) if os.path.isfile(f)]
        self.profile.name_from(files)
        pid = summary.get("target", {}).get("pid")
        if files and pid:  # a local target's (its modules are listed): its runtime's perf map names JIT code
            jit = [k for k in self.profile.unnamed() if k < METHOD_KEY]
            for k, name in zip(jit, PerfMap(pid).names(jit)):
                if name is not None:
                    self.profile.frames[k] = (JIT_MODULE, name)
        for p in summary.get("phases", ()):
            for block in p.get("top_code", ()):
                if block["key"] not in self.profile.frames:
                    self.profile.name_jit(block["key"], block.get("symbol") or "")

    def abandon(self) -> None:
        self._abandoned = True

    def close(self) -> None:
        if self._abandoned:
            return
        try:
            with waits.interruptible() if self._in_place else contextlib.nullcontext():  # a reader may never come
                write_profile(self.format, self.profile, self.path)
        except OSError as e:
            raise write_failed(self.path, e) from None
        except KeyboardInterrupt:
            raise not_read(self.path) from None
