"""HotSpot's JIT code keyed by its Java method in sampled mode (sources/hotspot.py, issues 27, 32):
the segment-map walk and the compressed ints on constructed bytes, the ELF symbol lookup on this
interpreter's libc, and a real JVM whose compiled methods must be keyed and named by method."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

from conftest import run_cli
from phasescope.engine.config import EngineConfig
from phasescope.engine.footprint import footprints
from phasescope.sources.elf_symbols import symbol_values
from phasescope.sources.hotspot import FREE_SEGMENT, HotSpotCode, _Blob, block_start, read_int
from phasescope.sources.modules import METHOD_KEY, METHOD_KEY_END, method_of
from phasescope.sources.perf_map import jit_tag
from phasescope.sources.procfs import module_map_from_proc


def test_the_segment_map_walk_finds_each_blocks_first_segment():
    # CodeHeap's map: a block's first segment is 0, each later one the hops back (at most 0xFE
    # each); free segments 0xFF. Blocks: [0, 3), free [3, 5), [5, 5 + 300).
    long_block = [0] + [1 + i % 0xFE for i in range(299)]
    segmap = bytes([0, 1, 2, FREE_SEGMENT, FREE_SEGMENT] + long_block)
    assert [block_start(segmap, i) for i in range(5)] == [0, 0, 0, None, None]
    assert {block_start(segmap, i) for i in range(5, 305)} == {5}
    assert block_start(segmap, 305) is None  # past the map
    # the part of the map that ends at a segment: -1 when the block begins before it (read more)
    assert block_start(segmap[200:], 304 - 200) == -1
    assert block_start(segmap[5:], 299) == 0
    # hops onto a free segment: a map being written names no block
    assert block_start(bytes([0, FREE_SEGMENT, 1]), 2) is None


def test_compressed_ints_read_as_hotspot_writes_them():
    # UNSIGNED5: a byte below 192 ends the number; each byte before it adds (b) and counts 64x more after
    assert read_int(bytes([5, 7]), 0) == (5, 1)
    assert read_int(bytes([200, 3]), 0) == (200 + 3 * 64, 2)
    assert read_int(bytes([255, 255, 1]), 0) == (255 + 255 * 64 + 1 * 64 * 64, 3)
    assert read_int(bytes([200]), 0) == (-1, 1)  # cut short


def test_a_pc_takes_the_method_of_the_innermost_scope_of_the_next_debug_point():
    # metadata: two Method* words; scope data after it: at 1, sender 0 (the root), method index 2
    # (the second word), bci 8; at 4, sender 1 (inlined), index 1, bci 9. Debug points at code
    # offsets 0x10, 0x20, 0x30, 0x40 with scopes at 1, 0 (none), 4 and 0.
    scopes = struct.pack("<QQ", 0x7000, 0x7100) + bytes([0, 0, 2, 8, 1, 1, 9])
    blob = _Blob((64, 1), code=0x1000, method=0x6000, pc_offsets=[0x10, 0x20, 0x30, 0x40], decodes=[1, 0, 4, 0],
                 scopes=scopes, scope_at=16)
    # the first point past the PC; where it has no scope (or there is none), the last point at or
    # before the PC; where neither has one, the nmethod's own method. The bytecode index (+1, as
    # HotSpot writes it) is kept for the root scope's code only (sender 0).
    assert [blob.place_at(0x1000 + off) for off in (0x0, 0x10, 0x1f, 0x20, 0x2f, 0x30, 0x3f, 0x40, 0x80)] == [
        (0x7100, 8), (0x7100, 8), (0x7100, 8), (0x7000, 0), (0x7000, 0), (0x7000, 0), (0x7000, 0),
        (0x6000, 0), (0x6000, 0)]


def test_symbol_values_finds_data_and_function_symbols_in_libc():
    libc = ctypes.CDLL(None)
    path = next(line.split()[-1] for line in open("/proc/self/maps") if "libc.so" in line)
    low, found = symbol_values(path, ("malloc", "environ", "no_such_symbol_here"))
    assert set(found) == {"malloc", "environ"}
    # the load bias from /proc/self/maps: the file's lowest mapping less the lowest PT_LOAD address
    base = min(int(line.split("-")[0], 16) for line in open("/proc/self/maps") if line.rstrip().endswith(path))
    assert base - low + found["malloc"] == ctypes.cast(libc.malloc, ctypes.c_void_p).value


def test_a_process_without_libjvm_keeps_its_keys_and_is_never_read():
    # this interpreter: raw addresses outside its modules (its heap) stay what they were
    modules = module_map_from_proc(os.getpid())
    pcs = np.array([id(object()), 0x1000], dtype=np.uint64)
    hotspot = HotSpotCode(os.getpid())
    assert (hotspot.keys(pcs, pcs.copy(), modules) == pcs).all()
    assert hotspot._mem is None and hotspot.names(pcs.tolist()) == [None, None]


JAVA = """
public class Hot {
    static long mix(long x) { return x * 6364136223846793005L + 1442695040888963407L; }
    static long spin(long n) { long s = 0; for (long i = 0; i < n; i++) s = mix(s ^ i); return s; }
    public static void main(String[] a) {
        java.lang.management.ThreadMXBean cpu = java.lang.management.ManagementFactory.getThreadMXBean();
        long s = 0;  // 1.5 s of this thread's CPU time, however loaded the machine
        while (cpu.getCurrentThreadCpuTime() < 1_500_000_000L) s += spin(200_000);
        System.out.println(s != 42 ? "done" : "?");
    }
}
"""


def _hot_code_of_hot_java(tmp_path, *options) -> list:
    """Hot.java traced with ``options`` and a summary: the names of its phases' hot code."""
    (tmp_path / "Hot.java").write_text(JAVA)
    subprocess.run(["javac", "-d", str(tmp_path), str(tmp_path / "Hot.java")], check=True, timeout=120)
    summary = tmp_path / "hot.json"
    r = run_cli(*options, "--no-dashboard", "--summary", str(summary), "-f", shutil.which("java"), "--",
                "-cp", str(tmp_path), "Hot", timeout=180)
    assert r.returncode == 0 and r.stdout.count("done") == 1, r.stderr[-2000:]
    return [c.get("symbol") or "" for p in json.loads(summary.read_text())["phases"] for c in p.get("top_code", [])]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("javac") is None, reason="java is not installed")
