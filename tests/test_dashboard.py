"""The dashboard as a user sees it: phasescope runs in tmux, the test reads the screen."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import cli_command

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


def test_demo_dashboard_at_80x24(tmux):
    t = tmux(80, 24, cli_command("demo", "--rounds", "2", "--no-thread"))
    # Wait until the tracker has seen several phases, then read the live screen.
    screen = t.wait_for(r"P[3-9]\b")
    lines = screen.splitlines()
    assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
    for heading in ("phasescope", "threads", "footprints", "phases", "context *", "last phase", "RLE Markov"):
        assert heading in screen, heading
    assert re.search(r"\d\d:\d\d:\d\d #\d+ \d+ P\d+→P\d+", screen), screen  # the last phase changes
    assert re.search(r"intervals \d+ \([\d.]+/s\)", screen)
    assert "dropped 0" in screen
    # The thread row: tid, current phase, run length, predicted next phase, confidence.
    assert re.search(r"\d+\s+P\d+\s+\d+\s+P\d+\s+\d+%", screen), screen
    # The phase table names the code of the top phase (module+offset or module!symbol).
    assert re.search(r"P\d+\s+\d+\.\d%\s+\d+\s+[\d.]+\s+\S*(lib|python)", screen), screen
    # When the workload ends, the dashboard gives way to the final report and the exit status.
    final = t.wait_for(r"EXIT=\d+", timeout=120)
    assert "EXIT=0" in final and "exited with code 0" in final


def test_dashboard_uses_a_large_terminal(tmux, build):
    exe = build("phased.c")
    t = tmux(160, 50, cli_command("--duration", "4", "-f", exe, "0", "2"))
    screen = t.wait_for(r"P2\b")
    lines = screen.splitlines()
    assert max(len(line.rstrip()) for line in lines) > 120  # panels stretch to the width
    heat_rows = [ln for ln in lines if "▀" in ln]
    assert len(heat_rows) >= 8  # a taller heat map than at 80x24
    final = t.wait_for(r"EXIT=\d+", timeout=60)
    assert "EXIT=0" in final and "detached" in final
