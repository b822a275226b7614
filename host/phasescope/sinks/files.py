"""Output files shared by the live monitor and replay. Each opens its file in the constructor, so
an unwritable path fails (InputError) before any work is done."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Optional

from phasescope.formats.bbv import BbvEncoder, pc_map_line
from phasescope.engine.phase_engine import IntervalResult
from phasescope.errors import InputError, PhasescopeError
from phasescope.engine.interval import Interval
from phasescope.formats.log import dumps, to_record


def _open_write(path: str):
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror}") from None


def _write_failed(path: str, e: OSError) -> PhasescopeError:
    """A write that failed after the start (disk full, file size limit, I/O error): exit code 1."""
    return PhasescopeError(f"{path}: cannot write: {e.strerror or e}")


def _close(f, path: str) -> None:
    """Close; a failure to flush the rest is reported once, like a failed write."""
    try:
        f.close()
    except OSError as e:
        raise _write_failed(path, e) from None


class JsonlLog:
    """The interval log (:mod:`phasescope.formats.log`), flushed after every record."""

    def __init__(self, path: str):
        self.path = path
        self._f = _open_write(path)

    def write(self, iv: Interval, result: IntervalResult, **extra) -> None:
        """Append the record of a classified interval; ``extra`` fields are added to it."""
        rec = to_record(iv, result)
        rec.update(extra)
        try:
            self._f.write(dumps(rec) + "\n")
            self._f.flush()
        except OSError as e:
            raise _write_failed(self.path, e) from None

    def close(self) -> None:
        _close(self._f, self.path)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class SummaryWriter:
    """A JSON summary replaced atomically (temp file in the same directory, then os.replace):
    readers never see a half-written summary."""

    def __init__(self, path: str):
        self.path = path
        self._dir = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            raise InputError(f"{path}: cannot write: is a directory")
        os.unlink(self._mkstemp())  # fail now, not after the work

    def _mkstemp(self) -> str:
        try:
            fd, tmp = tempfile.mkstemp(prefix=".phasescope-summary-", suffix=".tmp", dir=self._dir)
        except OSError as e:
            raise InputError(f"{self.path}: cannot write: {e.strerror}") from None
        os.close(fd)
        return tmp

    def write(self, summary: dict) -> None:
        """Write the whole summary; each call replaces the file."""
        tmp = self._mkstemp()
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=1)
                f.write("\n")
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; a summary is an ordinary file
            os.replace(tmp, self.path)
        except OSError as e:
            raise _write_failed(self.path, e) from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


class BbvWriter:
    """A ``.bb`` file (and optionally its pc map), flushed after every interval."""

    def __init__(self, path: str, pc_path: Optional[str] = None):
        self._encoder = BbvEncoder()
        self.path, self.pc_path = path, pc_path
        self._f = _open_write(path)
        self._pc = _open_write(pc_path) if pc_path else None
        self.intervals = 0

    def write(self, iv: Interval) -> bool:
        """Append one interval; False (nothing written) if it holds no instructions."""
        if not len(iv.counts) or not iv.counts.any():
            return False
        line, new = self._encoder.encode(iv.keys, iv.counts)
        if self._pc is not None and new:
            try:
                self._pc.write("".join(pc_map_line(i, key) for i, key in new))
                self._pc.flush()
            except OSError as e:
                raise _write_failed(self.pc_path, e) from None
        try:
            self._f.write(line)
            self._f.flush()
        except OSError as e:
            raise _write_failed(self.path, e) from None
        self.intervals += 1
        return True

    @property
    def blocks(self) -> int:
        """Distinct blocks written so far."""
        return len(self._encoder.ids)

    def close(self) -> None:
        try:
            _close(self._f, self.path)
        finally:
            if self._pc is not None:
                _close(self._pc, self.pc_path)
