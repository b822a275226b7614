"""The phase engine, pure: intervals in, phases, predictions and statistics out. No Frida, no I/O."""

from phasescope.engine.interval import Interval
from phasescope.engine.phase_engine import EngineConfig, IntervalResult, PhaseEngine

__all__ = ["EngineConfig", "Interval", "IntervalResult", "PhaseEngine"]
