"""JIT code named from perf map files: the parser on maps known by construction, and a real
``node --perf-basic-prof`` run whose hot JavaScript functions and copied builtins must be named in
the summary's hot code and in the profile."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys

import pytest

from conftest import run_cli
from phasescope.profiles.model import read_profile
import numpy as np

from phasescope.sources.perf_map import PerfMap, jit_tag, parse


def test_a_function_keeps_its_key_when_recompiled_elsewhere(tmp_path):
    path = tmp_path / "perf-1.map"
    path.write_text("7f0000001000 200 JS:~parse /app.js:3:10\n7f0000002000 100 JS:~other /app.js:9:1\n")
    pm = PerfMap(1, str(path))
    pcs = np.array([0x7F0000001010, 0x7F0000002004, 0x7F0000009000, 0x1234], dtype=np.uint64)
    module_key = np.uint64(0xABCD << 32 | 0x10)
    keys = pm.keys(pcs, np.array([pcs[0], pcs[1], pcs[2], module_key], dtype=np.uint64))
    assert keys[0] == jit_tag("JS:parse /app.js:3:10") | 0x10
    assert keys[1] == jit_tag("JS:other /app.js:9:1") | 0x4
    assert keys[2] == pcs[2]  # in no entry: the raw address
    assert keys[3] == module_key  # in a module: untouched
    with open(path, "a") as f:  # optimised later, at another address; a half-written line waits
        f.write("7f0000009000 300 JS:*parse /app.js:3:10\n7f00000a")
    again = pm.keys(pcs[2:3], pcs[2:3].copy())
    assert again[0] == jit_tag("JS:~parse /app.js:3:10")  # the same function: the same key page
    assert pm.names([0x7F0000009010])[0] == "JS:*parse /app.js:3:10"


def test_a_map_older_than_the_process_is_an_earlier_process_s_and_is_not_read(tmp_path):
    """A ``/tmp/perf-PID.map`` left by an earlier process of the same pid named code this one (which
    writes none) does not have (stop 47): one last written before the process started is passed
    over; written after (a runtime writing it anew), it is read. This process is the one traced."""
    from phasescope.sources.procfs import process_start
    path = tmp_path / "perf-old.map"
    path.write_text("7f0000001000 100 JS:*ghost old.js:1\n")
    started = process_start(os.getpid())
    os.utime(path, (started - 60, started - 60))
    pm = PerfMap(os.getpid(), str(path))
    pcs = np.array([0x7F0000001010], dtype=np.uint64)
    assert pm.names([0x7F0000001010])[0] is None and pm.keys(pcs, pcs.copy())[0] == pcs[0]
    assert pm.stale == str(path)
    os.utime(path)  # written now
    assert pm.names([0x7F0000001010])[0] == "JS:*ghost old.js:1"


def test_no_map_leaves_keys_alone(tmp_path):
    pcs = np.array([0x7F0000001010], dtype=np.uint64)
    assert PerfMap(1, str(tmp_path / "none.map")).keys(pcs, pcs.copy())[0] == pcs[0]


def test_parse_and_lookup_with_growth_and_replacement(tmp_path):
    path = tmp_path / "perf-1.map"
    path.write_text("7f0000001000 100 JS:*hot a.js:1\n0x7f0000002000 0x20 LazyCompile:cold\nbad line\n"
                    "7f0000003000 zz nope\n")
    assert parse(path.read_text().splitlines()) == [(0x7F0000001000, 0x7F0000001100, "JS:*hot a.js:1"),
                                                    (0x7F0000002000, 0x7F0000002020, "LazyCompile:cold")]
    pm = PerfMap(1, str(path))
    assert pm.names([0x7F0000001000])[0] == "JS:*hot a.js:1" and pm.names([0x7F00000010FF])[0] == "JS:*hot a.js:1"
    assert pm.names([0x7F0000001100])[0] is None and pm.names([0x10])[0] is None
    with open(path, "a") as f:  # code compiled later, and newer code at an old address
        f.write("7f0000004000 10 JS:*later\n7f0000001000 80 JS:*recompiled\n7f0000005000 10 JS:*half")
    assert pm.names([0x7F0000004008])[0] == "JS:*later"
    assert pm.names([0x7F0000001010])[0] == "JS:*recompiled"
    assert pm.names([0x7F0000005000])[0] is None  # its line is not complete yet
    with open(path, "a") as f:
        f.write("\n")
    assert pm.names([0x7F0000005000])[0] == "JS:*half"
    assert PerfMap(2, str(tmp_path / "missing.map")).names([0x7F0000001000])[0] is None


def test_newer_code_drops_the_older_entries_it_overlaps(tmp_path):
    """V8 writes no line when it frees code: newer code over freed code must not keep the dead
    function's name (seen on node 20: optimised math named after a freed crypto module)."""
    path = tmp_path / "perf-1.map"
    path.write_text("7f0000001000 100 JS:~dead a.js:1\n7f0000001200 100 JS:~kept a.js:2\n"
                    "7f0000000f00 180 JS:*math a.js:3\n")
    pm = PerfMap(1, str(path))
    assert pm.names([0x7F0000001010])[0] == "JS:*math a.js:3"  # the dead entry starts inside the new one
    assert pm.names([0x7F0000001080])[0] is None  # past the new code: the dead entry is gone
    assert pm.names([0x7F0000001210])[0] == "JS:~kept a.js:2"
    pcs = np.array([0x7F0000001010], dtype=np.uint64)
    assert pm.keys(pcs, pcs.copy())[0] == jit_tag("JS:math a.js:3") | 0x110
    with open(path, "a") as f:  # one line over several older ones
        f.write("7f0000000e00 600 JS:*big a.js:4\n")
    assert set(pm.names([0x7F0000000E00, 0x7F0000001010, 0x7F0000001210])) == {"JS:*big a.js:4"}


