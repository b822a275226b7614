"""One builder of sources (phasescope.commands.sources): --mode offers what SOURCES lists, and the
live monitor's options and bench's build the same source. Pure: sessions are built, never started."""

from __future__ import annotations

import argparse
import os
import sys

import pytest

from phasescope.commands.bench import BenchCommand
from phasescope.commands.monitor import MonitorCommand
from phasescope.commands.options import validate_source_options
from phasescope.commands.sources import DEFAULT_MODE, SOURCES, UNWATCHED_WAKE
from phasescope.sources.device import Target
from phasescope.sources.kernel_session import KernelSession
from phasescope.sources.perf_event import DEFAULT_RING_PAGES, wakeup_samples
from phasescope.sources.protocol import Bursts, capability
from phasescope.sources.sampled_session import SampledSession
from phasescope.sources.session import TraceSession

TARGET = Target(argv=["/bin/true"])


def _monitor_args(*argv: str) -> argparse.Namespace:
    args = MonitorCommand("phasescope").parser(full=True).parse_args([*argv, "-f", "/bin/true"])
    validate_source_options(args)
    return args


def _build(args) -> object:
    kind = SOURCES[args.mode]
    return kind.build(args, None, TARGET, "inherit", 1_000_000)


@pytest.mark.parametrize("parser", [MonitorCommand("phasescope").parser(full=True), BenchCommand("bench").parser()])
def test_mode_choices_are_the_registry(parser):
    (mode,) = [a for a in parser._actions if "--mode" in a.option_strings]
    assert tuple(mode.choices) == tuple(SOURCES)
    assert all(f"{m}: {kind.help}" in mode.help for m, kind in SOURCES.items())


def test_no_mode_given_is_the_default_source():
    assert _monitor_args().mode == DEFAULT_MODE == "exact"
    assert isinstance(_build(_monitor_args()), TraceSession)


def test_each_option_reaches_the_source_it_shapes():
    exact = _build(_monitor_args("--locality", "--locality-every", "3", "--rep-count", "once"))
    assert exact._options["locality"]["every"] == 3 and exact._options["repCount"] == "once"
    kernel = _build(_monitor_args("--mode", "sampled", "--rate", "250", "--window", "40", "--kernel-samples"))
    assert isinstance(kernel, KernelSession) and capability(kernel, Bursts) is None
    assert (kernel.rate_hz, kernel.window_samples, kernel.kernel) == (250, 40, True)
    bursts = _build(_monitor_args("--mode", "sampled", "--bursts", "--rate", "250"))
    assert isinstance(bursts, SampledSession) and capability(bursts, Bursts) is bursts
    assert bursts.rate_hz == 250


def test_bench_builds_what_the_monitor_builds():
    # bench's options (its parser has no --kernel-samples, --locality, --rep-count) give the same
    # source, with the same sampling, as the live monitor's
    for argv in (["--mode", "sampled", "--rate", "300", "--window", "50"], ["--mode", "sampled", "--bursts"], []):
        bench = BenchCommand("bench").parser().parse_args([*argv, "--", "/bin/true"])
        validate_source_options(bench)
        live, built = _build(_monitor_args(*argv)), _build(bench)
        assert type(built) is type(live)
        assert getattr(built, "rate_hz", None) == getattr(live, "rate_hz", None)
        assert getattr(built, "window_samples", None) == getattr(live, "window_samples", None)


def test_injecting_sources_are_the_ones_frida_needs():
    assert SOURCES["exact"].injects(_monitor_args())
    assert not SOURCES["sampled"].injects(_monitor_args("--mode", "sampled"))
    assert SOURCES["sampled"].injects(_monitor_args("--mode", "sampled", "--bursts"))


@pytest.mark.parametrize("outputs, stacks", [((), False), (("--log", "x.jsonl"), True),
                                             (("--profile", "x.folded"), True), (("--summary", "x.json"), False)])
def test_sampled_mode_asks_for_call_chains_only_when_an_output_keeps_them(outputs, stacks):
    session = _build(_monitor_args("--mode", "sampled", *outputs))
    assert isinstance(session, KernelSession)
    assert session._sampling["stacks"] is stacks


def test_a_wake_up_brings_as_many_windows_as_their_reader_can_wait_for(monkeypatch):
    wake = lambda *argv: _build(_monitor_args("--mode", "sampled", *argv))._sampling["wake_every"]  # noqa: E731
    assert wake("--events", "unix:/nonexistent/s.sock") == 0.0  # a policy acts on each window
    assert wake("--no-dashboard") == wake() == UNWATCHED_WAKE  # pytest's stdout is no terminal: plain lines
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w") as tty:
            monkeypatch.setattr(sys, "stdout", tty)
            assert wake("--refresh", "2") == 0.5 and wake("--no-dashboard") == UNWATCHED_WAKE
    finally:
        os.close(master)


@pytest.mark.parametrize("rate, wake_every, stacks, windows", [
    (1000, 0.0, False, 1), (1000, 0.25, False, 2), (1000, 1.0, False, 10),
    (97, 1.0, False, 1),  # a window is a second of CPU at 97 Hz: one a wake-up, as before
    (1000, 1.0, True, 2),  # chains: a quarter of the ring holds two windows of the deepest records
    (10_000, 1.0, False, 32),  # 100 windows a second: as many as a quarter of the ring holds
])
def test_windows_a_wake_up_brings_within_the_ring(rate, wake_every, stacks, windows):
    assert wakeup_samples(100, 10**9 // rate, wake_every, stacks, DEFAULT_RING_PAGES) == 100 * windows
