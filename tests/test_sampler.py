"""The perf cpu-clock sampler (``--mode sampled`` signal) against real compiled processes."""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter

import numpy as np
import pytest

from phasescope.errors import InputError
from phasescope.engine.interval import Interval
from phasescope.sources.modules import fnv1a32
from phasescope.sources import perf_event as sm
from phasescope.sources.procfs import module_map_from_proc
from phasescope.sources.sampler import Sampler
from phasescope.sources.sampled_source import DEFAULT_PERIOD_NS, DEFAULT_WINDOW_SAMPLES

from agent_support import functions
from conftest import PROGRAMS, end_process


def _perf_available() -> bool:
    a = sm.PerfEventAttr(type=sm.PERF_TYPE_SOFTWARE, size=136, config=sm.PERF_COUNT_SW_CPU_CLOCK)
    a.exclude_kernel = a.exclude_hv = 1
    try:
        os.close(sm.perf_event_open(a, 0, -1))
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _perf_available(), reason="perf_event_open refused on this machine")


def _run_sampled(argv, go: bytes = b"go\n", **kw):
    """Start ``argv`` (it prints "ready" and waits for a line), sample it to its end.
    Returns (stdout bytes, windows, sampler, module map taken at start)."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        head = p.stdout.readline()
        s = Sampler(p.pid, **kw).start()
        mods = s.modules
        p.stdin.write(go)
        p.stdin.close()
        windows = s.run_out()
        out = head + p.stdout.read()
    finally:
        end_process(p)
    return out, windows, s, mods


def _function_of(binary):
    """key -> function name of ``binary`` for a module map of a running copy of it."""
    funcs = functions(binary)
    tag = fnv1a32(os.path.basename(binary)) << 32

    def name(key: int) -> str:
        if key >> 32 != tag >> 32:
            return "other"
        off = key & 0xFFFFFFFF
        return next((n for start, size, n in funcs if start <= off < start + size), "other")

    return name


@pytest.mark.slow
def test_two_phases_in_order_and_output_unchanged(build):
    exe = build("sampled_two.c")
    native = subprocess.run([exe, "120000000"], capture_output=True, check=True, timeout=300).stdout
    out, windows, s, mods = _run_sampled([exe, "120000000", "wait"], window_samples=100, period_ns=250_000)
    assert out == native  # the target's output is byte-identical
    assert windows and all(isinstance(w, Interval) and w.mode == "sampled" for w in windows)
    assert {w.thread for w in windows} == {windows[0].thread}
    assert [w.seq for w in windows] == list(range(len(windows)))
    assert all(w.instructions is None for w in windows)  # never invented
    assert all(w.samples == 100 and not w.partial for w in windows[:-1])
    # the last window is cut by the exit, unless the samples came out an exact multiple of 100
    assert 0 < windows[-1].samples <= 100 and (windows[-1].partial or windows[-1].samples == 100)
    for w in windows:
        assert w.counts.sum() == w.samples and w.period_ns == 250_000
        assert np.array_equal(w.keys, mods.keys(w.pcs))  # keys exactly as exact mode computes them
        assert w.start_ns < w.end_ns
    name = _function_of(exe)
    tops = [name(int(w.keys[w.counts.argmax()])) for w in windows if w.samples >= 50]
    # phase_a then phase_b: one switch, at most one mixed window in between
    assert tops[0] == "phase_a" and tops[-1] == "phase_b", tops
    assert tops.index("phase_b") == len(tops) - tops[::-1].index("phase_a"), tops
    shares = [Counter({name(int(k)): int(c) for k, c in zip(w.keys, w.counts)}) for w in windows]
    pure = [max(c.values()) / sum(c.values()) for c in shares[:-1]]
    assert sorted(pure)[1] > 0.9  # all but the transition window are (nearly) one function
    assert s.lost == 0 and s.duplicates == 0 and s.foreign == 0


@pytest.mark.slow
def test_threads_created_after_start_are_sampled_from_their_start(build):
    exe = build("sampled_threads.c", "-pthread")
    out, windows, s, _ = _run_sampled([exe, "3", "40"], window_samples=1000, period_ns=250_000)
    cpu = {int(t): int(ns) for t, ns in re.findall(rb"thread (\d+) cpu_ns (\d+)", out)}
    assert len(cpu) == 3
    assert set(cpu) <= s.threads and not s.live
    name = _function_of(exe)
    for tid, ns in cpu.items():
        mine = [w for w in windows if w.thread == tid]
        assert len(mine) == 1 and mine[0].partial and mine[0].seq == 0  # flushed at its exit
        sampled_ns = mine[0].cpu_ns
        # 40 ms = 160 samples: the whole life of a thread created after start() is covered
        # (a /proc poll every 50 ms would miss most of it); allow sampling jitter, and the CPU
        # clock's undercount when a loaded machine runs the thread in short slices (25 of 40 ms
        # once at load 13, review r46d)
        assert abs(sampled_ns - ns) < 0.4 * ns + 3 * s.period_ns, (sampled_ns, ns)
        top = Counter()
        for k, c in zip(mine[0].keys, mine[0].counts):
            top[name(int(k))] += int(c)
        assert top.most_common(1)[0][0] in ("spin", "other")  # spin, or clock_gettime in the vDSO
        assert top["spin"] > 0.2 * mine[0].samples
    assert s.open_fds <= len(s._rings)  # exited threads' descriptors closed (ring owners last)


@pytest.mark.slow
def test_existing_threads_and_fd_closing(build):
    exe = build("threads4.c", "-pthread")
    out, windows, s, _ = _run_sampled([exe, "20000000"], window_samples=200)
    tids = {int(i): int(t) for i, t in re.findall(rb"worker (\d) tid (\d+)", out)}
    assert len(tids) == 4 and set(tids.values()) <= s.threads
    name = _function_of(exe)
    for i, tid in tids.items():
        mine = [w for w in windows if w.thread == tid]
        assert [w.seq for w in mine] == list(range(len(mine))) and mine
        total = Counter()
        for w in mine:
            for k, c in zip(w.keys, w.counts):
                total[name(int(k))] += int(c)
        assert total.most_common(1)[0][0] == f"work{i}", total


def test_missing_process_is_one_line_input_error():
    with pytest.raises(InputError) as e:
        Sampler(2**22 + 12345).start()
    assert "\n" not in str(e.value) and e.value.exit_code == 2


def test_bad_parameters_are_input_errors():
    for kw in ({"period_ns": 10}, {"window_samples": 0}, {"ring_pages": 3}):
        with pytest.raises(InputError):
            Sampler(os.getpid(), **kw)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to an unprivileged user")
def test_refusal_when_not_permitted():
    """An unprivileged user may not sample a root process: one line saying what to do."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        code = 3
        try:
            os.close(r)
            os.setgid(65534)
            os.setuid(65534)
            Sampler(1).start()
            os.write(w, b"no error")
        except InputError as e:
            os.write(w, str(e).encode())
            code = e.exit_code
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 2, msg
    assert "\n" not in msg and "perf_event_paranoid" in msg and "root" in msg and "owns" in msg, msg


