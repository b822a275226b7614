"""--locality end to end (real processes, a few seconds): the agent's sampled address windows give
each phase the miss-rate curve its data working set implies (tests/programs/locality_phases.c)."""

import json
import subprocess

from conftest import run_cli

ARGS = ("2", "4000000")  # rounds, steps per phase


def _phase_by_symbol(summary: dict) -> dict:
    """Function name -> the heaviest phase whose top block is in it."""
    out = {}
    for p in summary["phases"]:  # heaviest first
        sym = p["top_code"][0].get("symbol") or ""
        name = sym.split("!")[-1].split("+")[0].split(".")[0]
        out.setdefault(name, p)
    return out


def _curve(phase: dict) -> dict:
    return {b: r for b, r in phase["locality"]["miss_rate_curve"]}


def test_locality_separates_working_sets(build, tmp_path):
    exe = build("locality_phases.c", "-O2")
    native = subprocess.run([exe, *ARGS], capture_output=True, check=True).stdout
    summary = tmp_path / "s.json"
    r = run_cli("--locality", "--locality-every", "1", "--interval", "1000000", "--no-dashboard",
                "--stdio", "pipe", "--summary", str(summary), "-f", exe, *ARGS)
    assert r.returncode == 0, r.stderr
    assert r.stdout.encode() == native  # the target's output is unchanged
    s = json.loads(summary.read_text())
    phases = _phase_by_symbol(s)
    small, big, stream = phases["chase_small"], phases["chase_big"], phases["stream_big"]
    table = [(p["phase"], round(p["share"], 3), p["top_code"][0].get("symbol"), p["locality"]["windows"])
             for p in s["phases"]]
    for p in (small, big, stream):
        assert p["locality"]["windows"] >= 3 and p["locality"]["accesses"] >= 3 * 65536, table
    assert _curve(small)[256 << 10] <= 0.10
    assert _curve(big)[1 << 20] >= 0.50
    for size, rate in stream["locality"]["miss_rate_curve"]:
        assert rate is None or rate >= 0.95, (size, rate)
    assert _curve(stream)[4096] >= 0.95
    assert s["whole"]["locality_skipped"] >= 0


def test_without_locality_nothing_changes(build, tmp_path):
    exe = build("locality_phases.c", "-O2")
    summary = tmp_path / "s.json"
    r = run_cli("--no-dashboard", "--stdio", "pipe", "--summary", str(summary), "-f", exe, "1", "1000000")
    assert r.returncode == 0, r.stderr
    s = json.loads(summary.read_text())
    assert all("locality" not in p for p in s["phases"])
    assert "locality_skipped" not in s["whole"]


def test_locality_options_are_checked():
    r = run_cli("--locality", "--locality-size", "1000", "-f", "/bin/true")
    assert r.returncode != 0 and "--locality-size" in r.stderr
    r = run_cli("--locality", "--mode", "sampled", "-f", "/bin/true")
    assert r.returncode != 0 and "--locality" in r.stderr
