"""What the agent is given at ``init``: its hot path's C source, prefixed with the record layout's
generated ``#define``s (:func:`phasescope.sources.wire.c_defines`), the signatures of the C
functions it calls (read from that source: :func:`c_exports`), and its options."""

from __future__ import annotations

import re
from typing import Optional

from phasescope.resources import joined
from phasescope.sources.procfs import status_field


#: C parameter and return types of the hot path's exported functions -> Frida NativeFunction types
_NATIVE_TYPES = {"void": "void", "int": "int", "guint64": "uint64", "gint64": "int64"}
_EXPORT = re.compile(r"^([a-z]\w*(?: \*)?)\n(ps_\w+) \(([^)]*)\)\n\{", re.M)


def _native_type(c_type: str) -> str:
    c_type = c_type.strip()
    if c_type.endswith("*"):
        return "pointer"
    if c_type not in _NATIVE_TYPES:
        raise ValueError(f"agent C source: no NativeFunction type for {c_type!r}")
    return _NATIVE_TYPES[c_type]


def c_exports(source: str) -> dict:
    """``{name: [return type, [argument types]]}`` of the non-static ``ps_*`` functions defined in
    the hot path's C source (GNU style: return type on its own line), in NativeFunction types: the
    one definition of the agent's calls into C."""
    out = {}
    for ret, name, params in _EXPORT.findall(source):
        args = [] if params.strip() == "void" else [
            _native_type(re.sub(r"\w+$", "", p.strip())) for p in params.split(",")]
        out[name] = [_native_type(ret), args]
    return out


#: how a rep-prefixed string instruction counts: every iteration as callgrind's Ir (rcx + 1; repe/repne
#: cmps/scas: the iterations run, + 1 unless the comparison stopped them), or once, as the hardware
#: retires it (perf's instructions, valgrind exp-bbv's .bb files); see docs/exact-mode.md
REP_COUNTS = ("iterations", "once")


#: the signals Frida's exception handler takes over as it attaches (gumexceptor-posix.c)
EXCEPTION_SIGNALS = (6, 11, 7, 4, 8, 5, 31)  # SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS


def ignored_signals(pid: int) -> list:
    """Which of :data:`EXCEPTION_SIGNALS` process ``pid`` ignores (``SigIgn`` of /proc/PID/status),
    read before the agent is injected: Frida keeps their ``SIG_IGN`` as ``SIG_DFL`` (the agent's
    ``ignored`` option gives it back). ``[]`` when it cannot be read."""
    try:
        mask = int(status_field(f"/proc/{pid}/status", "SigIgn") or "", 16)
    except ValueError:
        return []
    return [sig for sig in EXCEPTION_SIGNALS if mask >> (sig - 1) & 1]


def agent_options(*, interval: int, slots: int, buffer_bytes: int, window: int, bare, watch: bool,
                  trust_threshold: Optional[int], portable: bool, locality: Optional[dict],
                  counter_source: Optional[str], rep_count: str = "iterations") -> dict:
    """The agent's ``init`` options (see :class:`~phasescope.sources.session.TraceSession`)."""
    from phasescope.sources import wire  # here: the command line reads REP_COUNTS without numpy
    source = counter_source or joined("agent")
    if locality:
        # A window ships as one record, which must fit an output buffer beside what other threads
        # wrote there: a 2M-access window (16 MiB) never fitted the 16 MiB default and was dropped.
        record = wire.LOC_HEADER.itemsize + 8 * int(locality.get("window", 65536))
        buffer_bytes, window = max(buffer_bytes, 2 * record), max(window, 2 * record)
    return {
        "interval": int(interval),
        "slots": int(slots),
        "bufferBytes": int(buffer_bytes),
        "window": int(window),
        "drainMs": 100 if watch else 10,  # watch: only thread events to report
        "bare": bare if bare == "handled" else bool(bare),
        "watch": bool(watch),
        "trustThreshold": trust_threshold,
        "portable": bool(portable),
        "repCount": rep_count,  # a rep string instruction: "iterations" (callgrind) or "once" (exp-bbv, perf)
        # {window: N accesses, every: M intervals, slots: memory instructions per thread} or None
        "locality": None if not locality else {
            "window": int(locality.get("window", 65536)), "every": int(locality.get("every", 8)),
            "slots": int(locality.get("slots", 1 << 16))},
        "source": wire.c_defines() + source,
        "api": c_exports(source),
        "stats": list(wire.STATS),
        "ignored": [],  # the program's ignored signals among EXCEPTION_SIGNALS, read at the attach (ignored_signals)
    }
