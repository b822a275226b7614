"""Live tracing session: attach to or spawn a process, load the agent, stream typed events.

Usage (the live monitor is built on this): ``with TraceSession(device, resolve_target(device,
argv=["./prog"]), interval=10_000_000) as s:``, then ``for event in s.events(timeout=0.1)``
(None on a timeout; the last event is :class:`Ended`).

Events, in the order the agent produced them:

* :class:`IntervalEvent` -- ``.interval`` is an :class:`~phasescope.engine.interval.Interval`
* :class:`ModulesChanged` -- ``.added`` (Modules), ``.removed`` (bases), in ``session.modules`` already
* :class:`ThreadStarted` / :class:`ThreadExited` -- ``.tid``
* :class:`Forked` -- ``.pid`` of a child the target forked; children are not traced
* :class:`Dropped` -- running totals ``.records``/``.instructions`` of intervals the agent had to
  drop because the host fell behind (its output buffers are bounded)
* :class:`Output` -- ``.fd``, ``.data`` written by a target spawned with ``stdio="pipe"``
* :class:`AgentError` -- ``.message``: the agent hit an error after loading (first line)
* :class:`Unfollowable` -- ``.reason``: exact mode cannot follow part of the program (a runtime)
* :class:`Ended` -- ``.how`` is ``"exited"`` (``.code``), ``"crashed"`` (``.signal``), ``"killed"``
  (no exit call; ``.signal`` when known), ``"exec"`` (``.program`` replaced it, untraced),
  ``"detached"`` (``stop()``; target left running) or ``"lost"`` (the connection to the agent
  ended: how the target ended is not known)

Flow control: the agent keeps at most ``window`` bytes of interval data in flight; the host acks messages
once :meth:`TraceSession.events` has handed out their intervals (a slow consumer makes the agent buffer,
then drop and report), in batches of at least an eighth of the window: each ack wakes the target's
threads (sqlite3 bench: one ack a message cost 0.31 s of CPU, batched 0.25 s)."""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Union

import frida

from phasescope.errors import InputError, PhasescopeError
from phasescope.resources import joined, js_place, with_js_places
from phasescope.sources import wire
from phasescope.sources.agent import REP_COUNTS, agent_options, ignored_signals
from phasescope.sources.agent_queries import AgentQueries
from phasescope.sources.calls import (BLOCKED_WAIT, DETACH_TIMEOUT, GONE, STOP_TIMEOUT, BoundedRpc, attach_failed,
                                     bounded, detach_session, first_line, kill_quietly, unload, unload_stuck_line)
from phasescope.sources.device import Target, is_local, resolve_target
from phasescope.sources.events import (SAMPLED_INSTEAD, unasked_end, AgentError, Dropped, Ended, Forked, IntervalEvent,
                                      ModulesChanged, Output, ThreadExited, ThreadStarted, Unfollowable)
from phasescope.sources.exit_status import ExitStatus
from phasescope.sources.modules import Module, ModuleMap, library_name
from phasescope.sources.procfs import main_thread_cpu, process_cpu
from phasescope.sources.protocol import Agent, Locality
from phasescope.sources.signal_mask import UNLOAD_WAIT, give_back, main_thread_mask
from phasescope.sources.stdio import PipedStdio, with_default_signals
from phasescope.sources.stopped import Continued, end_stuck_helpers, session_of


@dataclass
class _Ack:
    nbytes: int


class _FinalAck:
    """The target is about to end and its agent waits: run ``before_final_ack``, then release it."""


#: seconds an ending target waits for a consumer that stopped reading events before it is released
#: anyway (a consumer that is only behind, e.g. a host busy with --locality windows, gets there first)
FINAL_ACK_GRACE = 15.0
#: seconds the end of a piped target waits for the end of its output
OUTPUT_GRACE = 5.0
#: seconds between looks for a Frida helper stuck behind a dead target while no event comes
STUCK_POLL = 1.0


