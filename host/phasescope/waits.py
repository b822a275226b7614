"""Waits that a stop signal ends at once.

A stop signal (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT) normally asks the run to finish: it detaches and
writes what the user asked for (:class:`phasescope.commands.runner.StopRequest`). Some waits have
nothing to finish: opening a FIFO that no reader has opened blocks until one does, and with the
run over, a first signal only set a flag the blocked ``open`` never looked at, so SIGTERM did not
end it. Inside :func:`interruptible`, a stop signal raises KeyboardInterrupt where the wait is.
"""

from __future__ import annotations

import contextlib

_depth = 0


@contextlib.contextmanager
def interruptible():
    """A stop signal inside this block raises KeyboardInterrupt (the blocked call returns EINTR
    and Python runs the handler, which raises)."""
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


def now() -> bool:
    """True inside :func:`interruptible`."""
    return _depth > 0


_writing = 0


class WriteEnded(KeyboardInterrupt):
    """A stop signal ended a write to a pipe while the run finishes (:func:`writing_to_a_pipe`);
    a KeyboardInterrupt raised there otherwise (a second signal during the run) is not one."""


@contextlib.contextmanager
def writing_to_a_pipe():
    """A write to a pipe's reader, which may stop reading: once the run is finishing (when later
    stop signals are otherwise kept, not raised), a stop signal inside this block raises
    :class:`WriteEnded`, so a stalled reader cannot keep phasescope from ending."""
    global _writing
    _writing += 1
    try:
        yield
    finally:
        _writing -= 1


def writing() -> bool:
    """True inside :func:`writing_to_a_pipe`."""
    return _writing > 0
