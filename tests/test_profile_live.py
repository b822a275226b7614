"""phasescope profile on real sampled runs of tests/programs/profiled.c, whose phases, functions and
call stacks are known by construction; each file is read back by a parser we did not write: Go's
pprof (Debian's golang-go), the npm package pprof-format, and speedscope's own file-format schema
(from the npm package speedscope; .ci/run installs both under .ci/npm)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import read_records, run_cli

pytestmark = pytest.mark.slow

NODE_MODULES = Path(__file__).resolve().parent.parent / ".ci" / "npm" / "node_modules"
READ_PPROF_JS = """
const {Profile} = require('pprof-format'); const zlib = require('zlib'); const fs = require('fs');
const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[1])));
const s = p.stringTable.strings, fn = new Map(p.function.map(f => [Number(f.id), s[Number(f.name)]]));
const loc = new Map(p.location.map(l => [Number(l.id), fn.get(Number(l.line[0].functionId))]));
const out = p.sample.map(x => ({stack: x.locationId.map(i => loc.get(Number(i))), value: x.value.map(Number),
  labels: Object.fromEntries(x.label.map(l => [s[Number(l.key)], l.str ? s[Number(l.str)] : Number(l.num)]))}));
console.log(JSON.stringify(out));
"""


def _node_module(name: str) -> Path:
    path = NODE_MODULES / name
    if not path.is_dir() or shutil.which("node") is None:
        pytest.skip(f"npm package {name} not installed (.ci/run installs it under .ci/npm)")
    return path


@pytest.fixture(scope="module")
def run(build, tmp_path_factory):
    """A sampled log (with stacks) of profiled.c built with frame pointers, and its truth per phase."""
    exe = build("profiled.c", "-fno-omit-frame-pointer")
    log = tmp_path_factory.mktemp("profile") / "run.log"
    r = run_cli("--mode", "sampled", "--no-dashboard", "--log", str(log), "-f", exe, "400000", "300", timeout=240)
    assert r.returncode == 0, r.stderr
    truth = defaultdict(lambda: defaultdict(int))  # phase -> leaf function -> samples, from the log itself
    for rec in read_records(log):
        # a frame no symbol names (a sample in the loader, say) is "module+0xoffset" in every profile
        names = {k: f or (f"{m}+{k & 0xFFFFFFFF:#x}" if m else f"{k:#x}") for k, m, f in rec["frames"]}
        for key, n in rec["blocks"]:
            truth[rec["phase"]][names[key]] += n
    return log, {ph: dict(f) for ph, f in truth.items()}


def test_stacks_are_the_programs_call_chains(run):
    log, truth = run
    seen = defaultdict(int)
    for rec in read_records(log):
        # a frame no symbol names (a sample in the loader, say) is "module+0xoffset" in every profile
        names = {k: f or (f"{m}+{k & 0xFFFFFFFF:#x}" if m else f"{k:#x}") for k, m, f in rec["frames"]}
        for stack in rec["stacks"]:
            seen[tuple(names[k] for k in stack[1:4])] += stack[0]
    total = sum(seen.values())
    known = sum(n for chain, n in seen.items() if chain in {("work_x", "phase_a", "main"),
                                                              ("work_y", "phase_a", "main"),
                                                              ("work_z", "phase_b", "main")})
    assert known > 0.95 * total, dict(seen)
    phases = [ph for ph, funcs in truth.items() if sum(funcs.values()) > 0.2 * total]
    assert len(phases) >= 2  # phase_a's and phase_b's


def test_pprof_is_read_by_pprof_format_with_the_logs_counts(run, tmp_path):
    _node_module("pprof-format")
    log, truth = run
    out = tmp_path / "p.pb.gz"
    assert run_cli("profile", str(log), "-o", str(out)).returncode == 0
    r = subprocess.run(["node", "-e", READ_PPROF_JS, str(out)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, NODE_PATH=str(NODE_MODULES)))
    assert r.returncode == 0, r.stderr
    got = defaultdict(lambda: defaultdict(int))
    for sample in json.loads(r.stdout):
        got[sample["labels"]["phase"]][sample["stack"][0]] += sample["value"][0]
        assert sample["value"][1] == sample["value"][0] * 1_000_000  # cpu ns at 1000 Hz
        assert {"phase", "predicted_phase", "thread"} <= set(sample["labels"])
    assert {ph: dict(f) for ph, f in got.items()} == truth


def test_go_pprof_tagfocus_shows_one_phase(run, tmp_path):
    if shutil.which("go") is None:
        pytest.skip("go (Debian's golang-go) is not installed")
    log, truth = run
    out = tmp_path / "p.pb.gz"
    assert run_cli("profile", str(log), "-o", str(out)).returncode == 0
    env = dict(os.environ, HOME=str(tmp_path), GOCACHE=str(tmp_path / "gocache"))
    for phase, funcs in truth.items():
        r = subprocess.run(["go", "tool", "pprof", "-tagfocus", f"phase={phase}", "-top", "-nodefraction=0", "-unit", "ms",
                            str(out)],
                           capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stderr
        flat = {}
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 6 and parts[0].endswith("ms"):
                flat[parts[5]] = round(float(parts[0][:-2]))
        assert {f: n for f, n in flat.items() if n} == {f: n for f, n in funcs.items()}, (phase, r.stdout)


def test_go_pprof_reads_the_diff_base(run, tmp_path):
    if shutil.which("go") is None:
        pytest.skip("go (Debian's golang-go) is not installed")
    log, truth = run
    a, b = sorted(truth, key=lambda ph: -sum(truth[ph].values()))[:2]
    out = tmp_path / "d.pb.gz"
    r = run_cli("profile", str(log), "--diff", str(a), str(b), "-o", str(out))
    assert r.returncode == 0, r.stderr
    top = r.stdout.splitlines()[1].split()[0]
    env = dict(os.environ, HOME=str(tmp_path), GOCACHE=str(tmp_path / "gocache"))
    r = subprocess.run(["go", "tool", "pprof", "-top", "-diff_base", str(tmp_path / "d.base.pb.gz"), str(out)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and top in r.stdout, r.stdout + r.stderr


def test_speedscope_meets_its_schema_and_folded_counts(run, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema_path = _node_module("speedscope") / "dist" / "release" / "file-format-schema.json"
    log, truth = run
    out, fold = tmp_path / "p.json", tmp_path / "p.folded"
    assert run_cli("profile", str(log), "-o", str(out)).returncode == 0
    assert run_cli("profile", str(log), "-o", str(fold)).returncode == 0
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, json.loads(schema_path.read_text()))
    names = [f["name"] for f in doc["shared"]["frames"]]
    got = defaultdict(lambda: defaultdict(int))
    for p in doc["profiles"]:
        for stack, w in zip(p["samples"], p["weights"]):
            got[int(p["name"].split()[1])][names[stack[-1]]] += w
    assert {ph: dict(f) for ph, f in got.items()} == truth
    got = defaultdict(lambda: defaultdict(int))
    for line in fold.read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        got[int(frames[0].split()[1])][frames[-1]] += int(n)
    assert {ph: dict(f) for ph, f in got.items()} == truth


def test_code_without_frame_pointers_keeps_its_leaf(build, tmp_path):
    exe = build("profiled.c", "-O2", "-fomit-frame-pointer")
    log = tmp_path / "nofp.log"
    summary = tmp_path / "s.json"
    r = run_cli("--mode", "sampled", "--no-dashboard", "--log", str(log), "--summary", str(summary),
                "-f", exe, "400000", "150", timeout=240)
    assert r.returncode == 0, r.stderr
    recs = read_records(log)
    samples = sum(r["samples"] for r in recs)
    assert all(sum(s[0] for s in r["stacks"]) == r["samples"] for r in recs)
    leaves = defaultdict(int)
    for rec in recs:
        # a frame no symbol names (a sample in the loader, say) is "module+0xoffset" in every profile
        names = {k: f or (f"{m}+{k & 0xFFFFFFFF:#x}" if m else f"{k:#x}") for k, m, f in rec["frames"]}
        for s in rec["stacks"]:
            leaves[names[s[1]]] += s[0]
    assert sum(leaves[f] for f in ("work_x", "work_y", "work_z")) > 0.9 * samples
    info = json.loads(summary.read_text())["session"]
    assert info["stacks"] is True and info["leaf_only_samples"] > 0.5 * samples, info


def test_exact_mode_profile_weighs_functions_by_instructions(build, tmp_path):
    exe = build("profiled.c", "-fno-omit-frame-pointer")
    log, fold, live = tmp_path / "exact.log", tmp_path / "exact.folded", tmp_path / "live.folded"
    r = run_cli("--no-dashboard", "--log", str(log), "--profile", str(live), "-f", exe, "200000", "60", timeout=300)
    assert r.returncode == 0, r.stderr
    truth = defaultdict(int)
    for rec in read_records(log):
        truth[rec["phase"]] += sum(n for _, n in rec["blocks"])
    r = run_cli("profile", str(log), "--binary", exe, "-o", str(fold))
    assert r.returncode == 0, r.stderr
    by_phase, by_function = _folded(fold)
    assert dict(by_phase) == dict(truth)  # every instruction of the log, in its phase
    work = sum(by_function[f] for f in ("work_x", "work_y", "work_z"))
    assert work > 0.95 * sum(by_function.values()), dict(by_function)
    # by construction work_z runs 2n iterations per round, work_x and work_y n each
    assert by_function["work_z"] > max(by_function["work_x"], by_function["work_y"])
    # the live profile names the functions itself, from the files of the run's modules (no --binary)
    live_phase, live_function = _folded(live)
    assert live_phase == by_phase and all(live_function[f] == by_function[f] for f in ("work_x", "work_y", "work_z"))


def _folded(path) -> tuple:
    """Counts of a collapsed-stacks file by phase and by leaf function."""
    by_phase, by_function = defaultdict(int), defaultdict(int)
    for line in path.read_text().splitlines():
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        by_phase[int(frames[0].split()[1])] += int(n)
        by_function[frames[-1]] += int(n)
    return by_phase, by_function


def test_live_profile_output_equals_the_profile_of_its_log(build, tmp_path):
    exe = build("profiled.c", "-fno-omit-frame-pointer")
    log, live, offline = tmp_path / "run.log", tmp_path / "live.folded", tmp_path / "offline.folded"
    r = run_cli("--mode", "sampled", "--no-dashboard", "--log", str(log), "--profile", str(live),
                "-f", exe, "400000", "600", timeout=240)
    assert r.returncode == 0, r.stderr
    assert run_cli("profile", str(log), "-o", str(offline)).returncode == 0
    assert live.read_text() == offline.read_text() and "work_z" in live.read_text()
    r = run_cli("--mode", "sampled", "--no-dashboard", "--profile", str(tmp_path / "x.txt"), "-f", exe)
    assert r.returncode == 2 and "cannot tell the profile format" in r.stderr


def test_exact_live_profile_names_a_library_whose_file_is_not_its_soname(tmp_path):
    # Both modes key a library by its soname (libspin.so.1), whatever file it was loaded from; the
    # live profile looked the keys up by the file's basename (libspin.so.1.0.0, as dlopen'ed by its
    # path) and left 92% of a ctypes crc32 loop's instructions a raw key (review r46a)
    src, lib = tmp_path / "spin.c", tmp_path / "libspin.so.1.0.0"
    src.write_text("unsigned long spin(long n) { unsigned long s = 1;\n"
                   "  for (long i = 0; i < n; i++) s = s * 6364136223846793005UL + (unsigned long)i; return s; }\n")
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-Wl,-soname,libspin.so.1", "-o", str(lib), str(src)],
                   check=True, timeout=120)
    script = f"import ctypes\nlib = ctypes.CDLL({str(lib)!r})\nlib.spin.restype = ctypes.c_ulong\nprint(lib.spin(30000000))\n"
    fold = tmp_path / "spin.folded"
    r = run_cli("--no-dashboard", "--profile", str(fold), "-f", sys.executable, "--", "-c", script, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    _, by_function = _folded(fold)
    assert by_function.get("spin", 0) > 0.5 * sum(by_function.values()), sorted(by_function.items(), key=lambda kv: -kv[1])[:5]
