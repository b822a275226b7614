"""Session behaviour against real processes: detach, backpressure, module loads, piped output."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from agent_support import collect, trace_spawn
from conftest import end_process, wait_for
from phasescope.sources.session import TraceSession
from phasescope.sources.events import Dropped, Ended, IntervalEvent, ModulesChanged
from phasescope.sources.device import resolve_device, resolve_target

pytestmark = pytest.mark.slow  # every test here starts a real process


def test_detach_ships_partial_intervals_and_leaves_the_target_running(build):
    binary = build("counted.c")
    n = "150000000"  # runs for seconds: still running when the session detaches
    expected = subprocess.run([binary, n], capture_output=True, check=True, timeout=300).stdout
    proc = subprocess.Popen([binary, n], stdout=subprocess.PIPE)
    try:
        device = resolve_device()
        session = TraceSession(device, resolve_target(device, pid=proc.pid), interval=1_000_000)
        session.start()
        intervals, partial = [], []
        for event in session.events(timeout=30):
            assert event is not None, "no intervals within 30 s"
            if isinstance(event, IntervalEvent):
                intervals.append(event.interval)
                if len(intervals) == 5:
                    break
        session.stop()
        for event in session.events(timeout=10):
            if isinstance(event, IntervalEvent):
                intervals.append(event.interval)
                partial.append(event.interval.partial)
            elif isinstance(event, Ended):
                assert event.how == "detached"
        assert any(partial), (f"detach shipped no partial interval ({len(partial)} intervals after stop; "
                              f"abandoned: {session.abandoned}; unload stuck: {session.unload_stuck}; "
                              f"{session.dropped})")
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert out == expected


def test_backpressure_counts_what_it_drops(build):
    binary = build("counted.c")
    argv = [binary, "3000000"]
    full = trace_spawn(argv, interval=100_000)
    total = sum(i.instructions for i in full.intervals)
    assert full.session.dropped.records == 0  # the reference run drops nothing

    device = resolve_device()
    # One page per output buffer and in flight, and a consumer that only looks once the program
    # is done: the agent must drop, count and report, not grow.
    session = TraceSession(
        device, resolve_target(device, argv=argv), interval=100_000, stdio="pipe", buffer_bytes=4096, window=4096
    )
    session.start()
    wait_for(lambda: session.ended is not None, 60, "the traced program's end")
    got, dropped = 0, None
    for event in session.events(timeout=30):
        if isinstance(event, IntervalEvent):
            got += event.interval.instructions
        elif isinstance(event, Dropped):
            dropped = event
    assert dropped is not None and dropped.records > 0
    assert got + dropped.instructions == pytest.approx(total, rel=0.01)


def test_module_loaded_later_is_reported_and_keys_use_it(tmp_path):
    script = tmp_path / "z.py"
    script.write_text(
        "import ctypes, ctypes.util\n"
        "z = ctypes.CDLL(ctypes.util.find_library('z') or 'libz.so.1')\n"
        "buf = bytes(range(256)) * 40000\n"
        "c = 0\n"
        "for _ in range(20):\n"
        "    c = z.crc32(c, buf, len(buf))\n"
        "print(c & 0xffffffff)\n"
    )
    trace = trace_spawn(["/usr/bin/python3", str(script)], interval=1_000_000)
    assert trace.ended.how == "exited" and trace.ended.code == 0
    libz = [m for m in trace.session.modules.modules if m.name.startswith("libz")]
    assert libz, "libz never appeared in the module map"
    base = libz[0].base
    in_libz = [i for i in trace.intervals if np.any((i.pcs >= base) & (i.pcs < base + libz[0].size))]
    assert in_libz
    interval = in_libz[len(in_libz) // 2]
    sel = (interval.pcs >= base) & (interval.pcs < base + libz[0].size)
    keys = interval.keys[sel]
    assert np.all(keys >> np.uint64(32) == keys[0] >> np.uint64(32))  # module tag + offset, ASLR-stable
    assert np.all((keys & np.uint64(0xFFFFFFFF)) == interval.pcs[sel] - np.uint64(base))
    assert trace.session.modules.describe(int(interval.pcs[sel][0])).startswith("libz")


def test_modules_changed_comes_first():
    trace_events = []
    device = resolve_device()
    session = TraceSession(device, resolve_target(device, argv=["/bin/true"]), stdio="pipe")
    session.start()
    collect(session, on_event=trace_events.append)
    assert isinstance(trace_events[0], ModulesChanged) and len(trace_events[0].added) > 3
    assert isinstance(trace_events[-1], Ended) and trace_events[-1].code == 0


def test_killed_target_is_reported(build):
    proc = subprocess.Popen([build("counted.c"), "3000000000"], stdout=subprocess.DEVNULL)
    try:
        device = resolve_device()
        session = TraceSession(device, resolve_target(device, pid=proc.pid))
        session.start()
        for event in session.events(timeout=30):
            assert event is not None
            if isinstance(event, IntervalEvent):
                proc.kill()
            if isinstance(event, Ended):
                assert event.how == "killed"
                break
    finally:
        end_process(proc)
