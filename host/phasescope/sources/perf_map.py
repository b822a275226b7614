"""JIT code named by its runtime's perf map: ``/tmp/perf-PID.map`` (always /tmp, whatever TMPDIR
says: where perf reads it and the runtimes write it; a container's own /tmp and pid), written by ``node --perf-basic-prof``, JVM
agents, LuaJIT, .NET and others for code in anonymous executable memory, which no ELF file names.

The format (Linux's tools/perf/Documentation/jit-interface.txt): one ``START SIZE name`` line per
code range, ``START`` and ``SIZE`` in hex (with or without ``0x``), appended as code is compiled; a
later line for an overlapping range is newer code there, and the older lines it overlaps are dropped. The file is re-read when it
has grown, so code compiled after the first lookup is named too. A map last written before the
process started (by :data:`STALE_S`) is an earlier process's of the same pid, and is not read: it
would name code the process does not have.

Two uses: :meth:`PerfMap.names` names addresses (hot code, reports, profiles), and
:meth:`PerfMap.keys` gives samples in JIT code the key ``fnv1a32("jit!" + NAME) << 32 | offset``
(NAME without V8's tier mark: ``JS:*f`` and ``JS:~f`` are one function), so the page tracker sees
one function, not the addresses its latest compilation happened to get (issue 27).
"""

from __future__ import annotations

import bisect
import os
import re
from typing import List, Optional, Tuple

import numpy as np

from phasescope.sources.modules import fnv1a32
from phasescope.sources.procfs import process_start

#: How much older than the process a map must be to be stale: the start time is cut to a clock tick
#: (10 ms) and a file's time to a scheduler tick, and the wall clock and the boot clock drift apart a little
STALE_S = 0.1
#: Lines read at once above which (and above a quarter of the entries held) they are merged in one sort
BULK = 256
_TIER = re.compile(r"^(\w+):[~^+*]")  # V8: ~ interpreted, ^ Sparkplug, + Maglev, * TurboFan


def perf_map_paths(pid: int) -> Tuple[str, ...]:
    """Where process ``pid``'s runtime writes its perf map: ``/tmp/perf-PID.map`` (fixed by perf's
    jit-interface, not TMPDIR) as the process sees it. In a container that is its own /tmp (read
    through ``/proc/PID/root``) and its own pid (the last of ``NStgid``), as perf itself looks; and,
    where that file is missing, the host's ``/tmp/perf-PID.map`` (perf's fallback: a JIT agent that
    writes to a /tmp shared with the host, under the host's pid)."""
    ns_pid, root = pid, ""
    try:
        with open(f"/proc/{pid}/status") as f:
            ns_pid = next((int(line.split()[-1]) for line in f if line.startswith("NStgid:")), pid)
        if os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"):
            root = f"/proc/{pid}/root"
    except (OSError, ValueError):  # gone, or not ours to read: where it would be in our namespace
        pass
    own = f"{root}/tmp/perf-{ns_pid}.map"
    return (own, f"/tmp/perf-{pid}.map") if root else (own,)


def jit_tag(name: str) -> int:
    """The high 32 bits of the keys of a JIT function called ``name``."""
    return fnv1a32("jit!" + _TIER.sub(r"\1:", name)) << 32


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


def _add(starts: List[int], ends: List[int], names: List[str], start: int, end: int, name: str,
         first: int = 0) -> None:
    """Newer code at ``[start, end)``: every older entry it overlaps is gone (a runtime that
    frees code and compiles other code there writes no line for the freed code; left in, an
    older entry that starts inside the new range would name the new code after the dead).
    Entries before ``first`` are known to end before ``start``."""
    hi = bisect.bisect_left(starts, end, first)
    lo = hi
    while lo > first and ends[lo - 1] > start:  # entries overlap no other: ends ascend too
        lo -= 1
    starts[lo:hi], ends[lo:hi], names[lo:hi] = [start], [end], [name]


