"""phasescope bench on a real program: every configuration runs and the ratios are reported."""

from __future__ import annotations

import pytest
import json
import shutil

from conftest import run_cli

pytestmark = pytest.mark.slow  # every test here starts a real process


def test_bench_reports_all_ratios(build):
    binary = build("counted.c", "-O2")
    valgrind = shutil.which("valgrind") is not None
    args = ["bench", "--runs", "1", "--json", "--interval", "1000000"]
    proc = run_cli(*args, *([] if valgrind else ["--no-valgrind"]), "--", binary, "2000000")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    expected = {"bare", "traced", "end-to-end", "traced/bare", "traced/bare cpu"} | ({"exp-bbv"} if valgrind else set())
    assert set(result["ratios"]) == expected
    assert all(r > 0 for r in result["ratios"].values())
    assert result["intervals"] >= 40 and result["instructions"] >= 40_000_000
    assert result["seconds"]["end-to-end"] >= result["seconds"]["traced"]


def test_bench_text_report(build):
    proc = run_cli("bench", "--runs", "1", "--no-valgrind", "--no-bare", "--", build("counted.c"), "100000")
    assert proc.returncode == 0, proc.stderr
    assert "traced" in proc.stdout and "x native" in proc.stdout and "bare" not in proc.stdout


def test_bench_sampled_mode_with_bursts(build):
    # the bursts run used to end in a TypeError (a name shadowed in the timed run): both sampled
    # runs are timed, the bursts counted, and the report says so
    proc = run_cli("bench", "--runs", "1", "--json", "--mode", "sampled", "--bursts", "--",
                   build("phased.c", "-O2"), "6", "3", timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert list(result["seconds"]) == ["native", "sampled", "end-to-end", "bursts"]
    assert set(result["ratios"]) == {"sampled", "end-to-end", "bursts", "bursts/sampled"}
    assert result["bursts"] >= 1 and result["intervals"] >= 1
    assert result["sampled"] == {"rate_hz": 1000, "window_samples": 100, "bursts": True}
