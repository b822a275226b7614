"""The sink protocol: where classified intervals go, and the file helpers every file sink shares.

A sink is told, in order: :meth:`Sink.on_start` once the target runs (what is traced, how),
:meth:`Sink.on_interval` for every classified interval, :meth:`Sink.on_checkpoint` with the
run's summary every few seconds, :meth:`Sink.on_end` with the final summary on every exit path,
then :meth:`Sink.close`. Each method may be left as the base's no-op. A file sink opens its file
in its constructor, so an unwritable path fails (InputError, exit 2) before the target is touched;
a write that fails later raises PhasescopeError (exit 1).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import TYPE_CHECKING, Iterable, List

from phasescope.errors import InputError, PhasescopeError

if TYPE_CHECKING:  # the engine loads after a live run's target has started (commands/monitor.py)
    from phasescope.engine import Interval, IntervalResult


class Sink:
    """Base of every sink: no-op defaults."""

    def prepare(self, engine) -> None:
        """Once, with the :class:`~phasescope.engine.PhaseEngine` before its first interval: a sink may
        preload engine state (the phase database preloads representatives)."""

    def on_start(self, info: dict) -> None:
        """The run began: ``info`` holds ``target``, ``mode`` and ``config``."""

    def on_interval(self, result: IntervalResult, interval: Interval) -> None:
        """One classified interval."""

    def on_checkpoint(self, summary: dict) -> None:
        """The summary so far (every few seconds of a live run)."""

    def on_end(self, summary: dict) -> None:
        """The final summary, with ``summary["end"]`` saying how the target ended."""

    def close(self) -> None:
        """Release files and sockets; called once, on every exit path."""


class Sinks(Sink):
    """Several sinks as one, called in order. ``close`` closes every sink even if one fails."""

    def __init__(self, sinks: Iterable[Sink] = ()):
        self.sinks: List[Sink] = [s for s in sinks if s is not None]

    def prepare(self, engine) -> None:
        for s in self.sinks:
            s.prepare(engine)

    def on_start(self, info: dict) -> None:
        for s in self.sinks:
            s.on_start(info)

    def on_interval(self, result: IntervalResult, interval: Interval) -> None:
        for s in self.sinks:
            s.on_interval(result, interval)

    def on_checkpoint(self, summary: dict) -> None:
        for s in self.sinks:
            s.on_checkpoint(summary)

    def on_end(self, summary: dict) -> None:
        for s in self.sinks:
            s.on_end(summary)

    def close(self) -> None:
        error = None
        for s in self.sinks:
            try:
                s.close()
            except PhasescopeError as e:
                error = error or e
        if error is not None:
            raise error


def open_write(path: str):
    """Open ``path`` for writing; InputError (exit 2) if it cannot be."""
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror}") from None


def write_failed(path: str, e: OSError) -> PhasescopeError:
    """A write that failed after the start (disk full, file size limit, I/O error): exit code 1."""
    return PhasescopeError(f"{path}: cannot write: {e.strerror or e}")


def close_file(f, path: str) -> None:
    """Close; a failure to flush the rest is reported once, like a failed write."""
    try:
        f.close()
    except OSError as e:
        raise write_failed(path, e) from None


def write_json_atomically(path: str, obj, prefix: str) -> None:
    """Replace ``path`` with ``obj`` as JSON: a temporary file in the same directory, then
    ``os.replace``, so readers never see half a file and a crash keeps the old one; an existing
    file keeps its mode."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        raise write_failed(path, e) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1)
            f.write("\n")
        try:
            mode = os.stat(path).st_mode & 0o7777  # a file replaced keeps its mode
        except OSError:
            mask = os.umask(0o022)
            os.umask(mask)
            mode = 0o666 & ~mask  # mkstemp makes it 0600; these are ordinary files
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        raise write_failed(path, e) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
