"""The interface of a signal source, as the live loop (:mod:`phasescope.pipeline.live`), bench and
the symbolizer use it: a small core every source has (:class:`Session`), plus optional
capabilities (:class:`Bursts`, :class:`Locality`, :class:`Agent`, :class:`Wakes`) that a source
lists in its ``capabilities`` and the pipeline asks for with :func:`capability`, instead of
testing which source or mode it has. Three sources implement it:
:class:`~phasescope.sources.session.TraceSession` (exact mode: the agent),
:class:`~phasescope.sources.kernel_session.KernelSession` (sampled mode, nothing injected) and
:class:`~phasescope.sources.sampled_session.SampledSession` (sampled mode with exact bursts: the
watching agent)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Collection, Iterator, List, Optional, Protocol, Set, TypeVar

from phasescope.sources.device import Target
from phasescope.sources.events import Dropped, Ended

if TYPE_CHECKING:  # numpy: not loaded before a sampled target starts
    from phasescope.sources.modules import ModuleMap

QUERY_TIMEOUT = 5.0  # seconds a session's symbolize / read_code may take


class Session(Protocol):
    """The core: every source has it."""

    mode: str  # "exact" or "sampled": what its intervals are (the log's and the summary's word)
    capabilities: Collection[type]  # the optional capabilities below that it offers
    target: Target
    stdio: str  # a spawned target's stdio: "inherit" or "pipe"
    pid: Optional[int]
    threads: Set[int]  # the program's threads followed now
    modules: ModuleMap
    ended: Optional[Ended]
    resumed_at: Optional[float]  # time.perf_counter() when a spawned target started running
    final_at: Optional[float]  # time.perf_counter() when the target said it ends (None: not said)
    final_cpu: Optional[float]  # CPU seconds of its main thread then (None: not known)

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

    def describe_mode(self) -> str: ...

    def info(self) -> dict:
        """What the summary records of how the program was seen."""

    def symbolize(self, pcs) -> List[Optional[tuple]]:
        """``(module, symbol)`` or None per address."""

    def read_code(self, address: int, size: int) -> Optional[bytes]: ...


class Bursts(Protocol):
    """Sampled mode's exact bursts: follow one thread for one exact interval (a BurstEvent)."""

    def burst(self, tid: int) -> bool:
        """False when refused (another burst runs, the thread is not the program's)."""


class Locality(Protocol):
    """--locality: locality windows asked for on demand."""

    def request_window(self, tid: int) -> bool:
        """A locality window on thread ``tid`` at its next interval (False: refused)."""


class Agent(Protocol):
    """An agent injected in the target, which may fail to answer or to unload."""

    abandoned: Optional[str]  # why the last intervals could not be had (None: they were)
    unload_stuck: Optional[str]  # why the agent could not be unloaded (None: it was)
    restopped: Optional[str]  # a stopped target was continued for its agent to unload, said in a line (None: not)
    before_final_ack: Optional[Callable[[], None]]  # last chance to ask the agent about an ending target


class Wakes(Protocol):
    """A source that sleeps until it has something (data past its rings' watermark, an event, a
    signal) instead of waking on a clock, as ``perf record`` does: the live loop tells it how long
    it may sleep at most, until the loop's own next deadline."""

    def events_until(self, due: Callable[[], float]) -> Iterator:
        """As :meth:`Session.events`, each wait lasting at most ``due()`` seconds."""


C = TypeVar("C")


def capability(source: Session, cap: "type[C]") -> Optional[C]:
    """``source`` as capability ``cap`` when it offers it, else None."""
    return source if cap in source.capabilities else None  # type: ignore[return-value]
