"""Helpers for the agent integration tests: run a real traced process, read symbols and valgrind."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field

import numpy as np

from phasescope.sources.session import TraceSession
from phasescope.sources.events import Ended, Forked, IntervalEvent, Output, ThreadExited, ThreadStarted, Unfollowable
from phasescope.sources.device import resolve_device, resolve_target


@dataclass
class Trace:
    intervals: list = field(default_factory=list)
    started: list = field(default_factory=list)
    exited: list = field(default_factory=list)
    forked: list = field(default_factory=list)
    output: dict = field(default_factory=dict)  # fd -> bytes
    unfollowable: list = field(default_factory=list)  # what exact mode said it could not follow
    ended: Ended = None
    session: TraceSession = None

    def pairs(self):
        """All (pc, count) pairs of all intervals, concatenated."""
        pcs = np.concatenate([i.pcs for i in self.intervals]) if self.intervals else np.zeros(0, np.uint64)
        counts = np.concatenate([i.counts for i in self.intervals]) if self.intervals else np.zeros(0, np.uint64)
        return pcs, counts

    def diagnosis(self) -> dict:
        """What a failed assertion on the trace's content should print: the records per thread, the
        threads started and ended, what was dropped and what exact mode could not follow."""
        per_thread = {}
        for i in self.intervals:
            per_thread[i.thread] = per_thread.get(i.thread, 0) + 1
        return {"records_per_thread": per_thread, "started": self.started, "exited": self.exited,
                "dropped": self.session.dropped if self.session else None, "unfollowable": self.unfollowable}


def collect(session: TraceSession, on_event=None, timeout: float = 60) -> Trace:
    """Drain a started session until it ends; on_event(event) may act (e.g. feed the target)."""
    trace = Trace(session=session)
    for event in session.events(timeout=timeout):
        if event is None:
            session.stop()
            raise AssertionError(f"no event from the traced process for {timeout} s")
        if on_event is not None:
            on_event(event)
        if isinstance(event, IntervalEvent):
            trace.intervals.append(event.interval)
        elif isinstance(event, ThreadStarted):
            trace.started.append(event.tid)
        elif isinstance(event, ThreadExited):
            trace.exited.append(event.tid)
        elif isinstance(event, Forked):
            trace.forked.append(event.pid)
        elif isinstance(event, Output):
            trace.output[event.fd] = trace.output.get(event.fd, b"") + event.data
        elif isinstance(event, Unfollowable):
            trace.unfollowable.append(event.reason)
        elif isinstance(event, Ended):
            trace.ended = event
    session.stop()
    return trace


def trace_spawn(argv, interval: int = 10_000_000, **kw) -> Trace:
    device = resolve_device()
    session = TraceSession(device, resolve_target(device, argv=list(argv)), interval=interval, stdio="pipe", **kw)
    session.start()
    try:
        return collect(session)
    except BaseException:
        session.kill()  # a failed test leaves no spawned program running
        raise


def functions(binary: str) -> list:
    """(offset, size, name) of the text symbols of a binary, from nm."""
    out = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True, check=True,
                         timeout=300).stdout
    result = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT":
            result.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    return result


def per_function(trace: Trace, binary: str) -> dict:
    """Instructions phasescope counted per function of ``binary`` (by branch PC)."""
    module = next(m for m in trace.session.modules.modules if os.path.realpath(m.path) == os.path.realpath(binary))
    pcs, counts = trace.pairs()
    inside = (pcs >= module.base) & (pcs < module.base + module.size)
    offsets = pcs[inside] - np.uint64(module.base)
    counts = counts[inside]
    result = {}
    for start, size, name in functions(binary):
        sel = (offsets >= start) & (offsets < start + size)
        result[name] = int(counts[sel].sum())
    return result


def callgrind_functions(argv, tmp_path, stdin: bytes = b"") -> dict:
    """Self instruction counts per function of the process started with ``argv`` (not of any
    children it forks), from valgrind --tool=callgrind."""
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp_path}/callgrind.out.%p", *argv],
        input=stdin,
        capture_output=True,
        check=True,
        timeout=300,
    )
    pid = re.search(rb"^==(\d+)==", proc.stderr, re.MULTILINE).group(1).decode()
    out = tmp_path / f"callgrind.out.{pid}"
    text = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--inclusive=no", str(out)], capture_output=True, text=True, check=True,
        timeout=300
    ).stdout
    result = {}
    for line in text.splitlines():
        # a loop back to a function's first instruction is recursion to callgrind: "name'2"
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?\S*?:(\w+)(?:'\d+)?\s", line + " ")
        if m:
            result[m.group(2)] = result.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
    return result
