"""Zero-touch sampled mode: the kernel alone tells phasescope about the target, nothing is injected.

``--mode sampled`` without ``--bursts`` uses this session: no agent, no ptrace. A spawned target
is forked by phasescope and held before ``exec`` until its inherited events are open (with ctypes
alone: the sampler, which needs numpy, loads once it runs), so it is sampled from its first
instruction; an attached one is sampled from the next tick. The
modules come from /proc/PID/maps (the sampler re-reads it for code it has not seen, after
``exec`` and ``dlopen``), the threads from the sampler's FORK/EXIT records (forked children
inherit the events and are followed too: their windows carry ``pid`` and ``comm``), the end from
``waitpid`` (spawned: the exit status or signal) or from the process leaving /proc (attached),
and names from the ELF files on disk (:mod:`phasescope.sources.elf_symbols`) and, for JIT code, the
process's perf map (:mod:`phasescope.sources.perf_map`). Code for the hot
blocks is read from /proc/PID/mem while the process lives. Exact bursts need Stalker, so
``--bursts`` keeps the watching agent (:mod:`phasescope.sources.sampled_session`).

The session has the interface the live loop uses of :class:`~phasescope.sources.session.TraceSession`.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional

from phasescope.engine.interval import Interval
from phasescope.errors import InputError, PhasescopeError
from phasescope.sources.device import Target, has_ended, is_zombie
from phasescope.sources.events import ChildEnded, Ended, IntervalEvent, ended_of_status, Output, ThreadExited, ThreadStarted
from phasescope.sources.protocol import Wakes
from phasescope.sources.sampled_source import DEFAULT_PERIOD_NS, DEFAULT_WINDOW_SAMPLES, SampledSource, check_sampling
from phasescope.sources.perf_event import OpenedEvents, open_events
from phasescope.sources.procfs import stat_fields
from phasescope.sources.stdio import PipedStdio, default_signals, fork_held

if TYPE_CHECKING:  # both load numpy: a spawned target starts before they do
    from phasescope.sources.modules import ModuleMap
    from phasescope.sources.sampler import Sampler

QUIET = 1.0  # seconds :meth:`KernelSession.events` waits for data before it yields None


class KernelSession(SampledSource):
    """One process, sampled with nothing in it (see the module docstring). ``wake_every``: seconds
    of a thread's CPU time whose windows one wake-up may bring (0: each as it completes; the
    command's choice, :func:`~phasescope.commands.sources.wake_every`)."""

    capabilities = (Wakes,)  # no agent: no bursts, no locality windows
    final_at: Optional[float] = None
    final_cpu: Optional[float] = None

    def __init__(self, target: Target, stdio: str = "inherit", rate_hz: int = 10**9 // DEFAULT_PERIOD_NS,
                 window_samples: int = DEFAULT_WINDOW_SAMPLES, kernel: bool = False, stacks: bool = True,
                 wake_every: float = 0.0):
        check_sampling(rate_hz, window_samples)
        self.target = target
        self.stdio = stdio
        self.rate_hz = rate_hz
        self.period_ns = 10**9 // rate_hz
        self.window_samples = window_samples
        self.kernel = kernel
        #: how the sampler's events are opened (:func:`~phasescope.sources.perf_event.open_events` too)
        self._sampling = dict(period_ns=self.period_ns, kernel=kernel, children=True, stacks=stacks,
                              window_samples=window_samples, wake_every=wake_every)
        self.pid: Optional[int] = None
        self.sampler: Optional["Sampler"] = None
        self.ended: Optional[Ended] = None
        self.resumed_at: Optional[float] = None
        self._queue: "queue.Queue" = queue.Queue()
        self._stdio: Optional[PipedStdio] = None
        self._stopping = False
        self._reaped = False  # a spawned target's exit status has been collected
        self._known: set = set()
        #: written to end the live loop's wait: an event queued by another thread, or a signal
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    # -- what the live loop reads -------------------------------------------------------------
    @property
    def threads(self) -> set:
        return self.sampler.live if self.sampler is not None else set()

    @property
    def modules(self) -> "ModuleMap":
        if self.sampler is not None and self.sampler.modules is not None:
            return self.sampler.modules
        from phasescope.sources.modules import ModuleMap
        return ModuleMap()

    def info(self) -> dict:
        """What the summary records of how the program was seen."""
        return {**self.sampled_info(), "zero_touch": True,
                "bursts": {"enabled": False, "started": 0, "completed": 0}}

    def symbolize(self, pcs) -> List[Optional[tuple]]:
        """Names from the ELF files on disk, and the perf map's for JIT code."""
        return self.sampler.names(pcs) if self.sampler is not None else [None] * len(list(pcs))

    def read_code(self, address: int, size: int) -> Optional[bytes]:
        try:
            with open(f"/proc/{self.pid}/mem", "rb") as f:
                f.seek(address)
                return f.read(size)
        except (OSError, ValueError, OverflowError):
            return None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> "KernelSession":
        """Spawn or attach and start sampling; once only (the live monitor starts a spawned target
        before the live loop, which calls this again)."""
        if self.sampler is not None:
            return self
        if self.target.spawn:
            self._spawn()
        else:
            self.pid = self.target.pid
            self.sampler = self._sampler()
            threading.Thread(target=self._watch_attached, name="phasescope-watch", daemon=True).start()
        return self

    def _sampler(self, opened: Optional[OpenedEvents] = None) -> "Sampler":
        from phasescope.sources.sampler import Sampler  # numpy: loads once a spawned target runs
        sampler = Sampler(self.pid, before_exec=self.target.spawn, opened=opened, **self._sampling).start()
        sampler.watch(self._wake_r)
        return sampler

    def _spawn(self) -> None:
        """Fork, hold the child before exec until its perf events are open (so it is sampled from
        its first instruction), then let it run; the sampler, which needs numpy, loads after."""
        argv = self.target.argv
        gate_r, gate_w = os.pipe()
        err_r, err_w = os.pipe()  # exec failed: the child writes errno here (closed on exec)

        def fork() -> int:
            pid, before_exec = fork_held()
            if pid == 0:  # the child: only os calls until exec
                try:
                    os.close(gate_w)
                    os.close(err_r)
                    os.read(gate_r, 1)
                    os.set_inheritable(err_w, False)
                    default_signals()  # python3's ignored SIGPIPE kept `... | head -1` from ending it
                    before_exec()  # a Ctrl-C held since the fork ends it here, as it would the program
                    os.execv(argv[0], argv)
                except OSError as e:
                    os.write(err_w, str(e.errno).encode())
                finally:
                    os._exit(127)
            return pid

        if self.stdio == "pipe":
            self._stdio = PipedStdio()
            self.pid = self._stdio.spawn(fork)
        else:
            self.pid = fork()
        os.close(gate_r)
        os.close(err_w)
        try:
            opened = open_events(self.pid, **self._sampling)
            self.resumed_at = time.perf_counter()
        except BaseException:
            self._end_child()
            raise
        finally:
            os.write(gate_w, b"x")
            os.close(gate_w)
        failed = os.read(err_r, 16)
        os.close(err_r)
        if failed:
            os.waitpid(self.pid, 0)
            opened.close()
            raise InputError(f"cannot run {argv[0]}: {os.strerror(int(failed))}")
        try:
            self.sampler = self._sampler(opened)
        except BaseException:
            self._end_child()
            raise
        if self._stdio is not None:
            self._stdio.start(lambda fd, data: self._put(Output(fd, data)) if data else None)
        threading.Thread(target=self._watch_child, name="phasescope-wait", daemon=True).start()

    def _end_child(self) -> None:
        """A spawned child that cannot be sampled is not left behind."""
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)

    def _watch_child(self) -> None:
        _, status = os.waitpid(self.pid, 0)
        self._reaped = True
        self._put(ended_of_status(status))

    def _watch_attached(self) -> None:
        """An attached process is not our child: its status is read from /proc while it is a zombie
        (``exit_code``, field 52 of stat), and unknown if its parent reaped it first."""
        while not has_ended(self.pid):  # not a main thread that left while others run (pthread_exit)
            time.sleep(0.05)
        status = _exit_status(self.pid) if is_zombie(self.pid) else None
        self._put(Ended("exited") if status is None else ended_of_status(status))

    def stop(self) -> None:
        """Stop sampling; the target runs on (the last windows come before Ended("detached"))."""
        if self.ended is None and not self._stopping:
            self._stopping = True
            self._put(Ended("detached"))

    def kill(self) -> None:
        """Terminate a target this session spawned (unless it has already been reaped)."""
        if self.target.spawn and self.pid is not None and not self._reaped:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def events(self, timeout: Optional[float] = None) -> Iterator:
        """Sampled windows as :class:`IntervalEvent`, thread starts and exits, the target's output,
        then :class:`Ended`; None when ``timeout`` (default :data:`QUIET`) passed with none."""
        quiet = QUIET if timeout is None else timeout
        return self.events_until(lambda: quiet)

    def events_until(self, due: Callable[[], float]) -> Iterator:
        """As :meth:`events`, each wait lasting at most ``due()`` seconds (asked before each wait).
        A wait ends early when a ring has taken a window of samples, an event is queued (the target's end,
        its output) or a signal arrives (``signal.set_wakeup_fd``, on the main thread), so a quiet
        run costs no wake-ups on a clock (:class:`~phasescope.sources.protocol.Wakes`)."""
        try:
            old_wakeup = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        except ValueError:  # not the main thread: signals do not end a wait, ``due`` does
            old_wakeup = None
        try:
            while True:
                windows = self.sampler.poll(0 if not self._queue.empty() else max(0.0, due()))
                _drain_pipe(self._wake_r)
                try:
                    event = self._queue.get_nowait()
                except queue.Empty:
                    event = None
                if isinstance(event, Ended):
                    yield from self._windows(windows + self.sampler.stop())
                    self.ended = event
                    if self._stdio is not None and event.how != "detached":
                        self._stdio.close()
                        while not self._queue.empty():
                            yield self._queue.get()
                    yield event
                    return
                yield from self._windows(windows)
                yield event
        finally:
            if old_wakeup is not None:
                signal.set_wakeup_fd(old_wakeup)

    def _put(self, event) -> None:
        """Queue an event for the live loop and end its wait."""
        self._queue.put(event)
        try:
            os.write(self._wake_w, b"\0")
        except BlockingIOError:  # the pipe is full: a wake-up is pending anyway
            pass

    def _windows(self, windows: List[Interval]) -> Iterator:
        live = self.sampler.live
        for tid in live - self._known:
            self._known.add(tid)
            yield ThreadStarted(tid)
        for tid in self._known - live:
            self._known.discard(tid)
            yield ThreadExited(tid)
        for w in windows:
            yield IntervalEvent(w)
        for pid in self.sampler.take_ended_children():
            yield ChildEnded(pid)


def _drain_pipe(fd: int) -> None:
    """Read a non-blocking pipe empty."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _exit_status(pid: int) -> Optional[int]:
    """The wait status of a zombie, from /proc/PID/stat (Linux 3.5+), None when unreadable."""
    fields = stat_fields(f"/proc/{pid}/stat")
    try:
        return int(fields[49])
    except (TypeError, IndexError, ValueError):
        return None