def merged(old, lines) -> Tuple[List[int], List[int], List[str]]:
    """(starts, ends, names) of ``old`` (disjoint entries) once ``lines`` (file order) are added
    one by one as :func:`_add` adds them, in one sort: only a run of overlapping ranges is
    replayed in order (a 300,000-line map, node's after 150,000 functions: 4.8 s one by one)."""
    ranked = sorted([(s, -1, e, n) for s, e, n in old] + [(s, i, e, n) for i, (s, e, n) in enumerate(lines)],
                    key=lambda entry: entry[0])
    starts: List[int] = []
    ends: List[int] = []
    names: List[str] = []
    i = 0
    while i < len(ranked):
        j, reach = i + 1, ranked[i][2]
        while j < len(ranked) and ranked[j][0] < reach:  # overlaps the run so far
            reach, j = max(reach, ranked[j][2]), j + 1
        run = sorted(ranked[i:j], key=lambda entry: entry[1]) if j > i + 1 else ranked[i:j]
        at = len(starts)
        for start, _, end, name in run:  # the run's ranges overlap nothing before ``at``
            _add(starts, ends, names, start, end, name, at)
        i = j
    return starts, ends, names


class PerfMap:
    """One process's perf map, read as it grows (a later entry at an address wins)."""

    def __init__(self, pid: int, path: Optional[str] = None):
        self._paths = (path,) if path else perf_map_paths(pid)
        self.path = self._paths[0]  # the file read: the first of _paths that exists
        self._read_at = 0  # bytes of complete lines read so far
        self._starts: List[int] = []  # entries that overlap no other, by start
        self._ends: List[int] = []
        self._names: List[str] = []
        self._arrays = None  # (starts, ends, tags) as uint64 arrays for keys(), built on demand
        self._started = process_start(pid)  # None (gone, not ours): every map is trusted
        self.stale: Optional[str] = None  # a map passed over as older than the process

    def _refresh(self) -> None:
        for path in self._paths:
            try:
                st = os.stat(path)
            except OSError:
                continue
            if self._started is not None and st.st_mtime < self._started - STALE_S:
                self.stale = path  # an earlier process's of this pid: as if missing
                continue
            size = st.st_size
            if path != self.path:  # the first file missing, a later one there: read that one
                self.path, self._read_at = path, 0
                self._starts, self._ends, self._names = [], [], []
            break
        else:
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
            self._starts, self._ends, self._names, self._read_at = [], [], [], 0
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written waits for the next read
        self._read_at += len(complete)
        lines = parse(complete.decode("utf-8", "replace").splitlines())
        if len(lines) > BULK and len(lines) > len(self._starts) // 4:  # one insertion each: quadratic
            self._starts, self._ends, self._names = merged(zip(self._starts, self._ends, self._names), lines)
        else:
            for start, end, name in lines:
                _add(self._starts, self._ends, self._names, start, end, name)
        self._arrays = None

    def names(self, addresses: List[int]) -> List[Optional[str]]:
        """The name of the code range holding each address (None where the map names nothing);
        the file is re-read (at most once a call) at the first address not named yet."""
        out, refreshed = [], False
        for a in addresses:
            name = self._lookup(a)
            if name is None and not refreshed:  # newer code, maybe: the rest are looked up in the newer map
                self._refresh()
                refreshed = True
                name = self._lookup(a)
            out.append(name)
        return out

    def _lookup(self, address: int) -> Optional[str]:
        i = bisect.bisect_right(self._starts, address) - 1
        return self._names[i] if i >= 0 and address < self._ends[i] else None

    def keys(self, pcs: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """``keys`` (stable keys of ``pcs``) with every address that no module holds (its key is
        the raw address) and a map entry does keyed by its function."""
        outside = keys == pcs
        if not outside.any():
            return keys
        self._refresh()
        if not self._starts:
            return keys
        if self._arrays is None:
            self._arrays = (np.array(self._starts, dtype=np.uint64), np.array(self._ends, dtype=np.uint64),
                            np.array([jit_tag(n) for n in self._names], dtype=np.uint64))
        starts, ends, tags = self._arrays
        i = np.searchsorted(starts, pcs, side="right").astype(np.int64) - 1
        safe = np.maximum(i, 0)
        hit = outside & (i >= 0) & (pcs < ends[safe])
        out = keys.copy()
        out[hit] = tags[safe[hit]] | (pcs[hit] - starts[safe[hit]])
        return out
