"""The one interface of a signal source, as the live loop (:mod:`phasescope.pipeline.live`) and
the symbolizer use it. Three sources implement it: :class:`~phasescope.sources.session.TraceSession`
(exact mode: the agent), :class:`~phasescope.sources.kernel_session.KernelSession` (sampled mode,
nothing injected) and :class:`~phasescope.sources.sampled_session.SampledSession` (sampled mode with
exact bursts: the watching agent)."""

from __future__ import annotations

from typing import Callable, Iterator, List, Optional, Protocol, Set

from phasescope.sources.device import Target
from phasescope.sources.events import Dropped, Ended
from phasescope.sources.modules import ModuleMap

QUERY_TIMEOUT = 5.0  # seconds a session's symbolize / read_code may take


class Session(Protocol):
    mode: str  # "exact" or "sampled"
    bursts: bool  # :meth:`burst` can follow a thread for one exact interval
    target: Target
    stdio: str  # a spawned target's stdio: "inherit" or "pipe"
    pid: Optional[int]
    threads: Set[int]  # the program's threads followed now
    modules: ModuleMap
    ended: Optional[Ended]
    abandoned: Optional[str]  # why the last intervals could not be had (None: they were)
    unload_stuck: Optional[str]  # why an agent could not be unloaded (None: it was, or there is none)
    restopped: Optional[str]  # a stopped target was continued for its agent to unload, said in a line (None: not)
    final_at: Optional[float]  # time.perf_counter() when the target said it ends
    final_cpu: Optional[float]  # CPU seconds of its main thread then (None: not known)
    resumed_at: Optional[float]  # time.perf_counter() when a spawned target started running
    before_final_ack: Optional[Callable[[], None]]  # last chance to ask an agent about an ending target

    @property
    def dropped(self) -> Dropped: ...

    def start(self) -> "Session":
        """Attach or spawn; a spawned target runs once everything is in place."""

    def events(self, timeout: Optional[float] = None) -> Iterator:
        """Typed events (:mod:`phasescope.sources.events`), None on a quiet ``timeout``; ends after Ended."""

    def stop(self) -> None:
        """Detach: the last intervals come, then Ended("detached"); the target runs on."""

    def kill(self) -> None:
        """Terminate the target (gone already is no error)."""

    def burst(self, tid: int) -> bool: ...

    def request_window(self, tid: int) -> bool:
        """--locality: a locality window on thread ``tid`` at its next interval (False: none here)."""

    def describe_mode(self) -> str: ...

    def info(self) -> dict:
        """What the summary records of how the program was seen."""

    def symbolize(self, pcs) -> List[Optional[tuple]]:
        """``(module, symbol)`` or None per address."""

    def read_code(self, address: int, size: int) -> Optional[bytes]: ...
