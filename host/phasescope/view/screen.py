"""The live dashboard on the terminal: rich's full-screen Live, refreshed on its own clock
(``hz`` times a second, however fast intervals arrive) by a draw function of the terminal's size.
A draw that takes long (a large terminal, a loaded machine) spaces the next one out, so drawing
never takes more than 1/:data:`DRAW_SHARE` of the wall time and intervals never queue behind it.
Where nothing new came (a ``version`` of the state unchanged, the terminal the same size), it is
drawn again only each :data:`IDLE_REDRAW` seconds, for its clock: a target that sleeps, waits
for input or is sampled at 97 Hz (a window a second) no longer costs four draws a second."""

from __future__ import annotations

import time
from typing import Callable, Hashable, List, Optional

from rich.console import Console
from rich.live import Live

#: the next draw waits at least this many times as long as the last one took: drawing takes at
#: most about 1/16 of a core (a steady 160x50 draw is ~36 ms of CPU: every 0.58 s, not 4 a second,
#: which was 14% of a core beside a 1000 Hz sampled run; an 80x24 one, ~19 ms: every 0.3 s)
DRAW_SHARE = 16
#: seconds between draws of a state that did not change (the header's clock)
IDLE_REDRAW = 1.0


class DashboardScreen:
    """Owns the terminal while the run lasts; notes are kept and said after it closes. A terminal
    that goes away (SIGHUP: writes fail with EIO) ends the drawing, never the run."""

    def __init__(self, draw: Callable[[int, int], object], hz: float,
                 version: Optional[Callable[[], Hashable]] = None):
        self.draw = draw  # (width, height) -> a rich renderable
        self.version = version  # () -> a value that changes whenever the state drawn does (None: always draw)
        self.period = 1.0 / hz
        self._drawn: Optional[tuple] = None  # (version, width, height) of the last draw
        self._drawn_at = 0.0
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
        if now < self._next or self.gone:
            return
        c = self._console
        width, height = c.width, c.height
        seen = None if self.version is None else (self.version(), width, height)
        if seen is not None and seen == self._drawn and now < self._drawn_at + IDLE_REDRAW:
            self._next = now + self.period  # nothing new: look again then
            return
        began = time.monotonic()  # the draw's own time (``now`` may precede the caller's other work)
        try:
            self._live.update(self.draw(width, height), refresh=True)
        except OSError:
            self.gone = True
        self._drawn, self._drawn_at = seen, now
        self._next = now + max(self.period, DRAW_SHARE * (time.monotonic() - began))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
