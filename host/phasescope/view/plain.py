"""Plain output of a live run, for logs and pipes: one line per phase change and a status line
every few seconds, on phasescope's own stream (stderr, or ``-o FILE``), never on the target's stdout."""

from __future__ import annotations

import errno
import os
from typing import Dict, List, Optional, TextIO

from phasescope.engine import Interval, IntervalResult


#: the first failure of a :func:`said` write, by the stream's id, that was no reader or terminal
#: gone (a full disk under ``-o``): the run says it at its end (:func:`write_failure`)
_failed: Dict[int, OSError] = {}


def said(write, *args, file: Optional[TextIO] = None, **kwargs) -> None:
    """``write(*args, file=file, **kwargs)`` to the terminal or ``-o``, unless it has gone away
    (SIGHUP: EIO; a reader that closed its pipe, ``2>&1 | head -1``: EPIPE): the run's files are
    what must not be lost, so the run goes on, and the stream is pointed at /dev/null for the
    lines still to come (before stop 45 a closed pipe ended the run at its first status line:
    detached, exit 0, the ``--log`` cut short)."""
    try:
        write(*args, **kwargs) if file is None else write(*args, file=file, **kwargs)
    except OSError as e:
        if e.errno not in (errno.EPIPE, errno.EIO):
            _failed.setdefault(id(file), e)
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, file.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # no descriptor (a StringIO): nothing more to do
            pass


def write_failure(file: TextIO) -> Optional[OSError]:
    """The failure :func:`said` kept for ``file`` (then forgotten), or None."""
    return _failed.pop(id(file), None)


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
            said(print, self.state.change_line(r, iv), file=self.out, flush=True)

    @property
    def due(self) -> float:
        """``time.monotonic()`` of the next draw: the live loop wakes for it."""
        return self._next

    def tick(self, now: float) -> None:
        """A status line at the first tick (tracing has started), then every ``every`` seconds."""
        if now >= self._next:
            said(print, self.state.status_line(), file=self.out, flush=True)
            self._next = now + self.every

    def note(self, text: str) -> None:
        """A line to tell the user now (agent errors, forks)."""
        said(print, text, file=self.out, flush=True)

    @property
    def notes(self) -> List[str]:
        return []  # said as they came