class TraceSession(AgentQueries):
    """One traced process. Thread-safe: Frida callbacks feed a queue that :meth:`events` drains.

    ``interval``: instructions per interval and thread. ``stdio``: a spawned target's stdio is
    inherited, or piped into :class:`Output` events. ``slots``: counters per thread (blocks beyond
    share one slot with PC 0). ``buffer_bytes``: each of the agent's two output buffers.
    ``window``: bytes of records in flight before the agent waits for the host. ``bare``: plain
    ``Stalker.follow`` without counters (benchmark baseline; no intervals); ``"handled"``: with exact
    mode's handling of runtimes (AC, OF, faults), the JVM's baseline (bench/jvm_cost.py). ``watch``:
    no Stalker at all; the agent only reports modules, threads and the end (sampled mode).
    ``trust_threshold``: ``Stalker.trustThreshold`` (None: Frida's default). ``counter_source``: C
    source of the hot path instead of the shipped ``agent/*.c``. ``portable``: count with
    a C callout per block (the path used where no inline fast path exists, e.g. arm64) on x86-64 too.
    ``locality``: sample windows of memory addresses (``{"window": N, "every": M}``; inline path
    only), attached to intervals as ``Interval.locality``. ``rep_count``: a rep string instruction
    counts its ``"iterations"`` (callgrind's count) or ``"once"`` (the hardware's, exp-bbv's).
    """

    def __init__(
        self,
        device,
        target: Target,
        interval: int = 10_000_000,
        stdio: str = "inherit",
        slots: int = 1 << 18,
        buffer_bytes: int = 16 << 20,
        window: int = 32 << 20,
        bare: Union[bool, str] = False,
        watch: bool = False,
        trust_threshold: Optional[int] = None,
        counter_source: Optional[str] = None,
        portable: bool = False,
        locality: Optional[dict] = None,
        rep_count: str = "iterations",
    ):
        if slots < 16:
            raise InputError(f"slots must be at least 16, got {slots}")
        if stdio not in ("inherit", "pipe"):
            raise InputError(f"stdio must be 'inherit' or 'pipe', got {stdio!r}")
        if rep_count not in REP_COUNTS:
            raise InputError(f"rep_count must be one of {', '.join(REP_COUNTS)}, got {rep_count!r}")
        self.device = device
        self.target = target
        self.interval = int(interval)
        self.stdio = stdio
        self.bare = bare
        self._options = agent_options(interval=self.interval, slots=slots, buffer_bytes=buffer_bytes, window=window,
                                      bare=bare, watch=watch, trust_threshold=trust_threshold, portable=portable,
                                      locality=locality, counter_source=counter_source, rep_count=rep_count)
        self._pending_windows: dict = {}
        self._ack_batch = max(1, self._options["window"] // 8)
        self._unacked = 0  # bytes consumed but not yet acknowledged to the agent
        self.modules = ModuleMap()
        self.pid: Optional[int] = None
        self._sid: Optional[int] = None  # the target's session id, once it is known
        self.fast_path = False  # True: the agent counts with inline code (x86-64); False: a callout a block
        self.threads: set = set()
        self.dropped = Dropped(0, 0)
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._session = None
        self._script = None
        self._ended: Optional[Ended] = None
        self._final: Optional[Ended] = None  # what the agent said before the session went away
        self._stopping = False  # stop() is detaching: a target that ends meanwhile was not killed
        self._query = BoundedRpc()  # symbol and code lookups, which a stopped target never answers
        #: why stop() gave up waiting for the agent (None: it did not)
        self.abandoned: Optional[str] = None
        #: stop() got every interval but gave up on unloading the agent (None: it unloaded)
        self.unload_stuck: Optional[str] = None
        #: stop() continued a stopped target for the agent to unload (the line that says so; None: it did not)
        self.restopped: Optional[str] = None
        self._pending_end: Optional[Ended] = None  # the end, held back until piped output is done
        self._open_fds: set = {1, 2} if (stdio == "pipe" and target.spawn) else set()
        self._errors: list = []
        self._stdio: Optional[PipedStdio] = None  # pipe mode: the spawned target's pipes
        self._exit_status: Optional[ExitStatus] = None  # a spawned target's wait status (Frida reaps it)
        self._final_pending = False  # the agent holds the ending thread until the final ack
        #: time.perf_counter() just before a spawned target was resumed (None: attached)
        self.resumed_at: Optional[float] = None
        #: time.perf_counter() when the agent said the target exits (or crashes, or execs)
        self.final_at: Optional[float] = None
        #: CPU seconds of the target's main thread then (the agent holds the ending thread); None if unread
        self.final_cpu: Optional[float] = None
        #: CPU seconds of all its threads then, exited ones included (a JVM works off main); None if unread
        self.final_process_cpu: Optional[float] = None
        #: called from :meth:`events` when the target is about to end and the agent can still
        #: answer (symbols, code): the last chance to look things up in a process that exits
        self.before_final_ack: Optional[Callable[[], None]] = None

    # -- lifecycle -------------------------------------------------------------------------------

    mode = "exact"
    capabilities = (Locality, Agent)  # no Bursts: exact mode follows every interval already

    def describe_mode(self) -> str:
        return "exact"

    def info(self) -> dict:
        """What the summary records of how the program was seen."""
        return {"mode": "exact", "interval": self.interval, "rep_count": self._options["repCount"]}

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self, before_resume: Optional[Callable[[int], None]] = None) -> "TraceSession":
        """Attach or spawn, load the agent, follow every thread, resume a spawned target.
        ``before_resume(pid)`` runs once the agent follows the threads, before a spawned target runs."""
        spawned = None
        try:
            if self.target.spawn:
                spawned = self._spawn()
                self.pid = spawned
                self._exit_status = ExitStatus(spawned) if is_local(self.device) else None
                if self._stdio is not None:
                    self._stdio.start(self._on_output)
            else:
                self.pid = self.target.pid if self.target.pid is not None else resolve_target(self.device, name=self.target.name).pid
            self._attach()
            self._sid = session_of(self.pid)  # a dead target's orphaned helpers are of its session
            self._load()
            try:
                started = self._script.exports_sync.start(spawned)
            except GONE as e:
                raise PhasescopeError(f"pid {self.pid} ended while phasescope started: {first_line(e)}") from None
            if started["refused"] is not None:
                raise InputError(f"exact mode cannot follow {started['refused']}; {SAMPLED_INSTEAD}")
            tids = started["threads"]
            if before_resume is not None:
                before_resume(self.pid)
            if spawned is not None:
                self.resumed_at = time.perf_counter()
                self.device.resume(spawned)
                try:
                    self._script.exports_sync.resumed()
                except GONE:
                    pass  # it already ended; the end arrives as an event
            with self._lock:
                self.threads.update(int(t) for t in tids)
        except BaseException:
            if spawned is not None:
                kill_quietly(self.device, spawned)
            self._teardown()
            raise
        return self

    def _pid_of(self, name: str) -> int:
        return resolve_target(self.device, name=name).pid

    def _spawn(self) -> int:
        argv = self.target.argv
        try:
            if self.stdio == "pipe":
                self._stdio = PipedStdio()
                return self._stdio.spawn(lambda: with_default_signals(self.device.spawn, argv, stdio="inherit"))
            return with_default_signals(self.device.spawn, argv, stdio=self.stdio)
        except frida.ExecutableNotFoundError:
            raise InputError(f"no such program: {argv[0]}") from None
        except frida.PermissionDeniedError as e:
            raise PhasescopeError(f"permission denied: cannot spawn {argv[0]}: {first_line(e)}") from None
        except (frida.NotSupportedError, frida.InvalidArgumentError) as e:
            raise InputError(f"cannot run {argv[0]}: {first_line(e)}") from None

    def _attach(self) -> None:
        self._options["ignored"] = ignored_signals(self.pid) if is_local(self.device) else []  # before the injection
        mask = main_thread_mask(self.pid) if is_local(self.device) else None  # the injection clears it
        try:
            self._session = self.device.attach(self.pid)
        except frida.ProcessNotFoundError:
            raise InputError(f"no such process: pid {self.pid}") from None
        except frida.PermissionDeniedError as e:
            hint = ("phasescope already runs as root: the kernel refuses to trace it (init, a process that "
                    "another tracer holds, or a security policy)" if os.geteuid() == 0
                    else "run as the process owner or as root")
            raise InputError(f"permission denied attaching to pid {self.pid} ({first_line(e)}); {hint}") from None
        except (frida.ProcessNotRespondingError, frida.NotSupportedError, frida.TransportError, frida.ProtocolError) as e:
            spawned = (self.target.describe(), self._exit_status) if self.target.spawn and self._exit_status else None
            raise attach_failed(e, self.pid, spawned) from None
        self._session.on("detached", self._on_detached)
        give_back(self.pid, mask)

    def _load(self) -> None:
        try:
            self._script = self._session.create_script(joined("js"), name="phasescope")
            self._script.on("message", self._on_message)
            self._script.load()
            info = self._script.exports_sync.init(self._options)
            self.fast_path = bool(info["fast"])
        except (frida.InvalidArgumentError, frida.InvalidOperationError, frida.TransportError, frida.core.RPCException) as e:
            raise PhasescopeError(f"agent failed to load into pid {self.pid}: {with_js_places(first_line(e))}") from None
        if self._errors:
            raise PhasescopeError(f"agent failed to load into pid {self.pid}: {self._errors[0]}")

    def kill(self) -> None:
        """Terminate the target (one that has already gone is no error)."""
        kill_quietly(self.device, self.pid)

    def stop(self) -> None:
        """Detach cleanly: unfollow every thread, ship partial intervals, unload; target keeps running."""
        self._stopping = True
        mask = main_thread_mask(self.pid) if is_local(self.device) and self.pid else None  # the unload clears it
        self._post_final_ack()  # an ending target waits for it: the unload would wait on that thread
        script = self._script
        ask = script is not None and self._ended is None and self._final is None
        answer: dict = {}  # the stop RPC's: every interval has been shipped

        def stop_agent():
            if ask:
                try:
                    reply = script.exports_sync.stop()
                    answer.update(reply if isinstance(reply, dict) else {})
                except (frida.InvalidOperationError, frida.TransportError, frida.core.RPCException):
                    pass  # the process went away meanwhile; its end is reported by _on_detached

        # Neither Frida call has a timeout: a target that cannot run (a debugger, a starved
        # machine) would hang phasescope forever. Give up after STOP_TIMEOUT, and say so. One the
        # user stopped (SIGSTOP, Ctrl-Z) runs until the agent is out, then is stopped again: an
        # agent left half-way can leave Frida's helper behind (sources/stopped.py).
        continued = Continued(self.pid)
        begun = time.monotonic()
        finished = bounded(stop_agent, STOP_TIMEOUT, "phasescope-stop", tick=continued.poll)
        answered = finished  # read once: an answer that comes after the bound is not waited for
        blocked = (answer.get("blocked") or []) if answered else []
        if finished:  # the unload waits for a thread asleep in Stalker's copies until its call returns
            left = STOP_TIMEOUT - (time.monotonic() - begun)
            finished = bounded(lambda: unload(script), min(left, BLOCKED_WAIT) if blocked else left,
                               "phasescope-unload", tick=continued.poll)
        self.restopped = continued.restore(finished)
        if not answered:
            self.abandoned = (f"the agent in pid {self.pid} did not answer within {STOP_TIMEOUT:g} s "
                              "(is the target stopped?); its last partial intervals are lost")
        elif not finished:  # a thread asleep in traced code, or a hot loop that never re-enters Stalker's dispatcher
            self.unload_stuck = unload_stuck_line(self.pid, blocked)
        self._script = None
        self._teardown(detach_timeout=BLOCKED_WAIT if blocked and not finished else DETACH_TIMEOUT)
        give_back(self.pid, mask, UNLOAD_WAIT)
        with self._lock:
            if self._ended is None:
                self._ended = self._final or Ended("detached")
                self._queue.put(self._ended)
            else:
                self._release_end_locked()

    def _teardown(self, detach_timeout: float = DETACH_TIMEOUT) -> None:
        self._post_final_ack()
        script, session = self._script, self._session
        self._script = None
        unload(script)
        if session is not None:
            detach_session(session, detach_timeout)
        if self.pid is not None:
            end_stuck_helpers(self.pid)  # the target died while the agent changed a thread
        for held in (self._stdio, self._exit_status, self._hotspot):  # the JVM's memory: agent_queries
            if held is not None:
                held.close()

    # -- events ----------------------------------------------------------------------------------

    def events(self, timeout: Optional[float] = None) -> Iterator:
        """Yield events until :class:`Ended`, None whenever none came within ``timeout``; meanwhile
        end Frida helpers stuck behind a dead target (else its end never comes: stopped.py)."""
        waited = 0.0
        while True:
            step = STUCK_POLL if timeout is None else max(0.0, min(STUCK_POLL, timeout - waited))
            try:
                event = self._queue.get(timeout=step)
            except queue.Empty:
                end_stuck_helpers(self.pid, orphans_of=self._sid)
                waited += step
                if timeout is not None and waited >= timeout:
                    waited = 0.0
                    yield None
                continue
            waited = 0.0
            if isinstance(event, _Ack):
                self._ack(event.nbytes)
                continue
            if isinstance(event, _FinalAck):
                try:
                    if self.before_final_ack is not None:
                        self.before_final_ack()
                finally:
                    self._post_final_ack()
                continue
            yield event
            if isinstance(event, Ended):
                return

    def _ack(self, nbytes: int) -> None:
        self._unacked += nbytes
        script = self._script
        if script is None or self._unacked < self._ack_batch:
            return
        nbytes, self._unacked = self._unacked, 0
        try:
            script.post({"type": "ack", "bytes": nbytes})
        except (frida.InvalidOperationError, frida.TransportError):
            pass

    @property
    def ended(self) -> Optional[Ended]:
        return self._ended

    def _on_output(self, fd: int, data: bytes) -> None:
        if data:
            self._queue.put(Output(fd, data))
            return
        with self._lock:  # end of file on fd
            self._open_fds.discard(fd)
            if not self._open_fds:
                self._release_end_locked()

    def _on_detached(self, reason, crash) -> None:
        asked = reason == "process-terminated" and self._final is None and self._ended is None  # the agent said nothing
        status = self._exit_status.get() if asked and self._exit_status else None
        with self._lock:
            if self._ended is not None:
                return
            if reason == "application-requested" or (self._stopping and self._final is None):
                # stop() reports the end; a target that ends on its own while we unload the agent
                # (its exit hook already gone) must not be reported as killed
                return
            gone = None if not is_local(self.device) or self.pid is None else not os.path.exists(f"/proc/{self.pid}")
            ended = self._final or unasked_end(reason, crash and crash.summary, gone, status)
            self._ended = ended
            self._pending_end = ended
            if not self._open_fds:
                self._release_end_locked()
                return
        # Piped output can trail the end: reported after EOF on stdout and stderr, or OUTPUT_GRACE
        timer = threading.Timer(OUTPUT_GRACE, self._release_end)
        timer.daemon = True
        timer.start()

    def _release_end(self) -> None:
        with self._lock:
            self._release_end_locked()

    def _release_end_locked(self) -> None:
        if self._pending_end is not None:
            self._queue.put(self._pending_end)
            self._pending_end = None

    def _on_message(self, message, data) -> None:
        if message["type"] == "error":
            text = first_line(message.get("description", "agent error"))
            if message.get("fileName") == "/phasescope.js" and "lineNumber" in message:
                text += f" ({js_place(message['lineNumber'])})"
            self._errors.append(text)
            self._queue.put(AgentError(text))
            return
        meta = message["payload"]
        kind = meta["type"]
        put = self._queue.put
        if kind == "data":
            with self._lock:
                self.threads.update(meta["started"])
                self.threads.difference_update(meta["exited"])
            for tid in meta["started"]:
                put(ThreadStarted(tid))
            if meta["dropped_records"] != self.dropped.records:
                self.dropped = Dropped(meta["dropped_records"], meta["dropped_instructions"])
                put(self.dropped)
            if data:
                for interval in wire.decode(data, self.modules, self._pending_windows):
                    put(IntervalEvent(interval))
                put(_Ack(meta["bytes"]))
            for tid in meta["exited"]:
                put(ThreadExited(tid))
            for pid in meta["forked"]:
                put(Forked(pid))
        elif kind == "modules":
            added = [_module(t) for t in meta["modules"]]
            for m in added:
                self.modules.add(m)
            put(ModulesChanged(added=added))
        elif kind == "module-added":
            m = _module(meta["module"])
            self.modules.add(m)
            put(ModulesChanged(added=[m]))
        elif kind == "module-removed":
            base = int(meta["base"], 0)
            self.modules.remove(base)
            put(ModulesChanged(removed=[base]))
        elif kind == "unfollowable":
            put(Unfollowable(meta["reason"]))
        elif kind in ("exit", "crash", "exec"):
            if kind == "exit":
                self._final = Ended("exited", code=meta["status"])
            elif kind == "crash":
                self._final = Ended("killed" if meta.get("killed") else "crashed", signal=meta["signal"])
            else:
                self._final = Ended("exec", program=meta["path"])
            self.final_at = time.perf_counter()
            if self.pid is not None:
                self.final_cpu = main_thread_cpu(self.pid)
                self.final_process_cpu = process_cpu(self.pid)
            self._final_pending = True
            put(_FinalAck())
            timer = threading.Timer(FINAL_ACK_GRACE, self._post_final_ack)  # a consumer that stopped reading
            timer.daemon = True
            timer.start()

    def _post_final_ack(self) -> None:
        """Release the agent's ending thread (once)."""
        with self._lock:
            if not self._final_pending:
                return
            self._final_pending = False
            script = self._script
        if script is not None:
            try:
                script.post({"type": "final-ack"})
            except (frida.InvalidOperationError, frida.TransportError):
                pass


def _module(t) -> Module:
    name, base, size, path = t
    return Module(name=library_name(path, name) if path else name, base=int(base, 0), size=int(size), path=path)
