"""Binary interval records shipped by the agent (agent/counter.c), decoded with numpy.

Each ``data`` message from the agent carries a buffer of back-to-back little-endian records::

    offset  type  field
         0  u32   kind            1 = interval
         4  u32   flags           bit 0: partial (thread exit, process exit or detach)
         8  u64   thread id
        16  u64   seq             per-thread interval number, from 0
        24  u64   instructions    sum of the counts below
        32  u64   start_ns        CLOCK_REALTIME at the interval's start
        40  u64   end_ns
        48  u64   cpu_ns          getrusage(RUSAGE_THREAD) deltas over the interval:
        56  u64   minflt            user+system CPU time, minor and major page faults,
        64  u64   majflt            voluntary and involuntary context switches
        72  u64   nvcsw
        80  u64   nivcsw
        88  u64   npairs
        96  npairs x (u64 branch PC, u64 instructions)

The branch PC of a block is the address of its last instruction. Blocks ending at the same branch
share one counter in the agent, so a record holds each PC at most once.
"""

from __future__ import annotations

import numpy as np

from phasescope.errors import PhasescopeError
from phasescope.engine.interval import OS_FIELDS, Interval
from phasescope.target.modules import ModuleMap

KIND_INTERVAL = 1
FLAG_PARTIAL = 1

HEADER = np.dtype(
    [
        ("kind", "<u4"),
        ("flags", "<u4"),
        ("thread", "<u8"),
        ("seq", "<u8"),
        ("instructions", "<u8"),
        ("start_ns", "<u8"),
        ("end_ns", "<u8"),
    ]
    + [(name, "<u8") for name in OS_FIELDS]
    + [("npairs", "<u8")]
)
PAIR = np.dtype([("pc", "<u8"), ("count", "<u8")])
assert HEADER.itemsize == 96 and PAIR.itemsize == 16


def records(buffer) -> list:
    """Split a data buffer into (header, pairs) numpy views, one per record."""
    buf = memoryview(buffer).cast("B")
    out = []
    offset, size = 0, len(buf)
    while offset < size:
        if size - offset < HEADER.itemsize:
            raise PhasescopeError(f"corrupt agent data: truncated record header at byte {offset}")
        header = np.frombuffer(buf, HEADER, count=1, offset=offset)[0]
        if header["kind"] != KIND_INTERVAL:
            raise PhasescopeError(f"corrupt agent data: unknown record kind {int(header['kind'])}")
        n = int(header["npairs"])
        end = offset + HEADER.itemsize + n * PAIR.itemsize
        if end > size:
            raise PhasescopeError(f"corrupt agent data: record at byte {offset} overruns the buffer")
        out.append((header, np.frombuffer(buf, PAIR, count=n, offset=offset + HEADER.itemsize)))
        offset = end
    return out


def decode(buffer, modules: ModuleMap) -> list:
    """Intervals in a data buffer, keyed with ``modules`` (the map current when it arrived)."""
    intervals = []
    for header, pairs in records(buffer):
        pcs, counts = pairs["pc"].copy(), pairs["count"].copy()
        intervals.append(
            Interval(
                thread=int(header["thread"]),
                seq=int(header["seq"]),
                instructions=int(header["instructions"]),
                keys=modules.keys(pcs),
                counts=counts,
                pcs=pcs,
                start_ns=int(header["start_ns"]),
                end_ns=int(header["end_ns"]),
                partial=bool(header["flags"] & FLAG_PARTIAL),
                os={name: int(header[name]) for name in OS_FIELDS},
            )
        )
    return intervals
