"""How a target that exact mode spawned ended: its wait status.

Frida spawns the target and reaps it itself, keeping the status: its detach says only
``process-terminated``. phasescope reads the status from the kernel's process connector (an exit
event for every process, with its wait status; needs ``CAP_NET_ADMIN``), subscribed before the
target runs (the kernel sends it just after it tells the parent, so :meth:`ExitStatus.get` waits
for it, briefly). Without that right, or in a container, it peeks at the zombie
(``waitid(WNOWAIT)``, which leaves the reaping to Frida): best effort, as Frida's own watch may
reap the zombie first, and then the end is said without its signal."""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading
import time
from typing import Optional

_NETLINK_CONNECTOR, _CN_IDX_PROC, _CN_VAL_PROC, _MCAST_LISTEN, _PROC_EVENT_EXIT = 11, 1, 1, 1, 0x80000000
_NLMSG, _CN_MSG, _EVENT = struct.Struct("=IHHII"), struct.Struct("=IIIIHH"), struct.Struct("=IIQ")
_EXIT = struct.Struct("=IIII")  # pid, tgid, exit_code (a wait status), exit_signal
#: the inodes of the initial pid and user namespaces (the kernel's PROC_PID_INIT_INO, PROC_USER_INIT_INO)
_INIT_NAMESPACES = (("pid", 0xEFFFFFFC), ("user", 0xEFFFFFFD))


def connector() -> Optional[socket.socket]:
    """A socket subscribed to the kernel's process events, None without the right to (``CAP_NET_ADMIN``,
    effective bit 12) or outside the initial pid and user namespaces (a container): in either case
    the kernel ignores the subscription silently (and its events name the initial namespace's pids)."""
    try:
        if any(os.stat(f"/proc/self/ns/{ns}").st_ino != ino for ns, ino in _INIT_NAMESPACES):
            return None
        with open("/proc/self/status") as f:
            caps = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
        if not caps & (1 << 12):
            return None
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_CONNECTOR)
    except (OSError, StopIteration, ValueError):
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
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


def process_status(pid: int, events, status: Optional[int], leader_gone: bool):
    """``(status, leader_gone)`` of process ``pid`` after exit ``events`` (``(tid, tgid, status)``):
    its main thread's status is the process's (a group exit, by ``exit`` or a signal, gives every
    thread its code), or the last nonzero one of a thread that ends after the main thread (a main
    thread that called ``pthread_exit`` ends with 0, and the group's code comes later); a thread
    that ends with 0 after a nonzero status (one Frida was starting as a signal killed the group)
    and the threads that end before the main thread (an injected agent's helpers: status 0) tell
    nothing of the process's end."""
    for tid, tgid, code in events:
        if tgid == pid and (tid == tgid or (leader_gone and (code or not status))):
            status, leader_gone = code, True
    return status, leader_gone


class ExitStatus:
    """Watch child ``pid`` (spawned, not yet resumed) for its wait status; :meth:`get` reads it."""

    def __init__(self, pid: int):
        self.pid = pid
        self._status: Optional[int] = None
        self._leader_gone = False  # the main thread's exit was seen: a process's end has come
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._sock = connector()
        self._peeked = threading.Event()
        if self._sock is not None:
            threading.Thread(target=self._listen, name="phasescope-exit-events", daemon=True).start()
        else:
            threading.Thread(target=self._peek, name="phasescope-exit-peek", daemon=True).start()

    def _listen(self) -> None:
        """Keep the socket drained (the kernel drops what overflows its buffer) until closed."""
        while not self._closed.wait(0.2):
            self._drain()

    def _drain(self) -> None:
        with self._lock:
            while self._sock is not None:
                try:
                    data = self._sock.recv(1 << 16, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    return
                except OSError as e:
                    if e.errno == errno.ENOBUFS:  # events were lost meanwhile; later ones still come
                        continue
                    return
                self._status, self._leader_gone = process_status(self.pid, exit_events(data), self._status,
                                                                 self._leader_gone)

    def _peek(self) -> None:
        """Frida's injector ptraces the target from a thread of this process, so waitid also reports
        its trap stops (a SIGSEGV at injection), WEXITED or not: those are skipped, not an end."""
        while True:
            try:
                info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            except OSError:  # Frida reaped it first
                info = None
            if info is None or info.si_code in (os.CLD_EXITED, os.CLD_KILLED, os.CLD_DUMPED):
                break
            time.sleep(0.01)  # reported until the tracer takes it (WNOWAIT leaves it)
        if info is not None:
            self._status = (info.si_status << 8 if info.si_code == os.CLD_EXITED
                            else info.si_status | (0x80 if info.si_code == os.CLD_DUMPED else 0))
        self._peeked.set()

    def get(self, timeout: float = 1.0) -> Optional[int]:
        """The wait status of the ended process, None if not learnt within ``timeout`` s. The
        kernel sends the exit event just after it tells the parent (Frida; do_exit: exit_notify,
        then proc_exit_connector), so the event can trail the end Frida reports by a moment."""
        if self._sock is None:
            self._peeked.wait(timeout)
            return self._status
        end = time.monotonic() + timeout
        while True:
            self._drain()
            if self._leader_gone or time.monotonic() >= end:
                return self._status if self._leader_gone else None
            time.sleep(0.02)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
