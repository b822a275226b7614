"""Instruction counts of the agent against valgrind's (callgrind), on a program with known work."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from agent_support import callgrind_functions, per_function, trace_spawn

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")]

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
    native = subprocess.run(argv, capture_output=True, check=True).stdout
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


# Issue 33: rep strings count as callgrind counts them (every iteration, plus its last pass).
REP_FUNCTIONS = tuple(f"{k}{w}" for k in ("movs", "stos", "lods", "repe_cmps", "repe_scas", "repne_scas")
                      for w in "bwlq")
#: glibc picks its memcpy/memset, and when they use rep movsb, by the CPU's features and cache sizes;
#: valgrind's CPU has no AVX-512 and other caches, so both runs get the same (valgrind's) settings
SAME_GLIBC = ("glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-AVX512ER,-AVX512PF"
              ":glibc.cpu.x86_rep_movsb_threshold=0x2000:glibc.cpu.x86_non_temporal_threshold=0x200000"
              ":glibc.cpu.x86_shared_cache_size=0x800000:glibc.cpu.x86_data_cache_size=0x8000")


def _total(trace) -> int:
    return sum(int(i.instructions) for i in trace.intervals)


def test_rep_strings_count_as_callgrind_does(build, tmp_path):
    """Every kind and width, rcx = 0, comparisons stopping early, at the last element and never:
    callgrind's count per function, exactly; an interval cut at most one chunk of a long rep
    instruction past its size; the target's output untouched (repne cmps too, which valgrind cannot run)."""
    binary = build("rep_strings.c")
    argv = [binary, "2", "1048576"]
    interval = 100_003
    trace = trace_spawn(argv, interval=interval)
    assert trace.ended.how == "exited" and trace.ended.code == 0
    ours = per_function(trace, binary)
    theirs = callgrind_functions(argv, tmp_path)
    for name in REP_FUNCTIONS:
        assert ours[name] == theirs[name], name
    for i in trace.intervals:
        if not i.partial:  # a 1 MiB memset runs in chunks of 65,535 iterations, the budget checked after each
            assert interval <= i.instructions < interval + 65_535 + 64, i.instructions
    once = per_function(trace_spawn(argv, interval=interval, rep_count="once"), binary)
    assert ours["movsb"] > once["movsb"] and once["lodsb"] == ours["lodsb"]
    with_repne_cmps = argv + ["repne-cmps"]
    native = subprocess.run(with_repne_cmps, capture_output=True, check=True, timeout=60).stdout
    traced = trace_spawn(with_repne_cmps, interval=interval)
    assert traced.ended.how == "exited" and traced.output.get(1, b"") == native
    assert per_function(traced, binary)["repne_cmpsq"] > 0


def _valgrind_total(tool_args, argv, pattern) -> int:
    proc = subprocess.run(["valgrind", *tool_args, *argv], capture_output=True, check=True, timeout=300)
    return int(re.search(pattern, proc.stderr).group(1).replace(b",", b""))


@pytest.mark.parametrize("rep_count", ["iterations", "once"])
def test_memcpy_memset_totals_match_valgrind(build, tmp_path, monkeypatch, rep_count):
    """glibc's memcpy and memset of 1 MiB (rep movsb / rep stosb): what four more rounds add is what
    callgrind counts (iterations: about 8.9 million) and what exp-bbv counts (once: about 284,000).
    The difference of two runs takes out what ran before tracing started (the loader, about 148,000
    instructions here). Within 64: valgrind's own count of one binary and input moves by up to 22
    from run to run (glibc's paths depend on where the stack and heap land)."""
    binary = build("rep_strings.c")
    monkeypatch.setenv("GLIBC_TUNABLES", SAME_GLIBC)
    if rep_count == "iterations":
        tool = ["--tool=callgrind", f"--callgrind-out-file={tmp_path}/cg.%p"]
        pattern = rb"refs:\s+([\d,]+)"
    else:
        tool = ["--tool=exp-bbv", f"--bb-out-file={tmp_path}/bb.%p", "--interval-size=100000000"]
        pattern = rb"Total instructions: (\d+)"
    theirs = [_valgrind_total(tool, [binary, rounds, "1048576"], pattern) for rounds in ("1", "5")]
    ours = [_total(trace_spawn([binary, rounds, "1048576"], interval=1_000_003, rep_count=rep_count))
            for rounds in ("1", "5")]
    assert abs((ours[1] - ours[0]) - (theirs[1] - theirs[0])) <= 64, (ours, theirs)