def test_a_jvms_compiled_methods_are_keyed_and_named_by_method(tmp_path):
    log = tmp_path / "hot.log"
    hot = _hot_code_of_hot_java(tmp_path, "--mode", "sampled", "--log", str(log))
    counts, raw = {}, 0
    for line in log.read_text().splitlines():
        for key, n in json.loads(line).get("blocks", []):
            counts[key] = counts.get(key, 0) + n
            raw += n if key < 1 << 48 else 0  # a raw address: code no module and no method names
    # the compiled loop is keyed by its method (mix inlined into it or not), whatever its addresses
    tags = {jit_tag(f"java Hot.{m}(J)J") >> 32 for m in ("spin", "mix")}
    spin = sum(n for key, n in counts.items() if key >> 32 in tags)
    assert spin >= 0.5 * sum(counts.values()), (spin, raw, sorted(counts.items(), key=lambda kv: -kv[1])[:5])
    assert any(s in ("[jit]!java Hot.spin", "[jit]!java Hot.mix") for s in hot), hot


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("javac") is None, reason="java is not installed")
def test_exact_mode_names_a_jvms_compiled_methods_as_sampled_mode_does(tmp_path):
    # Exact mode keys a branch in compiled Java code by its Method* (agent/jit_keys.c); the host
    # names that key from the JVM's own tables while it runs, not "java method 0x..." (issue 32)
    profile, log = tmp_path / "hot.folded", tmp_path / "hot.jsonl"
    hot = _hot_code_of_hot_java(tmp_path, "--profile", str(profile), "--log", str(log))
    assert any(s in ("[jit]!java Hot.spin", "[jit]!java Hot.mix") for s in hot), hot
    assert not any(s.startswith("java method 0x") for s in hot), hot
    weights = {}
    for line in profile.read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        weights[stack.split(";")[-1]] = weights.get(stack.split(";")[-1], 0) + int(n)
    leaves = set(weights)
    assert leaves & {"java Hot.spin", "java Hot.mix"}, sorted(leaves)[:20]  # the live profile names them too
    # every method, not only the phases' hot code (43 method keys left raw before, review r46a)
    # a method or two first run after the last look-up (the JVM's end) may stay a key: under 1% of the profile
    raw = {f: n for f, n in weights.items() if f.startswith("0x8")}
    assert sum(raw.values()) <= 0.01 * sum(weights.values()), sorted(raw.items(), key=lambda kv: -kv[1])[:10]
    # offline, from the log alone: the methods as the live run named them (the log's names record; stop 47)
    offline = tmp_path / "offline.folded"
    assert run_cli("profile", str(log), "-o", str(offline), timeout=120).returncode == 0
    leaves = {line.rsplit(" ", 1)[0].split(";")[-1] for line in offline.read_text().splitlines()}
    assert leaves & {"java Hot.spin", "java Hot.mix"}, sorted(leaves)[:20]


