"""Sampled mode reading several rings at once: the same records give the same windows whether the
host reads them a moment at a time or all in one late batch (an unwatched run reads its rings once a
batch, stop 48). A ring per CPU holds what happened on that CPU in order, but rings are read one after
the other: a forked child's samples in one ring came before its FORK record in another, and a library
swapped twice on two CPUs had its MMAP records out of order. Records built by hand, answers known by
construction."""

from __future__ import annotations

import random
import time
import struct

import pytest

from test_ring_parse import A, B, BASE, IDENT, MODULE, PID, USER, Chunks, key, leaf, mmap, sample
from phasescope.sources.modules import ModuleMap, fnv1a32
from phasescope.sources.sampler import Sampler

CHILD = PID + 7  # a process PID forks (no such process on this machine either)


def fork(pid: int, ppid: int, t: int, rtype: int = 7) -> bytes:
    """A FORK (7) or EXIT (4) record of process ``pid``'s main thread."""
    return struct.pack("<IHHIIIIQ", rtype, 0, 32, pid, ppid, pid, ppid, t)


def sampler(rings: int, stacks: bool) -> Sampler:
    s = Sampler(PID, period_ns=1_000_000, modules=ModuleMap([MODULE]), children=True, stacks=stacks)
    s.window_samples = 4
    s._started, s._own, s._id_tid = True, {PID}, {IDENT: PID}
    s._rings = {cpu: Chunks([]) for cpu in range(rings)}
    s._last_scan = float("inf")  # no /proc look for threads whose EXIT was lost: PID is no process
    return s


def windows(timed, stacks: bool, together: bool):
    """The windows of ``timed`` ([(ring, time, record bytes)], each ring's in time order) read in one
    batch (``together``) or a time step at a time; as ``(pid, thread, seq, {key: count})``."""
    rings = 1 + max(r for r, _, _ in timed)
    s = sampler(rings, stacks)
    out = []
    if together:
        for r in range(rings):
            s._rings[r].chunks = [b"".join(rec for ring, _, rec in timed if ring == r)]
        out += s.poll(0)
    else:
        for t in sorted({t for _, t, _ in timed}):
            for r in range(rings):
                s._rings[r].chunks = [b"".join(rec for ring, when, rec in timed if ring == r and when == t)]
            out += s.poll(0)
    out += s.stop()
    return sorted(((w.pid, w.thread, w.seq, dict(zip(w.keys.tolist(), w.counts.tolist()))) for w in out),
                  key=lambda w: (w[0] or 0, w[1], w[2]))


def record(t: int, stacks: bool, **kw) -> bytes:
    return sample(kw.pop("ip", A), t, (), **kw) if stacks else leaf(kw.pop("ip", A), t, **kw)


@pytest.mark.parametrize("stacks", [False, True])
def test_a_childs_samples_read_before_its_fork_record_are_its_own(stacks):
    """The child ran on CPU 0, its parent forked it on CPU 1: read together, ring 0 came first and
    the child's samples were dropped as another process's (one window of the child where it has two)."""
    timed = [(1, t, record(t, stacks)) for t in range(10, 14)] + [(1, 14, fork(CHILD, PID, 14))]
    timed += [(0, t, record(t, stacks, ip=B, pid=CHILD, tid=CHILD)) for t in range(15, 23)]
    timed += [(1, 23, fork(CHILD, PID, 23, rtype=4))]
    expected = [(None, PID, 0, {key(A): 4}), (CHILD, CHILD, 0, {key(B): 4}), (CHILD, CHILD, 1, {key(B): 4})]
    assert windows(timed, stacks, together=False) == expected
    assert windows(timed, stacks, together=True) == expected


@pytest.mark.parametrize("stacks", [False, True])
def test_libraries_swapped_on_two_cpus_key_each_sample_with_the_library_of_its_time(tmp_path, stacks):
    """x.so mapped over the program on CPU 1, then y.so over x.so on CPU 0: read together, ring 0's
    MMAP came first and the map of each time was wrong (x.so's samples keyed as y.so or the program)."""
    lib_x, lib_y = tmp_path / "x.so", tmp_path / "y.so"
    lib_x.write_bytes(b"")
    lib_y.write_bytes(b"")
    timed = [(0, t, record(t, stacks)) for t in range(10, 14)]
    timed += [(1, 14, mmap(str(lib_x), BASE + 0x1000, 0x1000, 0x1000, 14))]
    timed += [(1, t, record(t, stacks)) for t in range(15, 19)]
    timed += [(0, 19, mmap(str(lib_y), BASE + 0x1000, 0x1000, 0x1000, 19))]
    timed += [(0, t, record(t, stacks)) for t in range(20, 24)]
    as_x, as_y = (fnv1a32(name) << 32 | (A - BASE) for name in ("x.so", "y.so"))
    expected = [(None, PID, 0, {key(A): 4}), (None, PID, 1, {as_x: 4}), (None, PID, 2, {as_y: 4})]
    assert windows(timed, stacks, together=False) == expected
    assert windows(timed, stacks, together=True) == expected


@pytest.mark.parametrize("seed", range(6))
def test_one_batch_gives_the_windows_of_many_small_reads_however_the_cpus_took_the_records(tmp_path, seed):
    """A target that forks a child and swaps a library twice, its records spread over three CPUs at
    random: read in one batch, the windows are those of reading each moment's records at once."""
    rng = random.Random(seed)
    libs = [tmp_path / f"{name}.so" for name in ("x", "y")]
    for lib in libs:
        lib.write_bytes(b"")
    events = [(t, record(t, False)) for t in range(10, 20)] + [(20, fork(CHILD, PID, 20))]
    events += [(t, record(t, False, ip=B, pid=CHILD, tid=CHILD)) for t in range(21, 33, 2)]
    events += [(t, record(t, False)) for t in range(22, 34, 2)]
    for i, lib in enumerate(libs):
        at = 34 + 6 * i
        events += [(at, mmap(str(lib), BASE + 0x1000, 0x1000, 0x1000, at))]
        events += [(t, record(t, False)) for t in range(at + 1, at + 6)]
    events += [(46, fork(CHILD, PID, 46, rtype=4))]
    timed = [(rng.randrange(3), t, rec) for t, rec in events]
    assert windows(timed, False, together=True) == windows(timed, False, together=False)
    assert windows(timed, False, together=False) == windows([(0, t, rec) for t, rec in events], False, True)


@pytest.mark.parametrize("stacks", [False, True])
def test_a_childs_samples_read_before_its_fork_record_was_written_wait_for_it(stacks):
    """Ring 0 read, then the parent forked on CPU 0 and the child ran on CPU 1, then ring 1 read (the
    host preempted between the two reads): the child's samples, taken after the read began, came a
    read before their FORK record and were dropped as another process's; now they wait a read."""
    now = time.time_ns() + 60_000_000_000  # after both reads began: what a read finds of what came since
    s = sampler(2, stacks)
    s._rings[1].chunks = [b"".join(record(now + t, stacks, ip=B, pid=CHILD, tid=CHILD) for t in range(1, 9))]
    assert s.poll(0) == [] and s.foreign == 0
    s._rings[0].chunks = [fork(CHILD, PID, now)]
    out = s.poll(0) + s.stop()
    assert s.foreign == 0
    assert sorted((w.pid, w.seq, w.samples) for w in out) == [(CHILD, 0, 4), (CHILD, 1, 4)]
