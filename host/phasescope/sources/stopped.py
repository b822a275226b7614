"""Targets the user stopped (SIGSTOP, Ctrl-Z), and Frida's thread-modifying helpers.

Frida changes another thread's registers (``Stalker.follow(tid)``, ``Stalker.invalidate(tid, ...)``)
through a helper process that the agent clones from the target (``gum_linux_modify_thread``,
frida-gum ``gum/backend-linux/gumprocess-linux.c``). The helper ptrace-attaches the thread, and
its ptrace detach sends SIGCONT: so an agent that follows a stopped target's threads resumes it.
The helper and the agent's thread step through a socketpair handshake; the helper holds both ends
(it does not share the target's fd table), so if the agent's thread stops (SIGSTOP) or dies
(SIGKILL) mid-handshake, the helper blocks in read() forever and stays the tracer of that thread:
once killed, the target is a zombie its parent cannot reap. Hence: phasescope attaches only to a
running target (:func:`wait_while_stopped`), lets a stopped target run while its agent unloads
and then stops it again (:class:`Continued`), and ends a helper left blocked behind a dead target
(:func:`end_stuck_helpers`).
"""

from __future__ import annotations

import glob
import os
import signal
import time
from typing import Callable, List, Optional

from phasescope.sources.procfs import stat_fields, status_field

POLL = 0.05  # seconds between looks at /proc


def _state(stat_path: str) -> Optional[str]:
    fields = stat_fields(stat_path)
    return fields[0] if fields else None


def is_stopped(pid: int) -> bool:
    """True when ``pid`` sits in a job-control stop (state T: SIGSTOP, SIGTSTP, SIGTTIN/TTOU). Any
    thread in it counts: a thread that Frida's helper holds (state t) joins the stop only once the
    helper lets it go, so while the helper holds the main thread, /proc/PID/stat says ``t`` and
    the rest of the process is stopped (the agent's thread too, mid-handshake with the helper)."""
    state = _state(f"/proc/{pid}/stat")
    if state in ("T", None):
        return state == "T"
    return any(_state(stat) == "T" for stat in glob.glob(f"/proc/{pid}/task/*/stat"))


def wait_while_stopped(pid: int, give_up: Callable[[], Optional[str]]) -> Optional[str]:
    """Wait until ``pid`` is no longer stopped; None then, else the reason ``give_up()`` returned
    first (a stop request, ``--duration``)."""
    while is_stopped(pid):
        reason = give_up()
        if reason:
            return reason
        time.sleep(POLL)
    return None


class Continued:
    """A detach that needs the target to run: :meth:`poll` continues it (SIGCONT) whenever it is
    found stopped, unless an attach is pending (:func:`attach_pending`: then at a later poll);
    :meth:`restore` stops it again if it was (the user's stop is kept) and says so."""

    def __init__(self, pid: int):
        self.pid = pid
        self.since: Optional[float] = None  # time.monotonic() of the first SIGCONT

    def poll(self) -> None:
        if self.pid is not None and is_stopped(self.pid) and not attach_pending(self.pid):
            if self.since is None:
                self.since = time.monotonic()
            _signal(self.pid, signal.SIGCONT)

    def restore(self, unloaded: bool) -> Optional[str]:
        """Stop the target again if :meth:`poll` continued it and the agent is out (``unloaded``);
        the line that says so, else None. An agent still at work may be half-way through changing
        a thread: stopped there, it would leave its helper behind, so the target is left running."""
        if self.since is None:
            return None
        ran = time.monotonic() - self.since
        if not unloaded:
            return f"pid {self.pid} was stopped: it was continued for the agent to unload, and is left running"
        _signal(self.pid, signal.SIGSTOP)
        return f"pid {self.pid} was stopped: it ran {ran * 1000:.0f} ms for the agent to unload, and is stopped again"


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def tracer(status_path: str) -> int:
    """The TracerPid of a /proc/.../status file: the pid tracing that thread, 0 for none (or gone)."""
    try:
        return int(status_field(status_path, "TracerPid") or 0)
    except ValueError:
        return 0