def test_a_pc_seen_before_takes_the_method_of_the_nmethod_now_at_its_address():
    # HotSpot frees an nmethod and compiles another one at the same start (another compile id,
    # another method): a PC looked up before must get the new method, not the cached one (review r39)
    h = HotSpotCode(os.getpid())
    h._state, h._heaps = "on", [(0x1000, 0x100000, 0, 4)]
    now = {"check": (0x400, 1), "method": 0xAAA0}
    h._blob_at = lambda pc: 0x2000
    h._checked = lambda start: now["check"]
    h._read_blob = lambda start, check: _Blob(check, 0x2100, now["method"])
    assert h._place(0x2200, {}) == (0xAAA0, 0)
    now.update(check=(0x400, 2), method=0xBBB0)
    assert h._place(0x2200, {}) == (0xBBB0, 0)
    assert h._pcs[0x2200][2] == 0xBBB0  # what names() reads


def test_a_libjvm_whose_tables_are_not_vmstructs_is_left_alone():
    # a libjvm.so on disk that is not the one mapped (upgraded under a running JVM): its layout
    # words are garbage; no stride of 0 or 2**40 may crash the sampler (review r39)
    h = HotSpotCode(os.getpid())
    h._mem = os.open(f"/proc/{os.getpid()}/mem", os.O_RDONLY)
    try:
        assert list(h._rows(id(h), 0, 0)) == [] and list(h._rows(id(h), 1 << 40, 0)) == []
        assert list(h._rows(id(h), 16, 12)) == []  # a name offset past the row
    finally:
        h.close()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("javac") is None, reason="java is not installed")
def test_exact_mode_gives_two_loops_of_one_java_method_two_keys_and_phases(tmp_path):
    # Exact mode keyed a branch in compiled Java code by its Method* alone, so two loops of one
    # method (JavaWork's ints and floats, both in work) were one phase. The key now holds the
    # bytecode index of the branch's debug point in the method's own code too, as sampled mode's
    # (agent/jit_keys.c, issue 32). JavaWork runs ints, then floats, then ints again.
    source = os.path.join(os.path.dirname(__file__), "..", "bench", "truth", "JavaWork.java")
    subprocess.run(["javac", "-d", str(tmp_path), source], check=True, timeout=120)
    log = tmp_path / "loops.jsonl"
    r = run_cli("--no-dashboard", "--log", str(log), "-f", shutil.which("java"), "--", "-XX:+UseSerialGC", "-cp",
                str(tmp_path), "JavaWork", str(tmp_path / "truth.jsonl"), "ints,floats", "cycle", "5", "2", timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("done "), r.stderr[-2000:]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    records = [r for r in records if r.get("blocks") and r.get("phase") is not None]
    weights = {}
    for rec in records:
        for key, n in rec["blocks"]:
            if METHOD_KEY <= key < METHOD_KEY_END:
                weights[key] = weights.get(key, 0) + n
    (a, _), (b, _) = sorted(weights.items(), key=lambda kv: -kv[1])[:2]
    assert method_of(a) == method_of(b) and a != b, [hex(k) for k in (a, b)]  # one method, two keys
    # the paper's 32 hashed buckets: two one-block loops whose keys share a bucket have one footprint
    # (1 run in 32, as the Method* moves from run to run), and no tracker can tell them apart
    fp, _ = footprints(EngineConfig().tracker, [np.array([k], dtype=np.uint64) for k in (a, b)],
                       [np.array([1], dtype=np.uint64)] * 2)
    if np.array_equal(fp[0], fp[1]):
        pytest.skip(f"the two loops' keys hash into one bucket this run ({a:#x}, {b:#x})")
    phases = {a: [], b: []}
    for rec in records:  # the phases of the intervals spent (90% or more) in each loop
        total = sum(n for _, n in rec["blocks"])
        for key in (a, b):
            if sum(n for k, n in rec["blocks"] if k == key) >= 0.9 * total:
                phases[key].append(rec["phase"])
    # each loop's own phase (an interval that a new phase's confirmation waits for carries the
    # nearest known one, relabelled later in the log: not counted here)
    main = {key: max(set(got), key=got.count) if got else None for key, got in phases.items()}
    assert main[a] is not None and main[b] is not None and main[a] != main[b], phases
    assert all(got.count(main[key]) >= 0.8 * len(got) for key, got in phases.items()), phases
