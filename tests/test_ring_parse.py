"""Sampled mode reading ring bytes: perf records built by hand (samples with call chains, kernel
ticks, another process's samples, a duplicate, LOST, FORK and EXIT records) go through the
Sampler's parsing and window cutting, and give the windows known by construction."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from phasescope.sources.modules import KERNEL_KEY, Module, ModuleMap, fnv1a32
from phasescope.sources.sampler import Sampler
from phasescope.sources.system_sampler import ProcessFilter, SystemSampler

PID = 1 << 23  # above any pid_max: no such process, nothing on disk for it
TID2 = PID + 1
IDENT, IDENT2 = 7, 8
USER_CONTEXT = 2**64 - 512  # PERF_CONTEXT_USER, the marker that opens a user call chain
BASE = 0x5555_0000_0000
MODULE = Module("prog", BASE, 0x10000, "/nonexistent/prog")
USER, KERNEL = 2, 1  # PERF_RECORD_MISC_USER, PERF_RECORD_MISC_KERNEL


def key(address: int) -> int:
    return fnv1a32("prog") << 32 | (address - BASE)


def sample(ip: int, t: int, chain=(), *, tid: int = PID, pid: int = PID, ident: int = IDENT, misc: int = USER) -> bytes:
    body = struct.pack("<QQIIQQ", ident, ip, pid, tid, t, len(chain)) + struct.pack(f"<{len(chain)}Q", *chain)
    return struct.pack("<IHH", 9, misc, 8 + len(body)) + body


def task(rtype: int, tid: int, t: int) -> bytes:  # FORK (7) or EXIT (4) of a thread of PID
    return struct.pack("<IHHIIIIQ", rtype, 0, 32, PID, PID, tid, PID, t)


def lost(n: int) -> bytes:
    return struct.pack("<IHHQQ", 2, 0, 24, IDENT, n)


class Chunks:
    """A ring that gives the chunks it is handed, one per read."""

    fd = -1

    def __init__(self, chunks):
        self.chunks = list(chunks)

    def read(self) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def close(self) -> None:
        pass


def sampler(chunks, **kw) -> Sampler:
    s = Sampler(PID, period_ns=1_000_000, modules=ModuleMap([MODULE]), **kw)
    s.window_samples = 4  # below --window's least, to keep the records few
    s._started = True  # as start() leaves it: its own events (one ring), their ids
    s._own, s._id_tid, s._rings = {PID}, {IDENT: PID, IDENT2: TID2}, {0: Chunks(chunks)}
    return s


def drain(s: Sampler, reads: int):
    windows = []
    for _ in range(reads):
        windows += s.poll(0)
    return windows + s.stop()


A, B, C = BASE + 0x100, BASE + 0x200, BASE + 0x300  # code addresses; B + 1 and C + 1 are return addresses


def test_known_records_give_known_windows_stacks_and_counters():
    first = b"".join([
        sample(A, 10, (USER_CONTEXT, A, B + 1, C + 1)),  # A called from B, called from C
        sample(A, 11, (USER_CONTEXT, A, B + 1, C + 1)),
        sample(B, 12, (USER_CONTEXT, B, C + 1)),
        sample(0xFFFF_FFFF_8100_0000, 13, (USER_CONTEXT, A, B + 1), misc=KERNEL),  # a kernel tick: dropped
        sample(A, 14, (USER_CONTEXT, A, B + 1, C + 1), pid=PID + 5),  # another process's
        lost(3),
        task(7, TID2, 15),  # a thread is born: it samples through its parent's event
        sample(C, 16, (USER_CONTEXT, C, 0x10)),  # a chain into no module: cut there, the leaf alone
    ])
    second = b"".join([
        sample(A, 17, (USER_CONTEXT, A, B + 1, C + 1), tid=TID2),
        sample(A, 18, (USER_CONTEXT, A, B + 1, C + 1), tid=PID, ident=IDENT2),  # a duplicate
        sample(B, 19, (USER_CONTEXT, B, C + 1)),
        task(4, TID2, 20),  # the thread exits: its window is cut, partial
    ])
    s = sampler([first, second])
    windows = drain(s, 2)
    assert (s.samples, s.kernel_samples, s.foreign, s.duplicates, s.lost, s.leaf_only) == (6, 1, 1, 1, 3, 1)
    by = {(w.thread, w.seq): w for w in windows}
    assert set(by) == {(PID, 0), (PID, 1), (TID2, 0)}
    w = by[PID, 0]  # the first four samples of the main thread: A, A, B, C
    assert not w.partial and w.samples == 4 and (w.start_ns, w.end_ns) == (10 - 1_000_000, 16)
    assert dict(zip(w.pcs.tolist(), w.counts.tolist())) == {A: 2, B: 1, C: 1}
    assert w.keys.tolist() == [key(A), key(B), key(C)]
    assert w.stacks == [[2, key(A), key(B), key(C)], [1, key(B), key(C)], [1, key(C)]]  # in order of first sample
    assert w.frames == {key(pc): ("prog", None) for pc in (A, B, C)}
    assert by[PID, 1].partial and by[PID, 1].stacks == [[1, key(B), key(C)]]
    t2 = by[TID2, 0]
    assert t2.partial and t2.samples == 1 and t2.stacks == [[1, key(A), key(B), key(C)]]


def test_kernel_ticks_kept_as_one_key_with_their_user_stack_and_no_stacks_mode():
    tick = sample(0xFFFF_FFFF_8100_0000, 10, (USER_CONTEXT, A, B + 1), misc=KERNEL)  # entered the kernel at A
    s = sampler([tick + sample(A, 11, (USER_CONTEXT, A, B + 1))], kernel=True)
    [w] = drain(s, 1)
    assert s.kernel_samples == 1 and w.pcs.tolist() == [A, KERNEL_KEY]
    assert w.stacks == [[1, KERNEL_KEY, key(A - 1), key(B)], [1, key(A), key(B)]]  # every caller keyed at address - 1
    assert w.frames[KERNEL_KEY] == (None, "[kernel]")
    flat = sampler([struct.pack("<IHHQQIIQ", 9, USER, 40, IDENT, A, PID, PID, 10)], stacks=False)
    [w] = drain(flat, 1)
    assert w.pcs.tolist() == [A] and w.stacks is None


def test_a_truncated_record_waits_and_a_chain_past_its_record_is_no_chain():
    whole = sample(A, 10, (USER_CONTEXT, A, B + 1))
    bad = bytearray(sample(B, 11, (USER_CONTEXT, B, C + 1)))
    bad[48:56] = struct.pack("<Q", 99)  # nr larger than the record
    s = sampler([whole + bytes(bad) + whole[:20]])
    [w] = drain(s, 1)
    assert s.samples == 2 and w.stacks == [[1, key(A), key(B)], [1, key(B)]]
    assert np.array_equal(w.counts, [1, 1])


def leaf(ip: int, t: int, *, tid: int = PID, pid: int = PID, ident: int = IDENT, misc: int = USER) -> bytes:
    """A sample record without a call chain (``stacks`` off: 40 bytes)."""
    return struct.pack("<IHHQQIIQ", 9, misc, 40, ident, ip, pid, tid, t)


@pytest.mark.parametrize("kernel", [False, True])
def test_records_without_chains_decoded_in_runs_give_the_known_windows(kernel):
    tick = 0xFFFF_FFFF_8100_0000
    first = b"".join([
        leaf(A, 10), leaf(A, 11), leaf(B, 12),
        leaf(tick, 13, misc=KERNEL),  # a kernel tick: dropped, or kept as one key with ``kernel``
        leaf(A, 14, pid=PID + 5),  # another process's
        lost(3),  # a record of another kind and size ends a run
        task(7, TID2, 15),
        leaf(C, 16),
    ])
    second = b"".join([
        leaf(A, 17, tid=TID2),  # through its parent's event: kept
        leaf(A, 18, tid=PID, ident=IDENT2),  # a duplicate
        leaf(B, 19),
        task(4, TID2, 20),
        leaf(C, 21),
    ])
    s = sampler([first, second], stacks=False, kernel=kernel)
    s._last_scan = float("inf")  # PID is no process: no /proc look for threads whose EXIT was lost
    windows = drain(s, 2)
    assert (s.samples, s.kernel_samples, s.foreign, s.duplicates, s.lost) == (7 + kernel, 1, 1, 1, 3)
    got = {(w.thread, w.seq): (dict(zip(w.pcs.tolist(), w.counts.tolist())), w.partial, w.stacks)
           for w in windows}
    main = [A, A, B] + [KERNEL_KEY] * kernel + [C, B, C]
    want = {(PID, 0): ({}, False, None), (PID, 1): ({}, True, None), (TID2, 0): ({A: 1}, True, None)}
    for pc in main[:4]:
        want[PID, 0][0][pc] = want[PID, 0][0].get(pc, 0) + 1
    for pc in main[4:]:
        want[PID, 1][0][pc] = want[PID, 1][0].get(pc, 0) + 1
    assert got == want
    assert windows[0].start_ns == 10 - 1_000_000 and windows[0].end_ns == (13 if kernel else 16)


def test_remembered_keys_follow_the_module_map():
    s = sampler([])
    outside = 0x10  # in no module: its raw address, never remembered (a perf map may name it later)
    assert s.keys_for(np.array([A, B, outside], dtype=np.uint64)).tolist() == [key(A), key(B), outside]
    assert s._known == {A: key(A), B: key(B)}
    assert s.keys_for(np.array([B, A], dtype=np.uint64)).tolist() == [key(B), key(A)]
    s.modules = ModuleMap([Module("other", BASE, 0x10000, "/nonexistent/other")])  # another program there
    assert s.keys_for(np.array([A, outside], dtype=np.uint64)).tolist() == [fnv1a32("other") << 32 | 0x100, outside]
    s.modules.add(Module("lib", 0x10, 0x100, "/nonexistent/lib"))  # changed in place (an agent's map)
    assert s.keys_for(np.array([outside, A], dtype=np.uint64)).tolist() == [fnv1a32("lib") << 32,
                                                                            fnv1a32("other") << 32 | 0x100]


@pytest.mark.parametrize("stacks", [False, True])
def test_system_wide_records_give_windows_with_and_without_chains(stacks):
    """-a keeps a chain only with --log/--profile; without, its samples are held as the Sampler's
    chainless ones (each drain failed on a 4-field record before the fix)."""
    s = SystemSampler(ProcessFilter(pids=frozenset({PID})), period_ns=1_000_000, stacks=stacks)
    s.window_samples = 4
    s._started, s._rings = True, {0: Chunks([b"".join(leaf(pc, t) for t, pc in enumerate([A, A, B, C, B], 10))])}
    s._last_scan = float("inf")  # PID is no process: no /proc look for its threads
    windows = drain(s, 1)
    assert [(w.thread, w.seq, w.samples, w.partial) for w in windows] == [(PID, 0, 4, False), (PID, 1, 1, True)]
    assert np.array_equal(windows[0].counts, [2, 1, 1]) and windows[0].pcs.tolist() == [A, B, C]


def test_keys_remembered_before_a_map_is_read_again_are_not_used_in_that_window():
    """An address remembered in the old map (a library unloaded, another there, or an exec) and one
    outside it, in one window: the map is read again for the second, and both are keyed in the new
    map (as every address was before keys were remembered)."""
    import ctypes

    from phasescope.sources.procfs import module_map_from_proc
    libc_pc = ctypes.cast(ctypes.CDLL(None).getpid, ctypes.c_void_p).value  # real code of this process
    fresh = module_map_from_proc(os.getpid())
    other = next(m for m in fresh.modules if not m.base <= libc_pc < m.base + m.size)
    s = Sampler(os.getpid(), period_ns=1_000_000, modules=ModuleMap([Module("gone", libc_pc & ~0xFFF, 0x1000, "")]))
    s._own_modules = True  # its maps read again from /proc, as a sampler reading its own
    assert s.keys_for(np.array([libc_pc], dtype=np.uint64)).tolist() == [fnv1a32("gone") << 32 | libc_pc & 0xFFF]
    pcs = np.array([libc_pc, other.base], dtype=np.uint64)
    assert s.keys_for(pcs).tolist() == fresh.keys(pcs).tolist()


def mmap(path: str, addr: int, length: int, pgoff: int, t: int) -> bytes:
    """A PERF_RECORD_MMAP of PID with ``sample_id_all`` (its pid, tid, time and identifier at the end)."""
    name = path.encode() + b"\0" * (8 - len(path) % 8)
    body = struct.pack("<IIQQQ", PID, PID, addr, length, pgoff) + name + struct.pack("<IIQQ", PID, PID, t, IDENT)
    return struct.pack("<IHH", 1, USER, 8 + len(body)) + body


def test_a_library_mapped_over_a_module_keys_the_samples_after_it_and_only_those(tmp_path):
    """A library unloaded and another mapped at its address (dlclose, dlopen): the samples before
    the MMAP record keep the old module's key and name, those after get the new one's, within one
    window too; the old map is forgotten once no sample of its time is left to key."""
    other = fnv1a32("other.so") << 32 | (A - BASE)
    chain = (USER_CONTEXT, A)
    lib = tmp_path / "other.so"
    lib.write_bytes(b"")  # a file on disk (not an ELF file: named by its basename)
    s = sampler([b"".join([sample(A, 10, chain), sample(A, 11, chain),
                           mmap(str(lib), BASE + 0x1000, 0x1000, 0x1000, 12),
                           sample(A, 13, chain), sample(A, 14, chain)]),
                 sample(A, 15, chain)])
    windows = drain(s, 2)
    assert [dict(zip(w.keys.tolist(), w.counts.tolist())) for w in windows] == [{key(A): 2, other: 2}, {other: 1}]
    assert windows[0].frames == {key(A): ("prog", None), other: ("other.so", None)}
    assert windows[0].stacks == [[2, key(A)], [2, other]] and windows[0].pcs.tolist() == [A, A]
    assert s._before == [] and [m.name for m in s.modules.modules] == ["other.so"]


def test_an_executable_mapping_of_no_file_on_disk_leaves_the_modules_alone():
    """An injected agent (sampled mode's bursts: Frida's, from a memfd) or a mapping below its
    file offset is no library image: taken as one it swallowed the modules around it (a chain's
    address 0 fell inside one, and keying it raised)."""
    chain = (USER_CONTEXT, A)
    s = sampler([b"".join([mmap("/memfd:frida-agent-64.so (deleted)", BASE + 0x1000, 0x1000, 0x1000, 12),
                           mmap("/bin/sh", 0x1000, 0x1000, 0x2000, 13),  # below its offset: no image
                           sample(A, 14, chain), sample(A, 15, chain)])])
    windows = drain(s, 1)
    assert [dict(zip(w.keys.tolist(), w.counts.tolist())) for w in windows] == [{key(A): 2}]
    assert s.modules.modules == [MODULE] and s._before == []


def test_an_event_opened_after_the_first_read_is_known_to_the_next():
    """The event-id table is sorted once and kept until it grows: a thread whose events open
    between two reads has them known (the main thread sampled through the new thread's event,
    while it has its own, is a duplicate)."""
    leaf = lambda ip, t, **kw: struct.pack("<IHHQQIIQ", 9, USER, 40, kw.get("ident", IDENT), ip, PID,  # noqa: E731
                                           kw.get("tid", PID), t)
    s = sampler([leaf(A, 10) + leaf(B, 11)], stacks=False)
    s._last_scan = float("inf")  # PID is in no /proc: its thread must not look exited between the reads
    windows = s.poll(0)
    s._id_tid[IDENT + 10], s._own = TID2, {PID, TID2}  # as _open_thread leaves them
    s._rings[0].chunks.append(leaf(C, 12, ident=IDENT + 10) + leaf(C, 13) + leaf(A, 14))
    windows += drain(s, 1)
    assert s.duplicates == 1 and s.samples == 4
    [w] = windows
    assert not w.partial and dict(zip(w.pcs.tolist(), w.counts.tolist())) == {A: 2, B: 1, C: 1}