def test_a_big_read_keeps_what_reading_line_by_line_keeps(tmp_path):
    # A read of many lines merges them in one sort (one insertion each was quadratic: 4.8 s of CPU
    # for node's map after 150,000 functions, 0.4 s merged, review r46a); what it keeps must be what
    # the lines added one by one keep: each drops the older entries it overlaps, newest last
    rng = random.Random(46)
    lines = [f"{0x7F0000000000 + rng.randrange(0x10000):x} {rng.randrange(1, 0x400):x} JS:*f{i}\n" for i in range(2000)]
    bulk, one = tmp_path / "bulk.map", tmp_path / "one.map"
    bulk.write_text("".join(lines[:300]))
    big = PerfMap(1, str(bulk))
    big.names([0x10])  # 300 lines into an empty map, then 1700 into those
    with open(bulk, "a") as f:
        f.write("".join(lines[300:]))
    big.names([0x10])
    small = PerfMap(1, str(one))
    for line in lines:
        with open(one, "a") as f:
            f.write(line)
        small.names([0x10])
    assert 50 < len(small._starts) < 1500  # overlaps dropped, some kept
    assert (big._starts, big._ends, big._names) == (small._starts, small._ends, small._names)


def _node_sieve(tmp_path, rounds: int, more: str = "") -> tuple:
    """(node, hot.js): ``rounds`` sieves in the hot function ``sieveHot``, then ``more``; prints s."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = tmp_path / "hot.js"
    script.write_text(
        "function sieveHot(n) { const a = new Uint8Array(n); let c = 0;\n"
        "  for (let i = 2; i < n; i++) { if (!a[i]) { c++; for (let j = i * 2; j < n; j += i) a[j] = 1; } }\n"
        "  return c; }\n"
        f"let s = 0; for (let r = 0; r < {rounds}; r++) s += sieveHot(2000000);\n" + more + "console.log(s);\n")
    return node, script


@pytest.mark.slow
def test_node_hot_jit_functions_and_copied_builtins_are_named(tmp_path):
    """node with its defaults: JIT code named by the perf map, and the builtins it copied next to
    that code (short builtin calls) keyed and named as the binary's (27% raw addresses before)."""
    node, script = _node_sieve(tmp_path, 20,
                               "const doc = JSON.stringify(Array.from({length: 3000}, (_, i) => ({id: i, tags: ['a' + i, i % 7]})));\n"
                               "for (let r = 0; r < 150; r++) s += JSON.parse(doc).map(x => x.tags.join('-')).length;\n")
    log, summary = tmp_path / "node.log", tmp_path / "node.json"
    r = run_cli("--mode", "sampled", "--no-dashboard", "--log", str(log), "--summary", str(summary), "-f", node,
                "--", "--perf-basic-prof", str(script), timeout=240, cwd=tmp_path)  # node writes isolate-*-v8.log here
    assert r.returncode == 0, r.stderr
    pid = json.loads(summary.read_text())["target"]["pid"]
    try:
        check_named(log, summary)
    finally:
        os.unlink(f"/tmp/perf-{pid}.map")  # node leaves its map behind


