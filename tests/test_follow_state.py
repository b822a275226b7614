"""What a thread computes when exact mode starts following it at an arbitrary point, and the status
flags across control transfers (issue 32). Real processes: cc-built programs whose right answers are
known by construction (tests/programs/follow_points.c, tests/programs/flags_across.c)."""

import subprocess
import time

import pytest

from agent_support import trace_spawn
from conftest import run_cli

pytestmark = pytest.mark.slow


def _native(argv) -> bytes:
    return subprocess.run(argv, capture_output=True, check=True, timeout=120).stdout


def test_threads_followed_mid_run_compute_as_native(build):
    # Attaching follows every running thread wherever it is: blocked in read, futex (with and
    # without a timeout), nanosleep, poll, accept; holding a red zone, vector registers, MXCSR, DF;
    # with its own signal mask and alternate stack. Each kind counts its wrong results.
    exe = build("follow_points.c")
    argv = [exe, "8", "1500"]  # 12 s: phasescope starts slowly on a loaded machine
    native = _native([exe, "1", "100"])  # each kind's wrong count: the same text whatever the run's length
    assert native.count(b" wrong 0\n") == 12
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        done = run_cli("--no-dashboard", "-p", str(proc.pid), timeout=180)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert "exited with code 0" in done.stderr, done.stderr[-2000:]
    assert out == native


def test_threads_followed_from_their_start_compute_as_native(build):
    exe = build("follow_points.c")
    argv = [exe, "10", "150"]
    native = _native(argv)
    trace = trace_spawn(argv)
    assert trace.ended.how == "exited" and trace.ended.code == 0, trace.ended
    assert trace.output.get(1, b"") == native
    assert trace.intervals


def _flags_wrong(output: bytes) -> dict:
    """{transfer: wrong count} of flags_across's output."""
    lines = output.decode().splitlines()
    return {line.rsplit(" wrong ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in lines}


@pytest.fixture(scope="module")
def flags_traced(build):
    exe = build("flags_across.c")
    native = _flags_wrong(_native([exe]))
    assert native == {"ret": 0, "indirect jmp": 0, "indirect call": 0, "call": 0, "jmp": 0,
                      "memory jmp": 0, "memory call": 0}
    trace = trace_spawn([exe])
    assert trace.ended.how == "exited" and trace.ended.code == 0, trace.ended
    return _flags_wrong(trace.output.get(1, b""))


def test_status_flags_cross_direct_transfers(flags_traced):
    # phasescope's counters keep every status flag where they are live (lahf plus seto for OF)
    assert flags_traced["call"] == 0 and flags_traced["jmp"] == 0


def test_overflow_flag_crosses_ret_and_indirect_transfers(flags_traced):
    # Stalker's inline cache for these loses OF (lahf/sahf around a cmp); the agent carries it
    # over itself (agent/x86_flags.c)
    assert flags_traced["ret"] == flags_traced["indirect jmp"] == flags_traced["indirect call"] == 0
    assert flags_traced["memory jmp"] == flags_traced["memory call"] == 0
