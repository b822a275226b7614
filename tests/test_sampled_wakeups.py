"""Sampled mode with nothing injected wakes on its data, not on a clock (as ``perf record``): a
quiet target costs the session no wake-ups, and the target's end, a signal and ``--duration``
still end its wait on time."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import end_process, run_cli
from phasescope.sources.device import Target
from phasescope.sources.events import Ended
from phasescope.sources.kernel_session import KernelSession

pytestmark = pytest.mark.slow  # every test here starts a real process


def test_a_quiet_target_costs_no_wake_ups_and_its_end_comes_at_once():
    session = KernelSession(Target(argv=["/bin/sleep", "2"])).start()
    began = time.monotonic()
    quiet, ended = 0, None
    try:
        for event in session.events_until(lambda: 60.0):  # nothing on the clock: only the end can wake it
            if event is None:
                quiet += 1
            elif isinstance(event, Ended):
                ended = event
                break
    finally:
        session.kill()
    assert ended is not None and ended.how == "exited" and ended.code == 0
    assert time.monotonic() - began < 30  # the end woke the wait (not the 60 s due)
    assert quiet <= 2, quiet  # the 20 ms clock it replaced woke ~100 times over this run


def test_a_signal_ends_the_wait():
    got = []
    old = signal.signal(signal.SIGUSR1, lambda *_: got.append(time.monotonic()))
    session = KernelSession(Target(argv=["/bin/sleep", "30"])).start()  # its end bounds the test
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        events = session.events_until(lambda: 120.0)
        first = next(events)  # the signal, 1 s in, is the only thing that can end this wait early
        woke = time.monotonic()
        assert got and woke - got[0] < 5, (got, woke)
        session.stop()
        last = [e for e in events][-1]
        assert isinstance(last, Ended) and last.how == "detached", (first, last)
    finally:
        timer.cancel()
        session.kill()
        signal.signal(signal.SIGUSR1, old)


def test_duration_ends_a_quiet_sampled_run_on_time():
    target = subprocess.Popen(["/bin/sleep", "60"])  # attached: it holds none of phasescope's pipes
    try:
        began = time.monotonic()
        r = run_cli("--mode", "sampled", "--no-dashboard", "--duration", "2", "-p", str(target.pid), timeout=60)
        took = time.monotonic() - began
        assert r.returncode == 0, r.stderr
        assert "--duration 2s reached" in r.stderr, r.stderr
        assert took < 30, took  # not the target's 60 s
        assert target.poll() is None  # detached, it runs on
    finally:
        end_process(target)