def test_module_map_from_proc_matches_own_process():
    mm = module_map_from_proc(os.getpid())
    names = {m.name for m in mm.modules}
    assert any(n.startswith("libc") for n in names)
    import ctypes
    addr = ctypes.cast(ctypes.CDLL(None).getpid, ctypes.c_void_p).value
    name, off = mm.locate(addr)
    assert name.startswith("libc") and 0 < off < 2**32


#: a pid above the kernel's largest pid_max (2**22): never a process, its /proc maps never readable
GONE_PID = (1 << 22) + 1


def test_mmap_records_of_one_executable_in_two_code_segments_make_one_module(tmp_path):
    """Non-PIE node maps its code in three segments (.init/.plt at 0xb6f000, .text at 0xb72000,
    one page at 0x2600000), each at its file offset from the header at 0x400000. With the target
    gone (/proc/PID/maps unreadable, as for a target that exited before its samples were keyed), its
    MMAP records alone key its samples: .text was raw before (the first record's span only)."""
    node = tmp_path / "node"
    node.write_bytes(b"")
    s = Sampler(GONE_PID, before_exec=True)
    for t, (addr, length, pgoff) in enumerate([(0xB6F000, 0x2000, 0x76F000), (0xB72000, 0x1A8C000, 0x772000),
                                               (0x2600000, 0x1000, 0x2200000)]):
        s._mapped(GONE_PID, t, addr, length, pgoff, str(node))
    assert [(m.name, m.base, m.size) for m in s.modules_of(GONE_PID).modules] == [("node", 0x400000, 0x2201000)]
    tag = fnv1a32("node") << 32
    pcs = np.array([0xB6F010, 0x1225A4B, 0x2600004], dtype=np.uint64)
    assert s.keys_for(pcs).tolist() == [tag | 0x76F010, tag | 0xE25A4B, tag | 0x2200004]


@pytest.mark.slow
def test_spawned_program_sampled_after_it_exited_is_keyed_to_its_module(build):
    """A program held before its exec, sampled from its first instruction, whose samples are read
    only after it has exited and been reaped, as a loaded machine can leave a short one: its
    hot function, in a second code segment of the executable (as non-PIE node's .text), keyed to
    its module from the MMAP records (40% of node's samples were raw addresses so)."""
    exe = build("split_text.c", "-no-pie", f"-Wl,-T,{PROGRAMS / 'split_text.ld'}")
    gate_r, gate_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # only os calls until exec
        try:
            os.close(gate_w)
            os.read(gate_r, 1)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.execv(exe, [exe])
        finally:
            os._exit(127)
    os.close(gate_r)
    try:
        opened = sm.open_events(pid, period_ns=DEFAULT_PERIOD_NS, kernel=False, children=False, stacks=True,
                                window_samples=DEFAULT_WINDOW_SAMPLES)
    finally:
        os.write(gate_w, b"g")
        os.close(gate_w)
        status = os.waitpid(pid, 0)[1]
    assert os.waitstatus_to_exitcode(status) == 0
    s = Sampler(pid, before_exec=True, opened=opened).start()
    windows = s.stop()
    keys = Counter()
    for iv in windows:
        keys.update(dict(zip(iv.keys.tolist(), iv.counts.tolist())))
    start, size = next((a, n) for a, n, f in functions(exe) if f == "spin")  # its address: non-PIE, at 0x400000
    tag = fnv1a32(os.path.basename(exe)) << 32
    raw = sum(n for k, n in keys.items() if k < 1 << 32)
    hot = sum(n for k, n in keys.items() if tag + start - 0x400000 <= k < tag + start + size - 0x400000)
    assert raw == 0 and hot > 0.9 * sum(keys.values()), (raw, hot, sum(keys.values()))
