"""What a trace session tells its consumer, in the order the target did it: the events of
:meth:`phasescope.sources.session.TraceSession.events`."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from typing import Optional

from phasescope.engine.interval import Interval


@dataclass
class IntervalEvent:
    interval: Interval


@dataclass
class BurstEvent:
    """Sampled mode: one exact interval (``interval.mode == "exact"``) of a thread Stalker followed
    briefly on request (:meth:`phasescope.sources.sampled_session.SampledSession.burst`)."""

    interval: Interval


@dataclass
class ModulesChanged:
    added: list = field(default_factory=list)
    removed: list = field(default_factory=list)


@dataclass
class ThreadStarted:
    tid: int


@dataclass
class ThreadExited:
    tid: int


@dataclass
class ChildEnded:
    """A followed child process (sampled mode) ended; its windows have all come before."""

    pid: int


@dataclass
class Forked:
    """The target forked a child process (which is not traced)."""

    pid: int


@dataclass
class AgentError:
    """A JavaScript error in the agent after it loaded (the trace may be incomplete from here)."""

    message: str


#: what to do instead where exact mode cannot follow a program, or part of it
SAMPLED_INSTEAD = "trace it with --mode sampled (or --bursts)"


@dataclass
class Unfollowable:
    """Exact mode cannot follow part of the program (``reason``: what, e.g. the JVM): counts or the
    program itself may go wrong from here; sampled mode can trace it."""

    reason: str


@dataclass
class Dropped:
    records: int
    instructions: int


@dataclass
class Output:
    fd: int
    data: bytes


@dataclass
class Ended:
    how: str  # exited | crashed | killed | exec | detached | lost
    code: Optional[int] = None
    signal: Optional[str] = None
    program: Optional[str] = None  # exec: the program that replaced the target's

    def describe(self) -> str:
        if self.how == "exited":
            return "exited (its parent took the status)" if self.code is None else f"exited with code {self.code}"
        if self.how == "crashed":
            return f"crashed ({self.signal})"
        if self.how == "killed":
            return f"killed by {self.signal}" if self.signal else "terminated without exiting normally (killed)"
        if self.how == "exec":
            return f"replaced its program with {self.program} (exec); not traced further"
        if self.how == "lost":  # .signal: why (Frida's detach reason, and whether the pid still ran)
            return f"was lost: phasescope's connection to its agent ended ({self.signal}); how the target ended is not known"
        return "detached; target left running"


#: the signals whose death is a crash (the others kill)
CRASH_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT")


def ended_of_status(status: int) -> Ended:
    """The end a wait status tells: exited with its code, or killed or crashed by its signal."""
    if os.WIFEXITED(status):
        return Ended("exited", code=os.WEXITSTATUS(status))
    sig = signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else None
    return Ended("crashed" if sig in CRASH_SIGNALS else "killed", signal=sig)


def unasked_end(reason: str, crash: Optional[str], gone: Optional[bool], status: Optional[int] = None) -> Ended:
    """The end a Frida detach that phasescope did not ask for reports: ``reason`` is Frida's
    (``process-terminated``, ``connection-terminated``, ``device-lost``, ...), ``crash`` its crash
    summary if any, ``gone`` whether a local target's pid was gone then (None: remote), ``status``
    a spawned target's wait status if known (:mod:`phasescope.sources.exit_status`). Only a
    terminated process is a killed one; a lost connection says nothing of how the target ended."""
    if crash:
        return Ended("crashed", signal=crash.splitlines()[0])
    if reason == "process-terminated":
        return Ended("killed") if status is None else ended_of_status(status)
    why = f"frida: {reason}" + ("" if gone is None else "; its pid was gone" if gone else "; its pid still ran")
    return Ended("lost", signal=why)