def maps_agent(pid: int) -> bool:
    """Whether process ``pid`` has Frida's agent mapped (False once it is gone)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "frida-agent" in f.read()
    except OSError:
        return False


def _is_helper(tracer_pid: int) -> bool:
    """Whether a tracer is Frida's helper: not us, and maps frida's agent (it shares the target's memory)."""
    return tracer_pid not in (0, os.getpid()) and maps_agent(tracer_pid)


def orphaned_helpers(session: int) -> List[int]:
    """Frida helpers whose target, of ``session`` (its session id), died: processes of that session
    of one thread that map frida's agent while their parent does not (a helper's parent is the target
    it was cloned from; an orphan's is init or a subreaper, a dead target's maps are empty). A helper
    that was not tracing a thread yet when the target died is found only so: it keeps the agent's
    sockets open, so Frida never reports the end. Only that session: another traced program of one
    thread near its end matches the rest (its parent, a phasescope host, maps no agent)."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        fields = stat_fields(stat)
        try:
            pid, parent, sid, threads = int(stat.split("/")[2]), int(fields[1]), int(fields[3]), int(fields[17])
        except (TypeError, IndexError, ValueError):
            continue
        if sid == session and threads == 1 and pid != os.getpid() and maps_agent(pid) and not maps_agent(parent):
            found.append(pid)
    return found


def attach_pending(pid: int) -> bool:
    """Whether Frida's helper has attached a thread of ``pid`` that has not stopped for it yet
    (state ``t``): the SIGSTOP of its PTRACE_ATTACH is still pending, and a SIGCONT now would
    discard it (SIGCONT discards every pending stop signal), leaving the helper waiting for that
    stop for good while the agent's thread waits for the helper."""
    for task in glob.glob(f"/proc/{pid}/task/*"):
        if _state(f"{task}/stat") != "t" and _is_helper(tracer(f"{task}/status")):
            return True
    return False


def stuck_helpers(pid: int) -> List[int]:
    """Frida helpers tracing a thread of ``pid``."""
    found = {tracer(status) for status in glob.glob(f"/proc/{pid}/task/*/status")}
    return sorted(t for t in found if _is_helper(t))


def session_of(pid: int) -> Optional[int]:
    """The session id of a live ``pid`` (a spawned target's is its pid: Frida's spawn calls setsid)."""
    try:
        return os.getsid(pid)
    except OSError:
        return None


def end_stuck_helpers(pid: Optional[int], orphans_of: Optional[int] = None) -> List[int]:
    """Kill the helpers still tracing a thread of ``pid`` once ``pid`` is dead (every thread a zombie,
    or gone), and the :func:`orphaned_helpers` of session ``orphans_of``: nothing can ever answer them, and
    they keep the zombie from its parent, which then never learns that it ended. The pids killed.
    Cheap while the main thread lives (one read). None: no target yet."""
    dead = ("Z", "X", None)
    if pid is None or _state(f"/proc/{pid}/stat") not in dead or any(
            _state(stat) not in dead for stat in glob.glob(f"/proc/{pid}/task/*/stat")):
        return []  # a main thread that left (pthread_exit) while others run is a zombie too
    helpers = sorted(set(stuck_helpers(pid)) | set(orphaned_helpers(orphans_of) if orphans_of is not None else ()))
    for h in helpers:
        _signal(h, signal.SIGKILL)
    return helpers


def in_foreground(pid: int) -> bool:
    """Whether ``pid`` is in the foreground process group of phasescope's terminal (so a Ctrl-C
    reached it as it reached phasescope)."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False  # no terminal: the signal came from kill
    try:
        return os.tcgetpgrp(fd) == os.getpgid(pid)
    except OSError:
        return False
    finally:
        os.close(fd)
