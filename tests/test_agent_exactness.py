"""Instruction counts of the agent against valgrind's (callgrind), on a program with known work."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from agent_support import callgrind_functions, per_function, trace_spawn

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")]

FUNCTIONS = ("mix_small", "mix_branchy", "mix_calls", "mix_calls_leaf")


@pytest.mark.parametrize(
    "flags,portable", [((), False), (("-O2",), False), ((), True)], ids=["O1", "O2", "O1-portable-callouts"]
)
def test_counts_and_shares_match_callgrind(build, tmp_path, flags, portable):
    binary = build("counted.c", *flags)
    argv = [binary, "300000"]
    trace = trace_spawn(argv, interval=1_000_000, portable=portable)
    assert trace.ended.how == "exited" and trace.ended.code == 0
    assert trace.session.fast_path is not portable
    ours = per_function(trace, binary)
    theirs = callgrind_functions(argv, tmp_path)

    for name in FUNCTIONS:
        if theirs.get(name, 0) == 0:  # inlined at this optimization level
            continue
        assert ours[name] == pytest.approx(theirs[name], rel=0.01), name

    ours_total = sum(ours[n] for n in FUNCTIONS)
    theirs_total = sum(theirs.get(n, 0) for n in FUNCTIONS)
    assert ours_total == pytest.approx(theirs_total, rel=0.01)
    for name in FUNCTIONS:
        assert ours[name] / ours_total == pytest.approx(theirs.get(name, 0) / theirs_total, abs=0.01), name


def test_intervals_are_exact_to_a_block(build):
    binary = build("counted.c")
    trace = trace_spawn([binary, "2000000"], interval=1_000_000)
    full = [i for i in trace.intervals if not i.partial]
    assert len(full) >= 10
    for i in full:
        assert 1_000_000 <= i.instructions < 1_000_000 + 64  # cut at the block that crosses the budget
        assert i.instructions == int(i.counts.sum())
        assert len(np.unique(i.pcs)) == len(i.pcs)  # one pair per branch PC
        assert i.end_ns >= i.start_ns > 0
        assert set(i.os) == {"cpu_ns", "minflt", "majflt", "nvcsw", "nivcsw"}
        assert all(v < 1 << 40 for v in i.os.values())
    seqs = sorted(i.seq for i in trace.intervals)
    assert seqs == list(range(len(seqs)))
    assert trace.intervals[-1].partial


def test_self_loops_count_exactly_whatever_their_trip_count(build, tmp_path):
    """Self-looping blocks (counted in a register, unrolled by two) left after every trip count from
    1 to 300 and after long ones, with intervals cut all over them: callgrind's counts, exactly,
    and every interval cut at the iteration that crossed its budget."""
    binary = build("trip_counts.c")
    argv = [binary, "2"]
    native = subprocess.run(argv, capture_output=True, check=True, timeout=300).stdout
    interval = 100_003
    trace = trace_spawn(argv, interval=interval)
    assert trace.ended.how == "exited" and trace.ended.code == 0
    assert trace.output.get(1, b"") == native
    full = [i for i in trace.intervals if not i.partial]
    assert len(full) >= 500
    for i in full:
        assert interval <= i.instructions < interval + 16, i.instructions  # 16: the longest block here
    ours = per_function(trace, binary)
    theirs = callgrind_functions(argv, tmp_path)
    for name in ("spin", "spin_lea", "spin_cmp"):
        assert ours[name] == theirs[name], name


def test_a_thread_closed_by_another_at_exit_keeps_its_own_cpu_and_counts(build):
    # workers3 fork: the main thread exits while two workers run, so it closes their last intervals;
    # those once carried the exiting thread's getrusage less the worker's start (a wrapped ~1.8e19 ns)
    trace = trace_spawn([build("workers3.c"), "fork", "3"], interval=1_000_000)
    assert trace.ended.how == "exited" and trace.ended.code == 0, trace.ended
    for i in trace.intervals:
        assert all(v < 1 << 40 for v in i.os.values()), (i.thread, i.seq, i.partial, i.os)
    assert len({i.thread for i in trace.intervals}) >= 3
