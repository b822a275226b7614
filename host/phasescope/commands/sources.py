"""The signal sources by ``--mode``: the one place that builds a source from the command line, for
the live monitor and bench alike. A new source is its class in ``sources/`` (the core of
:class:`~phasescope.sources.protocol.Session`) and one :class:`SourceKind` in :data:`SOURCES`; its
word becomes a ``--mode`` choice, monitor runs it and bench measures it. The sources' modules are
imported only when one is built (a zero-touch run starts its target before Frida or numpy load)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:  # not at run time: protocol.py loads numpy, which a zero-touch run defers
    from phasescope.sources.device import Target
    from phasescope.sources.protocol import Session


@dataclass(frozen=True)
class SourceKind:
    """One ``--mode``: ``help``, what ``phasescope help all`` says of it, ``brief`` what ``--help``
    says. ``build(args, device, target, stdio, interval)``: an unstarted session from
    the parsed options (``device`` is None when :attr:`injects` says no Frida is needed on this
    machine); ``injects(args)``: whether Frida puts an agent in the target (else the local kernel
    alone sees it); ``preset``: the tracker preset its intervals get unless ``--tracker`` says;
    ``timed``: bench's name for a timed run of it; ``baselines``: bench also times bare Stalker
    and valgrind exp-bbv (exact counts have those to compare with)."""

    mode: str
    help: str
    brief: str
    preset: str
    timed: str
    injects: Callable[[argparse.Namespace], bool]
    build: Callable[[argparse.Namespace, object, "Target", str, int], "Session"]
    baselines: bool = False


def locality_options(args: argparse.Namespace) -> Optional[dict]:
    """The TraceSession ``locality`` option of --locality (None without it)."""
    if not getattr(args, "locality", False):
        return None
    return {"window": args.locality_window, "every": args.locality_every}


def _exact(args, device, target: "Target", stdio: str, interval: int) -> "Session":
    from phasescope.sources.session import TraceSession
    return TraceSession(device, target, interval=interval, stdio=stdio, locality=locality_options(args),
                        rep_count=getattr(args, "rep_count", "iterations"),
                        trust_threshold=getattr(args, "trust_threshold", None))


def wants_stacks(args) -> bool:
    """Whether a sampled run asks the kernel for call chains: only when an output keeps them
    (``--log``, ``--profile``). Naming every frame of every window was most of the host's work on
    deep stacks (python3, cc1), and nothing else reads them."""
    return bool(getattr(args, "log", None) or getattr(args, "profile", None))


#: Seconds of CPU time whose windows one wake-up may bring when nothing watches them live (plain
#: lines, files); the live loop's quiet bound (``pipeline.loop_clock.MAX_QUIET``, plain lines on a
#: terminal) is longer, so a thread running flat out wakes the host once a batch.
UNWATCHED_WAKE = 1.0


def shows_dashboard(args) -> bool:
    """Whether a live run draws the dashboard (not ``--no-dashboard``, and stdout a terminal)."""
    return not getattr(args, "no_dashboard", True) and sys.stdout.isatty()


def wake_every(args) -> float:
    """Seconds of a thread's CPU time whose sampled windows one wake-up of the host may bring: each
    window as it completes with ``--events`` (a policy acts on each), the dashboard's refresh period
    with the dashboard (it shows no more often), else :data:`UNWATCHED_WAKE`. A wake-up costs the
    host about as much as a window's own work, so reading several at once is most of what a
    window costs less (:func:`~phasescope.sources.perf_event.wakeup_samples`)."""
    if getattr(args, "events", None):
        return 0.0
    return 1.0 / args.refresh if shows_dashboard(args) else UNWATCHED_WAKE


def _sampled(args, device, target: "Target", stdio: str, interval: int) -> "Session":
    kernel = getattr(args, "kernel_samples", False)
    if args.bursts:  # bursts need Stalker: the watching agent
        from phasescope.sources.sampled_session import SampledSession
        return SampledSession(device, target, stdio=stdio, rate_hz=args.rate, window_samples=args.window,
                              bursts=True, kernel=kernel, stacks=wants_stacks(args))
    from phasescope.sources.kernel_session import KernelSession  # nothing injected
    return KernelSession(target, stdio=stdio, rate_hz=args.rate, window_samples=args.window, kernel=kernel,
                         stacks=wants_stacks(args), wake_every=wake_every(args))


#: ``--mode`` word -> its source (``-a`` samples: sampled)
SOURCES = {kind.mode: kind for kind in (
    SourceKind("exact", "Stalker counts every block's instructions (costs a multiple of native)",
               "Stalker counts every block, a multiple of native",
               preset="default", timed="traced", injects=lambda args: True, build=_exact, baselines=True),
    SourceKind("sampled", "the kernel's CPU-clock samples (perf_event_open, no code on the target's hot path; "
                          "local device, needs root or perf_event_paranoid <= 1)",
               "the kernel's CPU-clock samples, about native speed (needs root or perf_event_paranoid <= 1)",
               preset="sampled", timed="sampled", injects=lambda args: bool(args.bursts), build=_sampled),
)}
DEFAULT_MODE = "exact"


def mode_help(brief: bool = False) -> str:
    """What ``--mode`` says of each source: in ``phasescope help all``, or (``brief``) in ``--help``."""
    if brief:
        return "; ".join(f"{kind.mode}{' (default)' if kind.mode == DEFAULT_MODE else ''}: {kind.brief}"
                         for kind in SOURCES.values())
    return f"(default {DEFAULT_MODE}; sampled with -a) " + "; ".join(
        f"{kind.mode}: {kind.help}" for kind in SOURCES.values())
