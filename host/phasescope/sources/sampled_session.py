"""Sampled mode: the kernel's CPU-clock samples make the intervals, with no code on the target's
hot path; a watch-only agent (Frida, no Stalker) still tells phasescope the modules (for keys and
names), the threads (which ones are the program's own, not Frida's) and how the target ended.

:class:`SampledSession` has the interface of :class:`~phasescope.sources.session.TraceSession`
that the live loop uses, so the engine, sinks, dashboard and report run unchanged.

Exact bursts (``bursts=True``): :meth:`SampledSession.burst` has the agent follow one thread with
Stalker for one exact interval; its record comes out as a :class:`BurstEvent`, never as a sampled
window (the two kinds of vector never meet in one tracker).
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional

from phasescope.engine.interval import Interval
from phasescope.sources.device import Target, require_local
from phasescope.sources.events import BurstEvent, Ended, IntervalEvent, ThreadStarted
from phasescope.sources.protocol import Agent, Bursts
from phasescope.sources.sampled_source import DEFAULT_PERIOD_NS, DEFAULT_WINDOW_SAMPLES, SampledSource, check_sampling
from phasescope.sources.sampler import Sampler
from phasescope.sources.session import TraceSession

POLL = 0.02  # seconds between reads of the sample rings while the agent is quiet


class SampledSession(SampledSource):
    """One sampled process. ``rate_hz``: samples per second of a thread's CPU time;
    ``window_samples``: samples per interval (so an interval is window/rate seconds of CPU);
    ``bursts``: allow :meth:`burst`; ``kernel``: keep the ticks that hit kernel mode (system time),
    all as one key (:data:`~phasescope.sources.modules.KERNEL_KEY`)."""


    def __init__(self, device, target: Target, stdio: str = "inherit", rate_hz: int = 10**9 // DEFAULT_PERIOD_NS,
                 window_samples: int = DEFAULT_WINDOW_SAMPLES, bursts: bool = False, kernel: bool = False,
                 stacks: bool = True):
        require_local(device)
        check_sampling(rate_hz, window_samples)
        self.trace = TraceSession(device, target, stdio=stdio, watch=True)
        self.period_ns = 10**9 // rate_hz
        self.rate_hz = rate_hz
        self.window_samples = window_samples
        self.kernel = kernel
        self.stacks = stacks
        self.sampler: Optional[Sampler] = None
        self._known: set = set()  # the program's threads, as the agent reports them
        self._held: Dict[int, List[Interval]] = {}  # windows of threads not (yet) known to be the program's
        self.foreign_windows = 0  # windows of threads that never turned out to be the program's (Frida's)
        self.bursts = bursts
        self.capabilities = (Bursts, Agent) if bursts else (Agent,)
        self.bursts_started = self.bursts_done = 0

    # the parts of a trace session the live loop reads
    device = property(lambda self: self.trace.device)
    target = property(lambda self: self.trace.target)
    stdio = property(lambda self: self.trace.stdio)
    pid = property(lambda self: self.trace.pid)
    threads = property(lambda self: self.trace.threads)
    modules = property(lambda self: self.trace.modules)
    abandoned = property(lambda self: self.trace.abandoned)
    unload_stuck = property(lambda self: self.trace.unload_stuck)
    restopped = property(lambda self: self.trace.restopped)
    ended = property(lambda self: self.trace.ended)
    final_at = property(lambda self: self.trace.final_at)
    final_cpu = property(lambda self: self.trace.final_cpu)
    resumed_at = property(lambda self: self.trace.resumed_at)

    @property
    def before_final_ack(self):
        return self.trace.before_final_ack

    @before_final_ack.setter
    def before_final_ack(self, fn) -> None:
        self.trace.before_final_ack = fn

    def info(self) -> dict:
        """What the summary records of how the program was seen."""
        return {**self.sampled_info(), "zero_touch": False,
                "foreign_windows": self.foreign_windows,
                "bursts": {"enabled": self.bursts, "started": self.bursts_started, "completed": self.bursts_done}}

    def symbolize(self, pcs) -> list:
        return self.trace.symbolize(pcs)

    def read_code(self, address: int, size: int):
        return self.trace.read_code(address, size)

    def burst(self, tid: int) -> bool:
        """Follow thread ``tid`` for one exact interval (a :class:`BurstEvent` once it completes);
        False when bursts are off, another one runs, or the thread is not the program's. A burst
        whose thread exits, blocks for long or is detached first yields nothing."""
        if not self.bursts or not self.trace.burst(tid):
            return False
        self.bursts_started += 1
        return True

    def start(self) -> "SampledSession":
        """Attach or spawn with the watching agent; sampling starts before a spawned target runs."""
        self.trace.start(before_resume=self._start_sampler)
        self._known.update(self.trace.threads)
        return self

    def _start_sampler(self, pid: int) -> None:
        self.sampler = Sampler(pid, period_ns=self.period_ns, window_samples=self.window_samples,
                               kernel=self.kernel, modules=self.trace.modules, stacks=self.stacks).start()

    def kill(self) -> None:
        """Terminate the target."""
        self.trace.kill()

    def stop(self) -> None:
        """Detach: the agent unloads; the sampler's last windows come before the Ended event."""
        self.trace.stop()

    def events(self, timeout: Optional[float] = None) -> Iterator:
        """The agent's events, with the sampled windows as :class:`IntervalEvent`s; ends after Ended."""
        for event in self.trace.events(timeout=POLL if timeout is None else min(timeout, POLL)):
            if isinstance(event, ThreadStarted):
                self._known.add(event.tid)
            if isinstance(event, Ended):
                yield from self._windows(self.sampler.stop(), final=True)
                yield event
                return
            yield from self._windows(self.sampler.poll(0))
            if isinstance(event, IntervalEvent):  # the watching agent's only intervals are bursts'
                self.bursts_done += 1
                event = BurstEvent(event.interval)
            yield event

    def _windows(self, windows: List[Interval], final: bool = False) -> Iterator[IntervalEvent]:
        for w in windows:
            self._held.setdefault(w.thread, []).append(w)
        for tid in [t for t in self._held if t in self._known]:
            for w in self._held.pop(tid):
                yield IntervalEvent(w)
        if final:
            self.foreign_windows += sum(len(ws) for ws in self._held.values())
            self._held.clear()
