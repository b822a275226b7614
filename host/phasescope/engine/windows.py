"""Access-window records (the agent's ``--locality`` samples) and their join with interval phases.

Proposed wire format, beside the interval records of ``phasescope.target.wire`` in the same ``data``
buffers (little-endian, back to back)::

    offset  type  field
         0  u32   kind            2 = access window
         4  u32   flags           bit 0: partial (the interval ended before the window filled)
                                  bit 1: reversed (the agent fills the buffer from its end)
         8  u64   thread id
        16  u64   seq             the thread's interval the window lies in (interval record seq)
        24  u64   count           addresses that follow
        32  u64   skipped         memory accesses the window could not record (fs/gs, far code)
        40  count x u64 effective address (bytes; the host takes >> 6)

The agent does not know phases: a window is tagged with the interval it lies in, and
:class:`LocalityJoin` holds it until the engine has classified that interval (``thread``,
``thread_seq``) and then adds it to :class:`~phasescope.engine.locality.PhaseLocality` under the
interval's phase. ``split`` separates window records from interval records, so the interval part
of a buffer goes to ``target.wire.decode`` unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

from ..errors import PhasescopeError
from .locality import BLOCK_SHIFT, PhaseLocality

KIND_INTERVAL = 1
KIND_WINDOW = 2
FLAG_PARTIAL = 1
FLAG_REVERSED = 2
INTERVAL_HEADER_SIZE = 96
INTERVAL_NPAIRS_AT = 88
PAIR_SIZE = 16

WINDOW_HEADER = np.dtype([("kind", "<u4"), ("flags", "<u4"), ("thread", "<u8"), ("seq", "<u8"),
                          ("count", "<u8"), ("skipped", "<u8")])
assert WINDOW_HEADER.itemsize == 40


@dataclass
class Window:
    thread: int
    seq: int
    blocks: np.ndarray  # uint64 block numbers (address >> 6), in access order
    partial: bool = False
    skipped: int = 0


def encode_window(thread: int, seq: int, addresses, flags: int = 0, skipped: int = 0) -> bytes:
    """One window record as the agent writes it (tests, replay files)."""
    addresses = np.asarray(addresses, "<u8")
    header = np.zeros(1, WINDOW_HEADER)
    header[0] = (KIND_WINDOW, flags, thread, seq, len(addresses), skipped)
    body = addresses[::-1] if flags & FLAG_REVERSED else addresses
    return header.tobytes() + body.tobytes()


def split(buffer) -> Tuple[bytes, List[Window]]:
    """(the buffer's interval records, back to back; its windows, in order)."""
    buf = memoryview(buffer).cast("B")
    size, offset = len(buf), 0
    spans, windows = [], []
    while offset < size:
        if size - offset < 8:
            raise PhasescopeError(f"corrupt agent data: truncated record at byte {offset}")
        kind = int(np.frombuffer(buf, "<u4", count=1, offset=offset)[0])
        if kind == KIND_INTERVAL:
            if size - offset < INTERVAL_HEADER_SIZE:
                raise PhasescopeError(f"corrupt agent data: truncated record header at byte {offset}")
            npairs = int(np.frombuffer(buf, "<u8", count=1, offset=offset + INTERVAL_NPAIRS_AT)[0])
            end = offset + INTERVAL_HEADER_SIZE + npairs * PAIR_SIZE
            if end > size:
                raise PhasescopeError(f"corrupt agent data: record at byte {offset} overruns the buffer")
            spans.append((offset, end))
        elif kind == KIND_WINDOW:
            if size - offset < WINDOW_HEADER.itemsize:
                raise PhasescopeError(f"corrupt agent data: truncated window header at byte {offset}")
            h = np.frombuffer(buf, WINDOW_HEADER, count=1, offset=offset)[0]
            n = int(h["count"])
            end = offset + WINDOW_HEADER.itemsize + 8 * n
            if end > size:
                raise PhasescopeError(f"corrupt agent data: window at byte {offset} overruns the buffer")
            addrs = np.frombuffer(buf, "<u8", count=n, offset=offset + WINDOW_HEADER.itemsize)
            if int(h["flags"]) & FLAG_REVERSED:
                addrs = addrs[::-1]
            windows.append(Window(int(h["thread"]), int(h["seq"]), addrs >> np.uint64(BLOCK_SHIFT),
                                  bool(int(h["flags"]) & FLAG_PARTIAL), int(h["skipped"])))
        else:
            raise PhasescopeError(f"corrupt agent data: unknown record kind {kind}")
        offset = end
    intervals = b"".join(bytes(buf[a:b]) for a, b in spans)
    return intervals, windows


class LocalityJoin:
    """Windows wait for their interval's phase, then go to ``locality`` under that phase.

    ``min_accesses``: shorter windows (partial ones cut by the interval's end) are dropped, as they
    speak for few cache sizes. ``max_pending``: windows whose interval never gets classified (its
    record was dropped) are discarded oldest first beyond this many.
    """

    def __init__(self, locality: PhaseLocality = None, min_accesses: int = 1024, max_pending: int = 4096):
        self.locality = locality if locality is not None else PhaseLocality()
        self.min_accesses = min_accesses
        self.max_pending = max_pending
        self._pending: Dict[Tuple[int, int], List[Window]] = {}
        self._phases: Dict[Tuple[int, int], int] = {}
        self.short = 0
        self.orphaned = 0

    def add_window(self, window: Window) -> None:
        if len(window.blocks) < self.min_accesses:
            self.short += 1
            return
        key = (window.thread, window.seq)
        phase = self._phases.pop(key, None)
        if phase is not None:
            self.locality.add_blocks(phase, window.blocks)
            return
        self._pending.setdefault(key, []).append(window)
        while sum(len(v) for v in self._pending.values()) > self.max_pending:
            oldest = next(iter(self._pending))
            self.orphaned += len(self._pending.pop(oldest))

    def interval(self, thread: int, thread_seq: int, phase: int) -> None:
        """The engine classified (thread, thread_seq) as ``phase`` (from an IntervalResult)."""
        key = (thread, thread_seq)
        windows = self._pending.pop(key, None)
        if windows is None:
            # Windows arrive in the same buffer as their interval or later; remember a few phases.
            self._phases[key] = phase
            while len(self._phases) > self.max_pending:
                self._phases.pop(next(iter(self._phases)))
            return
        for w in windows:
            self.locality.add_blocks(phase, w.blocks)
