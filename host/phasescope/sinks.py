"""Output files shared by the live monitor and replay. Each opens its file in the constructor, so
an unwritable path fails (InputError) before any work is done."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Optional

from .bbv import BbvEncoder, pc_map_line
from .engine import IntervalResult
from .errors import InputError
from .interval import Interval
from .records import dumps, to_record


def _open_write(path: str):
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror}") from None


class JsonlLog:
    """The interval log (:mod:`phasescope.records`), flushed after every record."""

    def __init__(self, path: str):
        self.path = path
        self._f = _open_write(path)

    def write(self, iv: Interval, result: IntervalResult, **extra) -> None:
        """Append the record of a classified interval; ``extra`` fields are added to it."""
        rec = to_record(iv, result)
        rec.update(extra)
        self._f.write(dumps(rec) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


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
            os.replace(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


class BbvWriter:
    """A ``.bb`` file (and optionally its pc map), flushed after every interval."""

    def __init__(self, path: str, pc_path: Optional[str] = None):
        self._encoder = BbvEncoder()
        self._f = _open_write(path)
        self._pc = _open_write(pc_path) if pc_path else None
        self.intervals = 0

    def write(self, iv: Interval) -> bool:
        """Append one interval; False (nothing written) if it holds no instructions."""
        if not len(iv.counts) or not iv.counts.any():
            return False
        line, new = self._encoder.encode(iv.keys, iv.counts)
        if self._pc is not None and new:
            self._pc.write("".join(pc_map_line(i, key) for i, key in new))
            self._pc.flush()
        self._f.write(line)
        self._f.flush()
        self.intervals += 1
        return True

    @property
    def blocks(self) -> int:
        """Distinct blocks written so far."""
        return len(self._encoder.ids)

    def close(self) -> None:
        self._f.close()
        if self._pc is not None:
            self._pc.close()
