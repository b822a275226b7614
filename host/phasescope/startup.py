"""The cyclic garbage collector stays off while phasescope starts up (issue 31).

Start-up loads numpy, rich, the engine and the options' dataclasses: some 30,000 objects that
live as long as the process. With the collector on, every young collection (one per 700
allocations) and each older one walked them again: 35-50 ms of a sampled run's ~0.45 s of fixed
CPU (docs/performance.md, stop 41). The command line holds the collector (:func:`hold`) until the
run is set up (:func:`settled`, before the live loop or a subcommand's work): what exists then is
frozen (``gc.freeze``: never walked again) and collection is back on, so a run collects its
cycles as before. :func:`release` undoes both for a caller that goes on (in-process tests).
"""

from __future__ import annotations

import gc

_held = False  # the collector was on, and hold() turned it off
_frozen = False


def hold() -> None:
    """Collector off until :func:`settled` (left alone if the caller had turned it off)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def settled() -> None:
    """Start-up is over: freeze what it made, collector back on."""
    global _held, _frozen
    if _held:
        gc.freeze()
        gc.enable()
        _held, _frozen = False, True


def release() -> None:
    """The command has returned: the collector as it was before :func:`hold`, nothing frozen."""
    global _held, _frozen
    if _frozen:
        gc.unfreeze()
        _frozen = False
    if _held:
        gc.enable()
        _held = False
