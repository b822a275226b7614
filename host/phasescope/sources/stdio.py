"""A spawned target's stdio in pipe mode (the dashboard owns the terminal): three real pipes.

Frida's own ``stdio="pipe"`` gives no way to close the target's stdin (an empty ``input()`` is no
end of file), so a program that reads to EOF (``sqlite3 < script``, ``xz -c < file``) waits
forever. Instead the target is spawned with inherited stdio while phasescope's fds 0, 1 and 2 are,
for the length of the spawn call, the ends of three pipes of our own: the target reads
phasescope's stdin through the first (copied by a thread, then closed: end of file arrives), and
its stdout and stderr come back separately through the others, as ``on_output(fd, data)`` calls,
``data`` empty at end of file.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable, Optional, Tuple

CHUNK = 1 << 16
_SPAWN_LOCK = threading.Lock()  # fds 0-2 are swapped process-wide while a spawn runs
#: python3 ignores these for itself (a closed pipe, a file-size limit: exceptions, not deaths); a
#: shell leaves them at their defaults, and so must a spawn (subprocess's ``restore_signals``):
#: ``seq 1 1e9 | head -1`` ends at head's end only by SIGPIPE
PYTHON_IGNORES = (signal.SIGPIPE, signal.SIGXFSZ)
#: the signals that ask a run to stop (:class:`phasescope.commands.runner.StopRequest` catches them)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def default_signals() -> None:
    """In a forked child, before exec: :data:`PYTHON_IGNORES` back at their defaults."""
    for sig in PYTHON_IGNORES:
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # never keep the program from running
            pass


def fork_held() -> Tuple[int, Callable[[], None]]:
    """``os.fork()`` for a child that execs a program: ``(pid, before_exec)``. The stop signals are
    blocked across the fork, and the child sets them to their defaults (what exec does to a caught
    signal) before ``before_exec()`` unblocks them: a Ctrl-C that reached the child before its exec
    ran phasescope's handler there and was lost, the program running on (stop 47); now it ends
    the child as it would end the program at its first instruction. A stop signal ignored when
    phasescope started is not caught (:class:`phasescope.commands.runner.StopRequest`) and stays
    ignored here; SIGCHLD inherited ignored is set back to ignored before exec. Main thread only."""
    chld_ignored = _waitable()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    pid = os.fork()
    if pid != 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return pid, lambda: None
    for sig in STOP_SIGNALS + ((signal.SIGCHLD,) if chld_ignored else ()):
        try:
            if sig == signal.SIGCHLD:
                signal.signal(sig, signal.SIG_IGN)  # as the program would have inherited it
            elif signal.getsignal(sig) not in (signal.SIG_IGN, None):
                signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # never keep the program from running
            pass
    return 0, lambda: signal.pthread_sigmask(signal.SIG_SETMASK, old)


_CHLD_IGNORED: list = []  # whether SIGCHLD was ignored when phasescope first forked (set once)


def _waitable() -> bool:
    """SIGCHLD at its default, for a forked child's end to be waited for; whether it was inherited
    ignored (the kernel then reaps every child itself: waitpid failed with ECHILD and a sampled
    run waited for ever, stop 47 review), for the child to get it back before exec."""
    if not _CHLD_IGNORED:
        _CHLD_IGNORED.append(signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN)
    if _CHLD_IGNORED[0] and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    return _CHLD_IGNORED[0]


def with_default_signals(spawn: Callable[..., int], *args, **kwargs) -> int:
    """``spawn(*args, **kwargs)`` (Frida's, which forks from here) with SIGXFSZ at its default
    meanwhile, for the child to inherit (Frida resets SIGPIPE itself; phasescope's own writes
    need SIGPIPE ignored at every moment). Only the main thread may set a disposition."""
    if threading.current_thread() is not threading.main_thread():
        return spawn(*args, **kwargs)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    try:
        return spawn(*args, **kwargs)
    finally:
        signal.signal(signal.SIGXFSZ, old)


class PipedStdio:
    """The pipes of one spawned target; :meth:`spawn`, then :meth:`start`, then :meth:`close`."""

    def __init__(self):
        self._threads = []
        self._stdin_w: Optional[int] = None
        self._reads = {}

    def spawn(self, spawn: Callable[[], int]) -> int:
        """Run ``spawn()`` (a spawn with inherited stdio) with fds 0-2 on fresh pipes; its pid."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        with _SPAWN_LOCK:
            saved = [os.dup(fd) for fd in (0, 1, 2)]
            try:
                for fd, end in ((0, in_r), (1, out_w), (2, err_w)):
                    os.dup2(end, fd)
                pid = spawn()
            except BaseException:
                for end in (in_w, out_r, err_r):
                    os.close(end)
                raise
            finally:
                for fd, old in enumerate(saved):
                    os.dup2(old, fd)
                    os.close(old)
                for end in (in_r, out_w, err_w):
                    os.close(end)
        self._stdin_w = in_w
        self._reads = {1: out_r, 2: err_r}
        return pid

    def start(self, on_output: Callable[[int, bytes], None]) -> None:
        """Relay the target's output to ``on_output`` and phasescope's stdin to the target."""
        for fd, end in self._reads.items():
            self._run(self._relay_out, end, fd, on_output)
        self._run(self._relay_in)

    def _run(self, fn, *args) -> None:
        t = threading.Thread(target=fn, args=args, name=f"phasescope-stdio-{fn.__name__}", daemon=True)
        t.start()
        self._threads.append(t)

    @staticmethod
    def _relay_out(end: int, fd: int, on_output) -> None:
        try:
            while True:
                data = os.read(end, CHUNK)
                if not data:
                    break
                on_output(fd, data)
        except OSError:
            pass
        finally:
            os.close(end)
            on_output(fd, b"")

    def _relay_in(self) -> None:
        """Copy our stdin to the target's until end of file (or the target stops reading)."""
        end = self._stdin_w
        try:
            while True:
                data = os.read(0, CHUNK)
                if not data:
                    break
                os.write(end, data)  # blocks while the target does not read, as a shell pipe does
        except OSError:  # our stdin closed or unreadable, or the target closed its end (EPIPE)
            pass
        finally:
            self._close_stdin()

    def _close_stdin(self) -> None:
        end, self._stdin_w = self._stdin_w, None
        if end is not None:
            try:
                os.close(end)
            except OSError:
                pass

    def close(self, timeout: float = 1.0) -> None:
        """Give the output relays ``timeout`` to finish (a detached target may still hold them)."""
        for t in self._threads:
            if t.name.endswith("_relay_out"):
                t.join(timeout)
