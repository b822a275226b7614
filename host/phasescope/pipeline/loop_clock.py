"""When the live loop wakes on the wall clock, besides its data, the target's end and signals.

A watched run (the dashboard, plain lines on a terminal, ``--events`` or ``--metrics`` clients)
wakes for the view, for each checkpoint and at most :data:`MAX_QUIET` after its last wake-up, so
what it shows is never more than that late. An unwatched run (plain lines to a file or a pipe,
``--log``, ``--summary``, ``--bbv``, ...) wakes only when its data asks (a ring's batch of samples,
counted by the kernel whatever the host read in between) or for what must be seen at once:
``--duration``'s deadline and a stop signal's grace period. Its status lines and checkpoints come
with the data's wake-ups once due; while reads bring windows, a missed checkpoint is made up
:data:`CHECKPOINT_EVERY` later by a wake-up that reads the rings, so the windows of a target gone
quiet reach the files while it sleeps (docs/performance.md, issue 31, stop 47); once a read brings
nothing, the rings are read :data:`IDLE_READ` after the last checkpoint, so a target that works again
for less than a batch, then sleeps, has those windows saved too (r47e).
"""

from __future__ import annotations

import math
from typing import Optional, TextIO

CHECKPOINT_EVERY = 5.0  # seconds between summaries handed to the sinks
TICK = 0.05  # seconds between the loop's looks at the clock, for a session that wakes on a clock
#: seconds a watched session that wakes on its data may leave the loop without windows: longer than
#: the CPU time of what one wake-up brings when nothing watches live (a second: ten windows at 1000 Hz,
#: one at 97 Hz, 1.03 s), so a thread running flat out is read once a batch, not also by a timeout
#: a moment before its ring's wake-up (twice the loop's work a batch: docs/performance.md, stop 44)
MAX_QUIET = 1.5
#: seconds from an unwatched run's last checkpoint to a read of its rings once a read brought nothing
#: (the target idle): a later burst shorter than a batch would otherwise wait for the next batch, minutes
#: of wall time for a thread that works a second a minute; two wake-ups a minute while nothing runs
IDLE_READ = 30.0


class LoopClock:
    """The live loop's deadlines on ``time.monotonic()``. ``view`` has ``due`` (its next draw);
    ``watched``: see the module docstring; ``deadline``: ``--duration``'s end, or None."""

    def __init__(self, view, watched: bool, deadline: Optional[float], now: float):
        self.view = view
        self.watched = watched
        self.deadline = deadline
        self.next_checkpoint = now + CHECKPOINT_EVERY
        #: the last wake-up brought windows (set by the loop), or none has come yet: the rings may
        #: hold more, so an unwatched run is read and saved :data:`CHECKPOINT_EVERY` after a missed
        #: checkpoint (a target that slowed, or never fills a batch), until a read brings nothing
        self.flowing = True

    def due(self, now: float, passed_on: Optional[float] = None) -> float:
        """Seconds from ``now`` the loop may sleep (data, an event or a signal end it sooner);
        ``passed_on``: when a spawned target passed a stop signal should have ended."""
        dues = [d for d in (self.deadline, passed_on) if d is not None]
        if self.watched:
            dues += [self.next_checkpoint, self.view.due, now + MAX_QUIET]
        elif self.flowing:  # a target gone quiet: its last windows reach the summary all the same
            dues.append(self.next_checkpoint + CHECKPOINT_EVERY)
        else:  # idle: a short burst since is read all the same, later
            dues.append(self.next_checkpoint - CHECKPOINT_EVERY + IDLE_READ)
        return min(dues, default=math.inf) - now

    def checkpoint_due(self, now: float) -> bool:
        """Whether a checkpoint is due at ``now``; if so the next is counted from ``now``."""
        if now < self.next_checkpoint:
            return False
        self.next_checkpoint = now + CHECKPOINT_EVERY
        return True


def on_terminal(out: TextIO) -> bool:
    """Whether phasescope's own lines go to a terminal (someone reads them as they come)."""
    try:
        return out.isatty()
    except (AttributeError, ValueError):  # no descriptor, or closed
        return False
