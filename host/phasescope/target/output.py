"""A spawned target's output, relayed so that it stays byte-identical to an untraced run.

With inherited stdio the target writes to phasescope's own stdout itself. With piped stdio (the
dashboard owns the terminal) its bytes arrive as :class:`~phasescope.target.events.Output`
events: kept, up to ``keep`` bytes, and written to stdout once the dashboard has closed.
"""

from __future__ import annotations

import sys

OUTPUT_KEEP = 1 << 20  # bytes of a piped target's output kept to show after the dashboard closes


class OutputRelay:
    """Pass a piped target's output through to stdout at once (``hold=False``) or after the run."""

    def __init__(self, hold: bool, keep: int = OUTPUT_KEEP):
        self.hold = hold
        self.keep = keep
        self.kept = bytearray()
        self.dropped = 0

    def write(self, data: bytes) -> None:
        if not self.hold:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            return
        self.kept += data
        if len(self.kept) > self.keep:
            cut = len(self.kept) - self.keep
            self.dropped += cut
            del self.kept[:cut]

    def release(self) -> None:
        """Write what was held (after the dashboard closed); says on stderr what was not kept."""
        if not self.kept:
            return
        if self.dropped:
            print(f"[phasescope: {self.dropped} earlier bytes of target output not kept]", file=sys.stderr)
        sys.stdout.buffer.write(bytes(self.kept))
        sys.stdout.flush()
        self.kept.clear()
