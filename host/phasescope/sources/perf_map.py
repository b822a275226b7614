"""Names of JIT-compiled code from perf map files: ``/tmp/perf-PID.map`` (the temp directory of
the process), written by ``node --perf-basic-prof``, JVM agents, LuaJIT, .NET and others for
code in anonymous executable memory, which no ELF file names.

The format (Linux's tools/perf/Documentation/jit-interface.txt): one ``START SIZE name`` line
per code range, ``START`` and ``SIZE`` in hex (with or without ``0x``), appended as code is
compiled; a later line for an overlapping range is newer code at that address. The file is
re-read when it has grown, so code compiled after the first lookup is named too. Self-contained:
standard library only.
"""

from __future__ import annotations

import bisect
import os
import tempfile
from typing import List, Optional, Tuple


def perf_map_path(pid: int) -> str:
    return os.path.join(tempfile.gettempdir(), f"perf-{pid}.map")


def parse(lines) -> List[Tuple[int, int, str]]:
    """``(start, end, name)`` of each well-formed line, in file order (malformed lines skipped)."""
    out = []
    for line in lines:
        parts = line.rstrip("\n").split(" ", 2)
        if len(parts) < 3:
            continue
        try:
            start, size = int(parts[0], 16), int(parts[1], 16)
        except ValueError:
            continue
        if size > 0:
            out.append((start, start + size, parts[2]))
    return out


class PerfMap:
    """``name(address)`` from one process's perf map (None where it names nothing, or no map)."""

    def __init__(self, pid: int, path: Optional[str] = None):
        self.path = path or perf_map_path(pid)
        self._read_at = 0  # bytes of complete lines read so far
        self._starts: List[int] = []
        self._ends: List[int] = []
        self._names: List[str] = []
        self._by_start = {}

    def _refresh(self) -> None:
        try:
            size = os.stat(self.path).st_size
        except OSError:
            return
        if size == self._read_at:
            return
        grown = size > self._read_at
        try:
            with open(self.path, "rb") as f:
                f.seek(self._read_at if grown else 0)
                data = f.read()
        except OSError:
            return
        if not grown:  # shorter: another process of that pid wrote it anew
            self._by_start, self._read_at = {}, 0
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written waits for the next read
        self._read_at += len(complete)
        for start, end, name in parse(complete.decode("utf-8", "replace").splitlines()):
            self._by_start[start] = (end, name)  # newer code at one address replaces the older
        items = sorted(self._by_start.items())
        self._starts = [s for s, _ in items]
        self._ends = [e for _, (e, _) in items]
        self._names = [n for _, (_, n) in items]

    def name(self, address: int) -> Optional[str]:
        """The name of the code range holding ``address``."""
        if not self._lookup(address):
            self._refresh()
        return self._lookup(address)

    def _lookup(self, address: int) -> Optional[str]:
        i = bisect.bisect_right(self._starts, address) - 1
        return self._names[i] if i >= 0 and address < self._ends[i] else None
