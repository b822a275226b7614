"""The event stream (``--events ADDRESS``): JSON Lines events served to any number of clients,
for a policy (a scheduler, a JIT, a logger) to act on phases as they happen.

ADDRESS is ``unix:PATH`` (a Unix stream socket, removed on close) or ``tcp:HOST:PORT`` (HOST is
required; only a loopback address unless ``--events-allow-remote``). Trust model: there is no
authentication; anyone who can connect sees the target's code keys, phases and timings, so
protect the socket with file permissions (its directory) or keep TCP on loopback.

Every client gets ``hello`` first (also when it connects mid-run), then the events in order.
Each client has a bounded queue and its own writer thread: a slow or vanished client never
blocks tracing or the other sinks. When its queue is full, events for that client are dropped
and counted; once there is room again it gets ``{"event": "dropped", "count": N, "total": T}``
before the next event. Each line carries ``sent_ns`` (CLOCK_REALTIME when the writer sent it).
Events and their fields are listed in docs/events-and-policies.md.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
import stat
import threading
import time
from collections import deque
from typing import Deque, List, Optional

from phasescope.engine import Interval, IntervalResult
from phasescope.engine.stats import PhaseStats
from phasescope.errors import InputError
from phasescope.sinks.base import Sink
from phasescope.formats.log import process_fields, relabel_fields

SCHEMA = 1
UNIX_PATH_MAX = 107  # bytes of a Unix socket path (sun_path holds 108 with the terminating NUL)
QUEUE_EVENTS = 4096  # per client
TOP_KEYS = 8  # blocks listed in phase_new
SNDBUF = 64 * 1024  # kernel buffer per client: past it, events wait (bounded) in the client's queue
DRAIN_S = 1.0  # at close, how long clients get to read what is queued


def parse_address(address: str, allow_remote: bool = False, option: str = "--events"):
    """``("unix", path)`` or ``("tcp", host, port, addrinfo)``; InputError (naming ``option``) on a
    malformed or refused address: a non-loopback host needs ``allow_remote`` (``{option}-allow-remote``)."""
    kind, sep, rest = address.partition(":")
    if not sep or kind not in ("unix", "tcp"):
        raise InputError(f"{option} {address!r}: expected unix:PATH or tcp:HOST:PORT")
    if kind == "unix":
        if not rest:
            raise InputError(f"{option} {address!r}: empty socket path")
        return ("unix", rest)
    host, sep, port = rest.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host:
        raise InputError(f"{option} {address!r}: give the host to bind, e.g. tcp:127.0.0.1:{port or 9999}")
    try:
        port_n = int(port)
        if not 0 <= port_n <= 65535:
            raise ValueError
    except ValueError:
        raise InputError(f"{option} {address!r}: bad port {port!r}") from None
    try:
        infos = socket.getaddrinfo(host, port_n, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise InputError(f"{option} {address!r}: cannot resolve {host!r}: {e.strerror}") from None
    if not allow_remote:
        for info in infos:
            if not ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback:
                raise InputError(f"{option} {address!r}: {host} is not a loopback address; anyone who can "
                                 "connect sees code addresses and phases (no authentication): pass "
                                 f"{option}-allow-remote to serve it anyway")
    return ("tcp", host, port_n, infos[0])


class _Client:
    """One connected client: a bounded queue drained by a writer thread."""

    def __init__(self, sock: socket.socket, peer: str, limit: int, on_gone):
        self.sock = sock
        self.peer = peer
        self.limit = limit
        self.queue: Deque[str] = deque()
        self.cond = threading.Condition()
        self.dropped = 0  # since the last dropped event
        self.dropped_total = 0
        self.sent = 0
        self.closing = False
        self.gone = False
        self._on_gone = on_gone
        self.thread = threading.Thread(target=self._write_loop, name=f"events-{peer}", daemon=True)

    def put(self, line: str, force: bool = False) -> None:
        """Queue one serialized event (without its closing brace); never blocks."""
        with self.cond:
            if self.gone:
                return
            if len(self.queue) >= self.limit and not force:
                self.dropped += 1
                self.dropped_total += 1
                return
            if self.dropped:
                self.queue.append(_encode({"event": "dropped", "count": self.dropped, "total": self.dropped_total}))
                self.dropped = 0
            self.queue.append(line)
            self.cond.notify()

    def _write_loop(self) -> None:
        try:
            while True:
                with self.cond:
                    while not self.queue and not self.closing:
                        self.cond.wait()
                    if not self.queue:
                        return
                    batch = list(self.queue)
                    self.queue.clear()
                now = time.time_ns()
                data = "".join(f'{line},"sent_ns":{now}}}\n' for line in batch).encode()
                self.sock.sendall(data)
                self.sent += len(batch)
        except OSError:
            pass  # the client went away (or close() shut the socket): forget it
        finally:
            with self.cond:
                self.gone = True
                self.queue.clear()
            try:
                self.sock.close()
            except OSError:
                pass
            self._on_gone(self)

    def finish(self) -> None:
        """Write what is queued, then end."""
        with self.cond:
            self.closing = True
            self.cond.notify()


def _encode(event: dict) -> str:
    """One event serialized without its closing brace (the writer appends ``sent_ns``)."""
    text = json.dumps(event, separators=(",", ":"))
    return text[:-1]


class EventServer(Sink):
    """Serve JSON Lines events on a Unix or TCP socket. Binds in the constructor, so a bad
    address fails (InputError, exit 2) before the target is touched."""

    watched = True  # its clients read the run as it goes

    def __init__(self, address: str, allow_remote: bool = False, queue_events: int = QUEUE_EVENTS):
        self.address = address
        self.queue_events = queue_events
        parsed = parse_address(address, allow_remote)
        self.kind = parsed[0]
        self.path: Optional[str] = None
        self._inode = None
        if self.kind == "unix":
            self.path = parsed[1]
            self.sock = self._bind_unix(self.path)
        else:
            self.sock = self._bind_tcp(parsed)
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.bound = self.sock.getsockname()
        if self.kind == "tcp":  # the port the kernel chose for tcp:HOST:0
            self.address = f"tcp:{parsed[1]}:{self.bound[1]}"
        self.served = 0  # clients accepted
        self.clients: List[_Client] = []
        self.gone: List[_Client] = []  # clients that went away (their drop counts stay readable)
        self._lock = threading.Lock()
        self._hello: Optional[str] = None
        self._stop = False
        self._accept = threading.Thread(target=self._accept_loop, name="events-accept", daemon=True)
        self._accept.start()

    # -- binding --------------------------------------------------------------------------------

    def _bind_unix(self, path: str) -> socket.socket:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise InputError(f"--events unix:{path}: {e.strerror}") from None
        if st is not None:
            if not stat.S_ISSOCK(st.st_mode):
                raise InputError(f"--events unix:{path}: exists and is not a socket")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(path)
                raise InputError(f"--events unix:{path}: in use by another process")
            except (ConnectionRefusedError, FileNotFoundError):
                os.unlink(path)  # a stale socket from a run that died
            except OSError as e:
                raise InputError(f"--events unix:{path}: {e.strerror}") from None
            finally:
                probe.close()
        size = len(os.fsencode(path))
        if size > UNIX_PATH_MAX:
            raise InputError(f"--events unix:{path}: the path is {size} bytes, longer than a socket path may be "
                             f"({UNIX_PATH_MAX}); use a shorter one")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(path)
        except OSError as e:
            sock.close()
            raise InputError(f"--events unix:{path}: cannot bind: {e.strerror or e}") from None
        self._inode = os.stat(path).st_ino
        return sock

    def _bind_tcp(self, parsed) -> socket.socket:
        _, host, port, info = parsed
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(info[4][:2] if info[0] == socket.AF_INET else info[4])
        except OSError as e:
            sock.close()
            why = "port in use" if e.errno == errno.EADDRINUSE else e.strerror
            raise InputError(f"--events tcp:{host}:{port}: cannot bind: {why}") from None
        return sock

    # -- clients --------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._stop:
            try:
                conn, peer = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return  # closed
            conn.settimeout(None)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF)
            if self.kind == "tcp":
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client = _Client(conn, str(peer) or "unix", self.queue_events, self._forget)
            with self._lock:
                if self._stop:
                    conn.close()
                    return
                if self._hello is not None:
                    client.put(self._hello)
                self.clients.append(client)
                self.served += 1
                # started under the lock: close() joins every listed client's thread
                client.thread.start()

    def _forget(self, client: _Client) -> None:
        with self._lock:
            if client in self.clients:
                self.clients.remove(client)
                self.gone.append(client)

    def _broadcast(self, events: List[dict], force: bool = False) -> None:
        lines = [_encode(e) for e in events]
        with self._lock:
            for c in self.clients:
                for line in lines:
                    c.put(line, force)

    @property
    def dropped(self) -> int:
        """Events dropped for all clients, so far."""
        with self._lock:
            return sum(c.dropped_total for c in self.clients + self.gone)

    # -- the sink -------------------------------------------------------------------------------

    def on_start(self, info: dict) -> None:
        hello = {"event": "hello", "schema": SCHEMA, "target": info.get("target"), "pid": info.get("pid"),
                 "mode": info.get("mode"), "config": info.get("config")}
        line = _encode(hello)
        with self._lock:
            self._hello = line
            for c in self.clients:
                c.put(line)

    def on_interval(self, r: IntervalResult, iv: Interval) -> None:
        events = [{"event": "interval", "thread": r.thread, "seq": r.seq, "thread_seq": r.thread_seq,
                   "phase": r.phase, "distance": r.distance, "new_phase": r.new_phase,
                   "instructions": r.instructions, "samples": iv.samples if iv.mode == "sampled" else None,
                   "cpu_ns": iv.cpu_ns, "partial": iv.partial, "end_ns": iv.end_ns, **relabel_fields(r)}]
        if r.merged is not None:
            events.append({"event": "phase_merge", "from": r.merged[0], "into": r.merged[1], "seq": r.seq})
        if r.new_phase:
            top = PhaseStats(r.phase)
            top.sample_top(iv)
            events.append({"event": "phase_new", "phase": r.phase, "seq": r.seq, "thread": r.thread,
                           "top_code": [{"key": b["key"], "share": b["share"]} for b in top.top_code(TOP_KEYS)]})
        if r.phase_changed:
            events.append({"event": "phase_change", "thread": r.thread, "from": r.previous_phase, "to": r.phase,
                           "time": iv.end_ns, "seq": r.seq})
        events.append({"event": "prediction", "thread": r.thread, "seq": r.seq, "phase": r.prediction,
                       "confidence": r.confidence, "expected_remaining": r.expected_remaining})
        who = process_fields(iv)  # system-wide runs: every event says its process
        if who:
            for e in events:
                e.update(who)
        self._broadcast(events)

    def on_end(self, summary: dict) -> None:
        self._broadcast([{"event": "end", **(summary.get("end") or {})}], force=True)

    def summary_sections(self) -> dict:
        """How the stream went (the end event is never dropped: these do not change at the end)."""
        return {"events": {"address": self.address, "clients": self.served, "dropped": self.dropped}}

    def close(self) -> None:
        with self._lock:
            self._stop = True
            clients = list(self.clients)
        for c in clients:
            c.finish()
        deadline = time.monotonic() + DRAIN_S
        for c in clients:
            c.thread.join(max(0.0, deadline - time.monotonic()))
        for c in clients:
            if c.thread.is_alive():  # a client that does not read: cut it off
                try:
                    c.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._accept.join(1.0)
        self.sock.close()
        if self.path is not None:
            try:
                if os.stat(self.path).st_ino == self._inode:
                    os.unlink(self.path)
            except OSError:
                pass
