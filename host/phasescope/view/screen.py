"""The live dashboard on the terminal: rich's full-screen Live, refreshed on its own clock
(``hz`` times a second, however fast intervals arrive) by a draw function of the terminal's size.
A draw that takes long (a large terminal, a loaded machine) spaces the next one out, so drawing
never takes more than 1/:data:`DRAW_SHARE` of the wall time and intervals never queue behind it."""

from __future__ import annotations

import time
from typing import Callable, List

from rich.console import Console
from rich.live import Live

#: the next draw waits at least this many times as long as the last one took
DRAW_SHARE = 4


class DashboardScreen:
    """Owns the terminal while the run lasts; notes are kept and said after it closes. A terminal
    that goes away (SIGHUP: writes fail with EIO) ends the drawing, never the run."""

    def __init__(self, draw: Callable[[int, int], object], hz: float):
        self.draw = draw  # (width, height) -> a rich renderable
        self.period = 1.0 / hz
        self.notes: List[str] = []
        self._next = 0.0
        self._console = Console()
        self._live = Live(console=self._console, screen=True, auto_refresh=False, redirect_stdout=False,
                          redirect_stderr=False)
        self.gone = False  # the terminal went away

    def __enter__(self) -> "DashboardScreen":
        self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._live.__exit__(*exc)
        except OSError:
            self.gone = True

    @property
    def due(self) -> float:
        """``time.monotonic()`` of the next draw: the live loop wakes for it."""
        return float("inf") if self.gone else self._next

    def tick(self, now: float) -> None:
        if now >= self._next and not self.gone:
            c = self._console
            began = time.monotonic()  # the draw's own time (``now`` may precede the caller's other work)
            try:
                self._live.update(self.draw(c.width, c.height), refresh=True)
            except OSError:
                self.gone = True
            self._next = now + max(self.period, DRAW_SHARE * (time.monotonic() - began))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
