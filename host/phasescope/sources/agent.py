"""What the agent is given at ``init``: its hot path's C source, prefixed with the record layout's
generated ``#define``s (:func:`phasescope.sources.wire.c_defines`), and its options."""

from __future__ import annotations

from typing import Optional

from phasescope.resources import read_text
from phasescope.sources import wire


def agent_options(*, interval: int, slots: int, buffer_bytes: int, window: int, bare: bool, watch: bool,
                  trust_threshold: Optional[int], portable: bool, locality: Optional[dict],
                  counter_source: Optional[str]) -> dict:
    """The agent's ``init`` options (see :class:`~phasescope.sources.session.TraceSession`)."""
    source = counter_source or read_text("agent", "counter.c")
    return {
        "interval": int(interval),
        "slots": int(slots),
        "bufferBytes": int(buffer_bytes),
        "window": int(window),
        "drainMs": 100 if watch else 10,  # watch: only thread events to report
        "bare": bool(bare),
        "watch": bool(watch),
        "trustThreshold": trust_threshold,
        "portable": bool(portable),
        # {window: N accesses, every: M intervals, slots: memory instructions per thread} or None
        "locality": None if not locality else {
            "window": int(locality.get("window", 65536)), "every": int(locality.get("every", 8)),
            "slots": int(locality.get("slots", 1 << 16))},
        "source": wire.c_defines() + source,
        "stats": list(wire.STATS),
    }
