"""JIT code named from perf map files: the parser on maps known by construction, and a real
``node --perf-basic-prof`` run whose hot JavaScript functions must be named in the summary's hot
code and in the profile."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import run_cli
from phasescope.profiles.model import read_profile
from phasescope.sources.perf_map import PerfMap, parse


def test_parse_and_lookup_with_growth_and_replacement(tmp_path):
    path = tmp_path / "perf-1.map"
    path.write_text("7f0000001000 100 JS:*hot a.js:1\n0x7f0000002000 0x20 LazyCompile:cold\nbad line\n"
                    "7f0000003000 zz nope\n")
    assert parse(path.read_text().splitlines()) == [(0x7F0000001000, 0x7F0000001100, "JS:*hot a.js:1"),
                                                    (0x7F0000002000, 0x7F0000002020, "LazyCompile:cold")]
    pm = PerfMap(1, str(path))
    assert pm.name(0x7F0000001000) == "JS:*hot a.js:1" and pm.name(0x7F00000010FF) == "JS:*hot a.js:1"
    assert pm.name(0x7F0000001100) is None and pm.name(0x10) is None
    with open(path, "a") as f:  # code compiled later, and newer code at an old address
        f.write("7f0000004000 10 JS:*later\n7f0000001000 80 JS:*recompiled\n7f0000005000 10 JS:*half")
    assert pm.name(0x7F0000004008) == "JS:*later"
    assert pm.name(0x7F0000001010) == "JS:*recompiled"
    assert pm.name(0x7F0000005000) is None  # its line is not complete yet
    with open(path, "a") as f:
        f.write("\n")
    assert pm.name(0x7F0000005000) == "JS:*half"
    assert PerfMap(2, str(tmp_path / "missing.map")).name(0x7F0000001000) is None


@pytest.mark.slow
def test_node_hot_jit_functions_are_named(tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = tmp_path / "hot.js"
    script.write_text(
        "function sieveHot(n) { const a = new Uint8Array(n); let c = 0;\n"
        "  for (let i = 2; i < n; i++) { if (!a[i]) { c++; for (let j = i * 2; j < n; j += i) a[j] = 1; } }\n"
        "  return c; }\n"
        "let s = 0; for (let r = 0; r < 30; r++) s += sieveHot(2000000); console.log(s);\n")
    log, summary = tmp_path / "node.log", tmp_path / "node.json"
    r = run_cli("--mode", "sampled", "--no-dashboard", "--log", str(log), "--summary", str(summary), "-f", node,
                "--", "--perf-basic-prof", str(script), timeout=240, cwd=tmp_path)  # node writes isolate-*-v8.log here
    assert r.returncode == 0, r.stderr
    pid = json.loads(summary.read_text())["target"]["pid"]
    try:
        check_named(log, summary)
    finally:
        os.unlink(f"/tmp/perf-{pid}.map")  # node leaves its map behind


def check_named(log, summary):
    prof = read_profile(str(log))
    leaves = {}
    for ph in prof.phases:
        for f, n in prof.by_function(ph).items():
            leaves[f] = leaves.get(f, 0) + n
    top = max(leaves, key=leaves.get)
    assert top.startswith("JS:") and "sieveHot" in top, sorted(leaves.items(), key=lambda kv: -kv[1])[:5]
    hot = [c.get("symbol") or "" for p in json.loads(summary.read_text())["phases"] for c in p.get("top_code", [])]
    assert any("sieveHot" in s and s.startswith("[jit]!") for s in hot), hot
