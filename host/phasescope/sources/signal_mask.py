"""The signal mask of an attached program's main thread, given back after Frida changed it.

Frida's injection into a running process (``attach``) and the agent's unload each leave the
main thread's blocked-signal mask cleared (``SigBlk`` 0x400 before, 0 after, seen on a program
whose main thread blocks SIGSEGV for a ``sigwaitinfo`` thread: a ``kill -SEGV`` then killed it).
The host reads the mask before, and if Frida left it cleared, sets it back with ptrace
(``PTRACE_SEIZE``, ``PTRACE_INTERRUPT``, ``PTRACE_SETSIGMASK``, ``PTRACE_DETACH``: a stop of well
under a millisecond); after the unload it waits up to :data:`UNLOAD_WAIT` for the clearing, which
comes after Frida's detach has returned. A main thread inside a system call that blocks signals for its own
duration (``ppoll``, ``pselect6``, ``epoll_pwait``, ``rt_sigtimedwait``, ``rt_sigsuspend``)
shows that call's temporary mask, not its own: it is left as it is.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Optional

from phasescope.sources.procfs import status_field

_SEIZE, _INTERRUPT, _DETACH, _SETSIGMASK = 0x4206, 0x4207, 17, 0x420B
_WALL = 0x40000000
_EVENT_STOP = 128
#: x86-64 system calls that run with a mask of their own (their /proc SigBlk is not the thread's)
_TEMPORARY_MASK = {128, 130, 270, 271, 281, 333, 441}
#: seconds the host waits, after the detach, for Frida's helper to clear the mask it then gives back
UNLOAD_WAIT = 1.0


def main_thread_mask(pid: int) -> Optional[int]:
    """The blocked-signal mask of ``pid``'s main thread; None when it cannot be read or is a
    system call's temporary mask."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            call = f.read().split()
        if call and call[0].lstrip("-").isdigit() and int(call[0]) in _TEMPORARY_MASK:
            return None
        return int(status_field(f"/proc/{pid}/status", "SigBlk") or "", 16)
    except (OSError, ValueError):
        return None


def give_back(pid: int, mask: Optional[int], wait: float = 0.0) -> bool:
    """Set ``pid``'s main thread's mask back to ``mask`` (read by :func:`main_thread_mask` before
    Frida's attach or unload) if it is cleared, waiting up to ``wait`` seconds for that (Frida's
    helper clears it 10-20 ms after the detach has returned); whether it was. Any failure leaves it
    as it is."""
    if not mask:
        return False
    deadline = time.monotonic() + wait
    while main_thread_mask(pid) != 0:
        if time.monotonic() >= deadline or not os.path.exists(f"/proc/{pid}"):
            return False
        time.sleep(0.01)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    libc.ptrace.restype = ctypes.c_long
    if libc.ptrace(_SEIZE, pid, None, None) != 0:
        return False
    passed = 0  # a signal the thread stopped for, not our interrupt: handed back at the detach
    try:
        if libc.ptrace(_INTERRUPT, pid, None, None) != 0:
            return False
        _, status = os.waitpid(pid, _WALL)
        if not os.WIFSTOPPED(status):
            return False
        if status >> 16 == 0:  # a signal-delivery stop (ours is an event stop, _EVENT_STOP)
            passed = os.WSTOPSIG(status)
        value = ctypes.c_uint64(mask)
        return libc.ptrace(_SETSIGMASK, pid, ctypes.c_void_p(ctypes.sizeof(value)), ctypes.byref(value)) == 0
    except ChildProcessError:
        return False
    finally:
        libc.ptrace(_DETACH, pid, None, ctypes.c_void_p(passed))
