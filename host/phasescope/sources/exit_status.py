"""How a target that exact mode spawned ended: its wait status.

Frida spawns the target and reaps it itself, keeping the status: its detach says only
``process-terminated``. phasescope reads the status from the kernel's process connector (an exit
event for every process, with its wait status; needs ``CAP_NET_ADMIN``), subscribed before the
target runs, so the event is queued before Frida can see the end. Without that right it peeks at
the zombie (``waitid(WNOWAIT)``, which leaves the reaping to Frida): best effort, as Frida's own
watch may reap the zombie first, and then the end is said without its signal."""

from __future__ import annotations

import os
import socket
import struct
import threading
from typing import Optional

_NETLINK_CONNECTOR, _CN_IDX_PROC, _CN_VAL_PROC, _MCAST_LISTEN, _PROC_EVENT_EXIT = 11, 1, 1, 1, 0x80000000
_NLMSG, _CN_MSG, _EVENT = struct.Struct("=IHHII"), struct.Struct("=IIIIHH"), struct.Struct("=IIQ")
_EXIT = struct.Struct("=IIII")  # pid, tgid, exit_code (a wait status), exit_signal


def _connector() -> Optional[socket.socket]:
    """A socket subscribed to the kernel's process events, None without the right to (``CAP_NET_ADMIN``,
    effective bit 12: without it the kernel ignores the subscription silently)."""
    try:
        with open("/proc/self/status") as f:
            caps = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
        if not caps & (1 << 12):
            return None
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_CONNECTOR)
    except (OSError, StopIteration, ValueError):
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.settimeout(0.5)  # the listener looks whether it was closed
        sock.bind((0, _CN_IDX_PROC))
        op = struct.pack("=I", _MCAST_LISTEN)
        cn = _CN_MSG.pack(_CN_IDX_PROC, _CN_VAL_PROC, 0, 0, len(op), 0) + op
        sock.send(_NLMSG.pack(_NLMSG.size + len(cn), 3, 0, 0, 0) + cn)  # 3: NLMSG_DONE
        return sock
    except OSError:
        sock.close()
        return None


def exit_events(data: bytes):
    """``(pid, tgid, wait status)`` of each exit event in one datagram from the process connector."""
    at = 0
    while at + _NLMSG.size <= len(data):
        length = _NLMSG.unpack_from(data, at)[0]
        body = at + _NLMSG.size + _CN_MSG.size
        if length < _NLMSG.size or body + _EVENT.size + _EXIT.size > len(data):
            return
        if _EVENT.unpack_from(data, body)[0] == _PROC_EVENT_EXIT:
            pid, tgid, code, _ = _EXIT.unpack_from(data, body + _EVENT.size)
            yield pid, tgid, code
        at += (length + 3) & ~3


class ExitStatus:
    """Watch child ``pid`` (spawned, not yet resumed) for its wait status; :meth:`get` reads it."""

    def __init__(self, pid: int):
        self.pid = pid
        self._status: Optional[int] = None
        self._known = threading.Event()  # the status is known, or cannot be
        self._closed = False
        sock = _connector()
        if sock is not None:
            threading.Thread(target=self._listen, args=(sock,), name="phasescope-exit-events", daemon=True).start()
        threading.Thread(target=self._peek, args=(sock is None,), name="phasescope-exit-peek", daemon=True).start()

    def _listen(self, sock: socket.socket) -> None:
        try:
            while not self._closed:
                try:
                    data = sock.recv(1 << 16)
                except socket.timeout:
                    continue
                for tid, tgid, status in exit_events(data):
                    if tgid == self.pid:  # each thread's exit; the last one's is the process's status
                        self._status = status
                        if tid == tgid:
                            self._known.set()
        except OSError:  # the buffer overran (ENOBUFS): the peek may still have it
            pass
        finally:
            sock.close()

    def _peek(self, last: bool) -> None:
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        except OSError:  # Frida reaped it first
            info = None
        if info is not None:
            self._status = (info.si_status << 8 if info.si_code == os.CLD_EXITED
                            else info.si_status | (0x80 if info.si_code == os.CLD_DUMPED else 0))
        if info is not None or last:
            self._known.set()

    def get(self, timeout: float = 1.0) -> Optional[int]:
        """The wait status of the ended process (None: not learnt within ``timeout`` s)."""
        self._known.wait(timeout)
        return self._status

    def close(self) -> None:
        self._closed = True
