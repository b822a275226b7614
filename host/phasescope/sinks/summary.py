"""The summary sink: a JSON summary replaced atomically at every checkpoint and at the end."""

from __future__ import annotations

import os
import tempfile

from phasescope.errors import InputError
from phasescope.sinks.base import Sink, write_json_atomically, written_in_place


class SummaryWriter(Sink):
    """A JSON summary replaced atomically (temp file in the same directory, then os.replace):
    readers never see a half-written summary. Written at every checkpoint and at the end; to a
    path that is not a regular file (a FIFO, a device) only at the end: a FIFO's reader gets one
    document, and a checkpoint waiting for a reader would stall the live loop mid-run."""

    def __init__(self, path: str):
        self.path = path
        self._dir = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            raise InputError(f"{path}: cannot write: is a directory")
        os.unlink(self._mkstemp())  # fail now, not after the work
        self._checkpoints = not written_in_place(path)

    def _mkstemp(self) -> str:
        try:
            fd, tmp = tempfile.mkstemp(prefix=".phasescope-summary-", suffix=".tmp", dir=self._dir)
        except OSError as e:
            raise InputError(f"{self.path}: cannot write: {e.strerror}") from None
        os.close(fd)
        return tmp

    def write(self, summary: dict) -> None:
        """Write the whole summary; each call replaces the file."""
        write_json_atomically(self.path, summary, ".phasescope-summary-")

    def on_checkpoint(self, summary: dict) -> None:
        if self._checkpoints:
            self.write(summary)

    def on_end(self, summary: dict) -> None:
        self.write(summary)
