"""The summary sink: a JSON summary replaced atomically at every checkpoint and at the end."""

from __future__ import annotations

from phasescope.sinks.base import Sink, check_replaceable, write_json_atomically, written_in_place


class SummaryWriter(Sink):
    """A JSON summary replaced atomically (temp file in the same directory, then os.replace):
    readers never see a half-written summary. Written at every checkpoint and at the end; to a
    path that is not a regular file (a FIFO, a device) only at the end: a FIFO's reader gets one
    document, and a checkpoint waiting for a reader would stall the live loop mid-run."""

    def __init__(self, path: str):
        self.path = path
        check_replaceable(path, ".phasescope-summary-")
        self._checkpoints = not written_in_place(path)

    def write(self, summary: dict) -> None:
        """Write the whole summary; each call replaces the file."""
        write_json_atomically(self.path, summary, ".phasescope-summary-")

    def on_checkpoint(self, summary: dict) -> None:
        if self._checkpoints:
            self.write(summary)

    def on_end(self, summary: dict) -> None:
        self.write(summary)