@pytest.mark.slow
def test_exact_mode_names_node_jit_code_from_its_perf_map(tmp_path):
    """Exact mode names JIT code no symbol names from the runtime's perf map, as sampled mode does:
    a phase's hot code in the summary and the leaves of the live --profile (raw addresses before)."""
    node, script = _node_sieve(tmp_path, 8)
    summary, profile = tmp_path / "node.json", tmp_path / "node.folded"
    r = run_cli("--no-dashboard", "--summary", str(summary), "--profile", str(profile), "-f", node,
                "--", "--perf-basic-prof", str(script), timeout=240, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "1191464\n", r.stderr[-2000:]
    pid = json.loads(summary.read_text())["target"]["pid"]
    try:
        hot = [c.get("symbol") or "" for p in json.loads(summary.read_text())["phases"] for c in p.get("top_code", [])]
        assert any(s.startswith("[jit]!JS:") and "sieveHot" in s for s in hot), hot
        leaves = {}
        for line in profile.read_text().splitlines():
            stack, n = line.rsplit(" ", 1)
            leaves[stack.split(";")[-1]] = leaves.get(stack.split(";")[-1], 0) + int(n)
        top = sorted(leaves, key=leaves.get, reverse=True)[:3]  # with the store builtin its loop calls
        assert any(f.startswith("JS:") and "sieveHot" in f for f in top), [(f, leaves[f]) for f in top]
    finally:
        os.unlink(f"/tmp/perf-{pid}.map")  # node leaves its map behind


def check_named(log, summary):
    samples = raw = 0
    for line in log.read_text().splitlines():
        for key, n in json.loads(line).get("blocks", []):
            samples += n
            raw += n if key < 1 << 48 else 0  # a raw address: no module and no perf map line names it
    assert raw <= 0.02 * samples, (raw, samples)
    prof, leaves = read_profile(str(log)), {}
    for ph in prof.phases:
        for f, n in prof.by_function(ph).items():
            leaves[f] = leaves.get(f, 0) + n
    top = sorted(leaves, key=leaves.get, reverse=True)
    assert top[0].startswith("JS:") and "sieveHot" in top[0], [(f, leaves[f]) for f in top[:5]]
    builtins = sum(n for f, n in leaves.items() if f.startswith("Builtins_"))
    assert builtins >= 0.03 * samples, [(f, leaves[f]) for f in top[:8]]
    hot = [c.get("symbol") or "" for p in json.loads(summary.read_text())["phases"] for c in p.get("top_code", [])]
    assert any("sieveHot" in s and s.startswith("[jit]!") for s in hot), hot


def test_the_map_is_read_from_tmp_whatever_tmpdir_says(tmp_path, monkeypatch):
    # perf's jit-interface fixes /tmp/perf-PID.map; node and the JVM agents write there whatever
    # TMPDIR is, and a map looked for under TMPDIR left JIT code unnamed and unkeyed.
    import tempfile
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert tempfile.gettempdir() == str(tmp_path)
    assert PerfMap(123).path == "/tmp/perf-123.map"


@pytest.mark.slow
@pytest.mark.parametrize("writes_own", [True, False])
def test_a_containers_map_is_read_from_its_own_tmp_under_its_own_pid(writes_own):
    # A runtime in a container writes /tmp/perf-PID.map in its own mount namespace, PID being its
    # pid there; read as /tmp/perf-HOSTPID.map, its JIT code went unnamed. The container here:
    # new mount and pid namespaces with a private /tmp (unshare, as root). Where the container's
    # own /tmp has no map, the host's /tmp/perf-HOSTPID.map is read, as perf falls back.
    script = ("import os, sys, time\n"
              "if sys.argv[1] == 'own': open(f'/tmp/perf-{os.getpid()}.map', 'w').write('7f0000001000 100 JS:*inside\\n')\n"
              "print(os.getpid(), flush=True)\n"
              "time.sleep(60)\n")
    box = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c",
                            'mount -t tmpfs none /tmp && exec "$0" -c "$1" "$2"', sys.executable, script,
                            "own" if writes_own else "none"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    host_map = None
    try:
        inner = box.stdout.readline().strip()
        if not inner:
            pytest.skip("no container here: " + box.stderr.read().strip()[-200:])
        with open(f"/proc/{box.pid}/task/{box.pid}/children") as f:
            host_pid = int(f.read().split()[0])  # unshare's forked child: the python3 above
        assert int(inner) != host_pid and not os.path.exists(f"/tmp/perf-{inner}.map")
        own = f"/proc/{host_pid}/root/tmp/perf-{inner}.map"
        if writes_own:
            pm = PerfMap(host_pid)
            assert pm.path == own
            assert pm.names([0x7f0000001010, 0x7f0000002000]) == ["JS:*inside", None]
        else:
            if os.path.exists(f"/tmp/perf-{host_pid}.map"):  # not ours to overwrite or delete
                pytest.skip(f"a stale /tmp/perf-{host_pid}.map of an earlier process with this pid")
            host_map = f"/tmp/perf-{host_pid}.map"
            with open(host_map, "w") as f:
                f.write("7f0000001000 100 JS:*shared\n")
            pm = PerfMap(host_pid)
            assert pm.names([0x7f0000001010, 0x7f0000002000]) == ["JS:*shared", None]
            assert pm.path == host_map and not os.path.exists(own)
    finally:
        box.kill()
        box.wait(timeout=30)
        if host_map:
            os.unlink(host_map)
