"""Bad input gives one line on stderr, a non-zero exit and no traceback."""

from __future__ import annotations

import os
import sys
import shutil
import subprocess

import pytest

from conftest import end_process, run_cli
from phasescope.errors import InputError, PhasescopeError
from phasescope.sources.session import TraceSession
from phasescope.sources.device import resolve_device, resolve_target

pytestmark = pytest.mark.slow  # every test here starts a real process


def _one_line_error(proc, code, text):
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert text in lines[0]


def test_bench_no_such_program(tmp_path):
    _one_line_error(run_cli("bench", "--", str(tmp_path / "missing")), 2, "no such program")


def test_bench_not_executable(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("not a program\n")
    _one_line_error(run_cli("bench", "--", str(path)), 2, "not executable")


def test_bench_without_program():
    _one_line_error(run_cli("bench"), 2, "no program given")


def test_no_such_pid():
    device = resolve_device()
    with pytest.raises(InputError, match="no such process: pid 999999999"):
        resolve_target(device, pid=999999999)


def test_name_matching_several_processes(tmp_path):
    exe = tmp_path / "phasescope-twin"
    shutil.copy("/bin/sleep", exe)
    procs = [subprocess.Popen([str(exe), "30"]) for _ in range(2)]
    try:
        device = resolve_device()
        with pytest.raises(InputError, match=r"2 processes are named 'phasescope-twin' \(pids \d+, \d+\)"):
            resolve_target(device, name="phasescope-twin")
        with pytest.raises(InputError, match="no process named 'phasescope-nobody'"):
            resolve_target(device, name="phasescope-nobody")
    finally:
        for p in procs:
            end_process(p)


def test_exactly_one_target():
    with pytest.raises(InputError, match="exactly one target"):
        resolve_target(resolve_device(), pid=1, name="x")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_permission_denied(tmp_path):
    """An unprivileged user attaching to root's process: a one-line error, exit 1."""
    victim = subprocess.Popen(["sleep", "30"])
    script = (
        "import os, sys\n"
        "from phasescope.errors import PhasescopeError\n"
        "from phasescope.sources.session import TraceSession\n"
        "from phasescope.sources.device import resolve_device, resolve_target\n"
        "d = resolve_device()\n"
        # Built while privileged: it reads the shipped agent, and the checkout may be private.
        f"s = TraceSession(d, resolve_target(d, pid={victim.pid}))\n"
        "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
        "try:\n"
        "    s.start()\n"
        "except PhasescopeError as e:\n"
        "    print(e, file=sys.stderr); sys.exit(e.exit_code)\n"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    finally:
        end_process(victim)
    _one_line_error(proc, 2, "permission denied attaching to pid")


def test_agent_that_fails_to_load_leaves_no_process(build):
    device = resolve_device()
    target = resolve_target(device, argv=[build("counted.c"), "10"])
    session = TraceSession(device, target, counter_source="this is not C;")
    with pytest.raises(PhasescopeError, match="agent failed to load into pid"):
        session.start()
    assert session.pid is not None
    assert not os.path.exists(f"/proc/{session.pid}/exe") or _zombie(session.pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_unknown_rep_count():
    """--rep-count takes iterations or once: anything else is one line and exit 2, before any process starts."""
    _one_line_error(run_cli("--no-dashboard", "--rep-count", "twice", "-f", "true"), 2, "--rep-count")
    with pytest.raises(InputError, match="rep_count"):
        TraceSession(None, resolve_target(None, argv=["true"]), rep_count="twice")
