"""Sampled mode with nothing injected wakes on its data, not on a clock (as ``perf record``): a
quiet target costs the session no wake-ups, and the target's end, a signal and ``--duration``
still end its wait on time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import cli_command, end_process, read_records, run_cli, wait_for
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


#: runs the CLI (argv after ``-c``) with the sampler's waits recorded: (timeout, seconds waited,
#: windows brought), printed as JSON after "WAITS" on stderr at exit
COUNTED = """
import atexit, json, runpy, sys, time
from phasescope.sources import sampler
waits, poll = [], sampler.Sampler.poll
def counted(self, timeout=0.1):
    began = time.monotonic()
    windows = poll(self, timeout)
    waits.append((timeout, time.monotonic() - began, len(windows)))
    return windows
sampler.Sampler.poll = counted
atexit.register(lambda: print("WAITS", json.dumps(waits), file=sys.stderr))
sys.argv = ["phasescope", *sys.argv[1:]]
runpy.run_module("phasescope.cli", run_name="__main__")
"""


def counted_waits(*args: str) -> tuple:
    """(the run, its sampler's waits) of ``phasescope ARGS`` (see :data:`COUNTED`)."""
    r = subprocess.run([sys.executable, "-c", COUNTED, *args], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, COLUMNS="120"))
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("WAITS ")]
    return r, (json.loads(line[-1][6:]) if line else None)


def on_the_clock(waits) -> list:
    """The waits that ran to their bound (a wake-up on the wall clock, not the data's)."""
    return [w for w in waits if 0 < w[0] < float("inf") and w[1] >= w[0] - 0.01]


def test_an_unwatched_run_wakes_on_its_data_not_on_the_clock(build, tmp_path):
    """A target that uses a third of a core (40 ms of CPU, 80 ms asleep, 60 times: 2.4 s of CPU
    over 7 s or more), sampled at 1000 Hz with its lines in a file: the rings' batches (a second
    of CPU each) wake the loop, about three times. Before stop 47 the loop's 1.5 s quiet bound,
    its 5 s checkpoint and status line woke it besides, more often the more loaded the machine."""
    exe, out, summary, log = build("duty.c"), tmp_path / "out.txt", tmp_path / "s.json", tmp_path / "run.jsonl"
    began = time.monotonic()
    r, waits = counted_waits("--mode", "sampled", "--rate", "1000", "--no-dashboard", "-o", str(out), "--summary",
                             str(summary), "--log", str(log), "-f", exe, "60", "40", "80")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("checksum ")
    assert waits is not None, r.stderr[-2000:]
    took, clock = time.monotonic() - began, on_the_clock(waits)
    # one 10 s in, and under load (batches further apart than 5 s) one a checkpoint missed, 10 s after
    # it: main woke every 1.5 s at most, 27 times over this run at load 17
    assert len(clock) <= 1 + took / 10, (took, clock, waits)
    s = json.loads(summary.read_text())
    assert s["end"]["how"] == "exited" and s["whole"]["intervals"] == len(read_records(log)) >= 20
    assert "intervals," in out.read_text()  # a status line still, with the data's wake-ups


def test_a_watched_run_still_wakes_on_the_clock(build, tmp_path):
    """With a client reading ``--metrics``, the loop still wakes within its quiet bound (1.5 s),
    so what the client reads is never more than that late."""
    exe = build("duty.c")
    r, waits = counted_waits("--mode", "sampled", "--rate", "1000", "--no-dashboard", "-o", str(tmp_path / "o"),
                             "--metrics", "127.0.0.1:0", "-f", exe, "60", "40", "80")
    assert r.returncode == 0, r.stderr[-2000:]
    assert waits is not None and all(w[0] <= 1.5 + 0.01 for w in waits if w[0] > 0), waits
    assert len(on_the_clock(waits)) >= 2, waits  # 7 s or more of wall time, a wake-up at least every 1.5 s


def saved_while_it_sleeps(build, tmp_path, duty: tuple, intervals: int, timeout: float) -> dict:
    """The first checkpoint of an unwatched 1000 Hz run of ``duty DUTY`` that holds ``intervals``
    windows, read from ``--summary`` while the target sleeps (its end would save them anyway)."""
    summary = tmp_path / "s.json"
    proc = subprocess.Popen(cli_command("--mode", "sampled", "--rate", "1000", "--no-dashboard", "-o",
                                        str(tmp_path / "o"), "--summary", str(summary), "-f", build("duty.c"),
                                        *duty),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def saved():
            s = json.loads(summary.read_text()) if summary.exists() else None
            return s if s is not None and s["whole"]["intervals"] >= intervals else None
        s = wait_for(saved, timeout=timeout, what=f"a checkpoint with {intervals} of the target's windows")
        assert s["end"]["how"] == "running"
        return s
    finally:
        proc.terminate()  # passed on to the target, which ends: phasescope exits 143's way
        try:
            proc.wait(timeout=30)
        finally:
            end_process(proc)


def test_a_target_gone_quiet_before_its_first_batch_is_saved_while_it_sleeps(build, tmp_path):
    """0.6 s of CPU (no ring takes a batch: a second each), then asleep: an unwatched run still
    reads its windows and writes them to ``--summary`` while the target sleeps, so a phasescope
    killed then (SIGKILL, no end) leaves them on disk, as the 5 s checkpoint did on the clock."""
    saved_while_it_sleeps(build, tmp_path, ("1", "600", "120000"), intervals=5, timeout=90)


def test_a_short_burst_after_an_idle_read_is_saved_while_the_target_sleeps(build, tmp_path):
    """200 ms of CPU then 35 s asleep, three times (600 samples: far from a batch): the reads after
    the first burst bring its windows, then nothing; the second burst's reach ``--summary`` at the
    next idle read (loop_clock.IDLE_READ, ~50 s in), not only at the target's end, 105 s in
    (before r47e no read came: the wait times out)."""
    saved_while_it_sleeps(build, tmp_path, ("3", "200", "35000"), intervals=3, timeout=90)
