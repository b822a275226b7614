"""JIT code keyed by its runtime's perf map (sources/perf_map.py): a real map file, written as a
runtime writes it, with answers known by construction."""

import numpy as np

from phasescope.sources.perf_map import PerfMap, jit_tag


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
    assert len(pm._entries) == 3


def test_no_map_leaves_keys_alone(tmp_path):
    pcs = np.array([0x7F0000001010], dtype=np.uint64)
    assert PerfMap(1, str(tmp_path / "none.map")).keys(pcs, pcs.copy())[0] == pcs[0]
