"""Plain output of a live run, for logs and pipes: one line per phase change and a status line
every few seconds, on phasescope's own stream (stderr, or ``-o FILE``), never on the target's stdout."""

from __future__ import annotations

from typing import List, TextIO

from phasescope.engine import Interval, IntervalResult


class PlainView:
    """Change lines as intervals arrive, status lines on the clock. ``state`` has
    ``subscribe(fn)``, ``change_line(result, interval)`` and ``status_line()`` (a
    :class:`~phasescope.view.snapshot.LiveState`, or the system-wide run)."""

    def __init__(self, state, out: TextIO, every: float):
        self.state = state
        self.out = out
        self.every = every
        self._next = 0.0
        state.subscribe(self._on_interval)

    def __enter__(self) -> "PlainView":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def _on_interval(self, r: IntervalResult, iv: Interval) -> None:
        if r.phase_changed or r.new_phase:
            print(self.state.change_line(r, iv), file=self.out, flush=True)

    @property
    def due(self) -> float:
        """``time.monotonic()`` of the next draw: the live loop wakes for it."""
        return self._next

    def tick(self, now: float) -> None:
        """A status line at the first tick (tracing has started), then every ``every`` seconds."""
        if now >= self._next:
            print(self.state.status_line(), file=self.out, flush=True)
            self._next = now + self.every

    def note(self, text: str) -> None:
        """A line to tell the user now (agent errors, forks)."""
        print(text, file=self.out, flush=True)

    @property
    def notes(self) -> List[str]:
        return []  # said as they came
