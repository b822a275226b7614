"""JIT code named by its runtime's perf map, so that a function keeps its key when the runtime
recompiles or moves it (sampled mode; issue 27).

A JIT runtime that is asked to (``node --perf-basic-prof``, ``java`` with perf-map-agent, ...)
appends ``START SIZE NAME`` lines (hex, hex, text) to /tmp/perf-PID.map as it makes code. A sample
outside every module whose address one of those ranges holds gets the key
``fnv1a32("jit!" + NAME) << 32 | offset``, NAME without V8's tier mark (``JS:*f`` and ``JS:~f``
are one function), instead of its raw address: the page tracker then sees one function, not the
addresses its latest compilation happened to get. Without a map, keys are unchanged.
"""

from __future__ import annotations

import os
import re

import numpy as np

from phasescope.sources.modules import fnv1a32

_TIER = re.compile(r"^(\w+):[~^+*]")  # V8: ~ interpreted, ^ Sparkplug, + Maglev, * TurboFan


def jit_tag(name: str) -> int:
    """The high 32 bits of the keys of a JIT function called ``name``."""
    return fnv1a32("jit!" + _TIER.sub(r"\1:", name)) << 32


class PerfMap:
    """The perf map of one process, read as it grows (a later entry at an address wins)."""

    def __init__(self, pid: int, path: str = ""):
        self.path = path or f"/tmp/perf-{pid}.map"
        self._offset = 0
        self._tail = b""
        self._entries: dict = {}  # start -> (end, tag)
        self._starts = self._ends = self._tags = np.zeros(0, dtype=np.uint64)

    def _refresh(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return
        if not data:
            return
        self._offset += len(data)
        *lines, self._tail = (self._tail + data).split(b"\n")
        for line in lines:
            parts = line.decode(errors="replace").split(" ", 2)
            try:
                start, size = int(parts[0], 16), int(parts[1], 16)
            except (ValueError, IndexError):
                continue
            self._entries[start] = (start + size, jit_tag(parts[2] if len(parts) > 2 else ""))
        order = sorted(self._entries)
        self._starts = np.array(order, dtype=np.uint64)
        self._ends = np.array([self._entries[s][0] for s in order], dtype=np.uint64)
        self._tags = np.array([self._entries[s][1] for s in order], dtype=np.uint64)

    def keys(self, pcs: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """``keys`` (stable keys of ``pcs``) with every address that no module holds and a map
        entry does keyed by its function."""
        outside = keys == pcs
        if not outside.any():
            return keys
        self._refresh()
        if not len(self._starts):
            return keys
        i = np.searchsorted(self._starts, pcs, side="right").astype(np.int64) - 1
        safe = np.maximum(i, 0)
        hit = outside & (i >= 0) & (pcs < self._ends[safe])
        out = keys.copy()
        out[hit] = self._tags[safe[hit]] | (pcs[hit] - self._starts[safe[hit]])
        return out
