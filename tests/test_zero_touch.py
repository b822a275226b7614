"""Zero-touch sampled mode: nothing is injected and nothing traces the target (no agent in its
maps, no ptrace tracer), spawned or attached; a statically linked program is sampled and named
from its ELF symbols; its output stays byte-identical."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from conftest import PROGRAMS, cli_command, end_process, run_cli

pytestmark = pytest.mark.slow  # every test here starts a real process

LOOK = ("i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; "
        "grep -c frida /proc/$$/maps; grep TracerPid /proc/$$/status")


def test_a_spawned_target_has_no_agent_and_no_tracer():
    r = run_cli("--mode", "sampled", "--no-dashboard", "-f", "/bin/sh", "--", "-c", LOOK)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "TracerPid:", "0"], r.stdout


def test_an_attached_target_has_no_agent_no_tracer_and_runs_on(tmp_path):
    target = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 30: pass"])
    try:
        summary = tmp_path / "s.json"
        mon = subprocess.Popen(cli_command("--mode", "sampled", "--no-dashboard", "--duration", "3",
                                           "--summary", str(summary), "-p", str(target.pid)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        maps = open(f"/proc/{target.pid}/maps").read()
        status = open(f"/proc/{target.pid}/status").read()
        _, err = mon.communicate(timeout=60)
        assert mon.returncode == 0, err
        assert "frida" not in maps and "TracerPid:\t0" in status
        assert target.poll() is None  # detaching left it running
        s = json.loads(summary.read_text())
        # sampled: at least one window (3 s of wall gave a spinner 4 windows, not 5, at load 17)
        assert s["session"]["zero_touch"] and s["whole"]["intervals"] >= 1
    finally:
        end_process(target)


def test_a_static_program_is_sampled_and_named_from_its_symbols(tmp_path):
    exe = tmp_path / "phased_static"
    if subprocess.run(["cc", "-O1", "-static", "-o", str(exe), str(PROGRAMS / "phased.c")],
                      capture_output=True, timeout=300).returncode:
        pytest.skip("no static C library to link with")
    # Phases a quarter as long as "6 60" sampled four times as often: each still spans about 3
    # windows of 100 samples, and the run costs a quarter (the native run 8 s -> 2 s).
    native = subprocess.run([str(exe), "6", "15"], capture_output=True, check=True, timeout=300).stdout
    summary = tmp_path / "s.json"
    r = subprocess.run(cli_command("--mode", "sampled", "--rate", "4000", "--no-dashboard", "--summary", str(summary),
                                   "-f", str(exe), "6", "15"), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == native
    names = {p["top_code"][0]["symbol"] for p in json.loads(summary.read_text())["phases"] if p["share"] > 0.1}
    assert names == {"phased_static!hash_phase", "phased_static!float_phase", "phased_static!chase_phase"}, names
