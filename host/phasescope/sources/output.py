"""A spawned target's output, relayed so that it stays byte-identical to an untraced run.

With inherited stdio the target writes to phasescope's own stdout and stderr itself. With piped
stdio (the dashboard owns the terminal; :mod:`phasescope.sources.stdio`) its bytes arrive as
:class:`~phasescope.sources.events.Output` events, fd 1 or 2: kept apart, up to ``keep`` bytes
each, and written to stdout and stderr once the dashboard has closed (at once with ``hold``
false).
"""

from __future__ import annotations

import sys

OUTPUT_KEEP = 1 << 20  # bytes of each of a piped target's streams kept to show after the dashboard closes


def _stream(fd: int):
    return sys.stderr if fd == 2 else sys.stdout


class OutputRelay:
    """Pass a piped target's stdout and stderr through at once (``hold=False``) or after the run."""

    def __init__(self, hold: bool, keep: int = OUTPUT_KEEP):
        self.hold = hold
        self.keep = keep
        self.kept = {1: bytearray(), 2: bytearray()}
        self.dropped = {1: 0, 2: 0}

    def write(self, fd: int, data: bytes) -> None:
        if not self.hold:
            stream = _stream(fd)
            stream.flush()
            stream.buffer.write(data)
            stream.flush()
            return
        kept = self.kept[fd]
        kept += data
        if len(kept) > self.keep:
            cut = len(kept) - self.keep
            self.dropped[fd] += cut
            del kept[:cut]

    def release(self) -> None:
        """Write what was held (after the dashboard closed); says on stderr what was not kept."""
        for fd, kept in self.kept.items():
            if self.dropped[fd]:
                print(f"[phasescope: {self.dropped[fd]} earlier bytes of the target's "
                      f"{'stderr' if fd == 2 else 'stdout'} not kept]", file=sys.stderr)
            if kept:
                stream = _stream(fd)
                stream.flush()
                stream.buffer.write(bytes(kept))
                stream.flush()
                kept.clear()
