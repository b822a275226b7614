"""phasescope plot: a PNG from a log; one line and exit 2 without matplotlib or with a bad log."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import cli_command, run_cli, synthetic_log as _log

pytestmark = pytest.mark.slow  # every test here starts a real process


def test_plot_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "run.png"
    r = run_cli("plot", _log(tmp_path / "run.jsonl"), "-o", str(out), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "60 intervals, 2 phases, 2 thread(s)" in r.stderr and r.stdout == ""  # stdout stays clean
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20000


def test_plot_without_matplotlib(tmp_path):
    fake = tmp_path / "fake" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "fake"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(cli_command("plot", _log(tmp_path / "run.jsonl"), "-o", str(tmp_path / "x.png")),
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "matplotlib" in r.stderr
    assert not (tmp_path / "x.png").exists()


def test_plot_bad_log(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"thread": 1}\n')
    r = run_cli("plot", str(bad), "-o", str(tmp_path / "x.png"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "bad.jsonl:1" in r.stderr
