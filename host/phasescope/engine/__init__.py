"""The phase engine, pure: intervals in, phases, predictions and statistics out. No Frida, no I/O.

The names below load on first use (PEP 562): importing :mod:`phasescope.engine.config` alone, as
the command line does before a live run's target starts, loads neither numpy nor the engine."""

__all__ = ["EngineConfig", "Interval", "IntervalResult", "PhaseEngine"]


def __getattr__(name: str):
    if name == "Interval":
        from phasescope.engine.interval import Interval
        return Interval
    if name in __all__:
        from phasescope.engine import phase_engine
        return getattr(phase_engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
