"""``--profile FILE``: the run's phase-labelled profile (:mod:`phasescope.profiles`), built as
intervals are classified and written when the run ends, on every exit path, in the format of
FILE's extension (as ``phasescope profile LOG -o FILE`` writes it from a log)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from phasescope.profiles.model import Profile
from phasescope.profiles.writers import WRITERS, format_of
from phasescope.sinks.base import Sink, close_file, open_write, write_failed

if TYPE_CHECKING:  # the engine loads after a live run's target has started (commands/monitor.py)
    from phasescope.engine import Interval, IntervalResult



class ProfileWriter(Sink):
    """Collects every classified interval; writes FILE once, at :meth:`close`."""

    def __init__(self, path: str):
        self.path = path
        self.write = WRITERS[format_of(path)]
        close_file(open_write(path), path)  # an unwritable path fails now, before the target is touched
        self.profile = Profile()

    def on_interval(self, result: IntervalResult, iv: Interval) -> None:
        self.profile.add(iv, result.phase, result.prediction, result.confidence)

    def close(self) -> None:
        try:
            self.write(self.profile, self.path)
        except OSError as e:
            raise write_failed(self.path, e) from None
