"""Frida's blocking calls, bounded: none of them has a timeout of its own, and a target that cannot
run (SIGSTOP, a debugger, a starved machine) would hang phasescope forever."""

from __future__ import annotations

import re
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional, Tuple

import frida

from phasescope.errors import PhasescopeError
from phasescope.sources.device import has_ended
from phasescope.sources.events import ended_of_status
from phasescope.sources.protocol import QUERY_TIMEOUT

if TYPE_CHECKING:
    from phasescope.sources.exit_status import ExitStatus

#: what frida raises when the target (or its session) went away under a call
GONE = (frida.InvalidOperationError, frida.TransportError, frida.ProcessNotFoundError, frida.core.RPCException)


def kill_quietly(device, pid: int) -> None:
    """Kill a process we spawned; one that has already gone (Frida says so in three ways: not
    found, invalid operation, or its /proc entry unreadable) is not an error."""
    try:
        device.kill(pid)
    except (frida.InvalidOperationError, frida.ProcessNotFoundError, frida.NotSupportedError):
        pass


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def attach_failed(e: BaseException, pid: int, spawned: Optional[Tuple[str, "ExitStatus"]] = None) -> PhasescopeError:
    """Frida could not attach to ``pid``: exit code 1. A program spawned here (``spawned``: its
    command line and its :class:`~phasescope.sources.exit_status.ExitStatus`) that ended first (the
    loader found no library: it said so on stderr) is said to have ended, and how, not to be
    unattachable ("cannot attach to pid N: target exited with status 127", or "unable to wait for
    next stop: No child processes" once reaped; stop 47)."""
    if spawned and (re.search(r"target exited with status \d+", first_line(e)) or has_ended(pid)):
        status = spawned[1].get(0.5)
        how = ended_of_status(status).describe() if status is not None else "ended"
        return PhasescopeError(f"{spawned[0]} {how} during its start-up, before it could be traced")
    return PhasescopeError(f"cannot attach to pid {pid}: {first_line(e)}")


DETACH_TIMEOUT = 5.0
STOP_TIMEOUT = 10.0  # stop(): the agent's stop RPC and the script's unload, together
#: stop(): how long the unload (and then the detach) may wait for threads asleep in a system call
#: inside Stalker's copies of the code (the agent names them): one may be a server's timed wait
BLOCKED_WAIT = 2.0
TICK = 0.05  # bounded(): seconds between calls of its tick


def bounded(fn, timeout: float, name: str, tick: Optional[Callable[[], None]] = None) -> bool:
    """Run ``fn`` on a daemon thread and wait at most ``timeout`` s; True if it finished. Frida's
    blocking calls have no timeout of their own, and an abandoned one must not block exit.
    ``tick``: called every TICK s while it runs."""
    worker = threading.Thread(target=fn, name=name, daemon=True)
    worker.start()
    end = time.monotonic() + timeout
    while worker.is_alive() and time.monotonic() < end:
        if tick is not None:
            tick()
        worker.join(min(TICK, max(0.0, end - time.monotonic())))
    return not worker.is_alive()


def unload(script) -> None:
    """Unload the agent script, if any; a process that already went away is not an error."""
    if script is None:
        return
    try:
        script.unload()
    except (frida.InvalidOperationError, frida.TransportError):
        pass


def unload_stuck_line(pid: int, blocked: list) -> str:
    """Why the agent stays in ``pid``: the threads it named asleep in a system call inside Stalker's
    copies of the code (``blocked``), or else one still running instrumented code (a hot loop)."""
    if not blocked:
        return f"the agent could not be unloaded from pid {pid} within {STOP_TIMEOUT:g} s; it stays loaded, idle"
    who = (f"thread {blocked[0]} returns from the system call it sleeps in" if len(blocked) == 1 else
           f"threads {', '.join(map(str, blocked))} return from the system calls they sleep in")
    return f"the agent stays loaded in pid {pid}, idle, until {who} inside traced code; it unloads itself then " \
           "(docs/robustness.md)"


def detach_session(session, timeout: float = DETACH_TIMEOUT) -> None:
    """Detach, giving up after ``timeout``: Frida's detach occasionally never returns (seen here
    with spawned, piped targets), and by then the agent is already unloaded, so nothing is lost; it
    also waits for an unload still under way, which goes on without it."""

    def detach():
        try:
            session.detach()
        except (frida.InvalidOperationError, frida.TransportError):
            pass

    bounded(detach, timeout, "phasescope-detach")


class BoundedRpc:
    """Calls an agent RPC that may not block the caller for long: a target that cannot run
    (SIGSTOP, a debugger) never answers. TimeoutError after QUERY_TIMEOUT, and at once after
    one call timed out (the target is taken as unresponsive from then on)."""

    def __init__(self, timeout: float = QUERY_TIMEOUT):
        self.timeout = timeout
        self.unresponsive = False

    def __call__(self, rpc, *args):
        if self.unresponsive:
            raise TimeoutError
        box = []

        def call():
            try:
                box.append((True, rpc(*args)))
            except BaseException as e:  # handed to the caller
                box.append((False, e))

        if not bounded(call, self.timeout, "phasescope-query"):
            self.unresponsive = True
            raise TimeoutError
        ok, value = box[0]
        if not ok:
            raise value
        return value
