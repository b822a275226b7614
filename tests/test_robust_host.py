"""Host-side faults: unwritable output paths fail before phasescope touches the target; a disk that
fills mid-run gives a one-line error, exit 1, a complete summary (or the previous complete one),
and never a half-written summary or a leftover temporary file."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from conftest import end_process, run_cli

pytestmark = pytest.mark.slow  # every test here starts a real process


def agent_loaded(pid: int) -> bool:
    with open(f"/proc/{pid}/maps") as f:
        return "frida-agent" in f.read()


@pytest.fixture
def idle_target(build):
    exe = build("robust.c", "-pthread")
    proc = subprocess.Popen([exe, "churn", "1", "1", "1", "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"ready")
    yield proc
    end_process(proc)


@pytest.mark.parametrize("option, path", [
    ("--log", "/etc/passwd/log.jsonl"),         # a file used as a directory
    ("--log", "{tmp}"),                          # a directory
    ("--summary", "/nonexistent-dir/s.json"),
    ("--summary", "{tmp}"),
    ("--bbv", "/dev/null/x.bb"),                 # below a device
])
def test_unwritable_output_fails_before_attaching(idle_target, tmp_path, option, path):
    path = path.format(tmp=tmp_path)
    r = run_cli("--no-dashboard", option, path, "-p", str(idle_target.pid), timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot write" in lines[0] and path in lines[0], r.stderr
    assert not agent_loaded(idle_target.pid)  # the target was never touched


def test_log_disk_full_mid_run(build, tmp_path):
    exe = build("robust.c", "-pthread")
    summary = tmp_path / "s.json"
    report = tmp_path / "report.txt"  # phasescope's own lines: stderr then holds the error alone
    r = run_cli("--no-dashboard", "--interval", "1000000", "--log", "/dev/full", "--summary", str(summary),
                "-o", str(report), "-f", exe, "exit", "20", "0")
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == ["phasescope: error: /dev/full: cannot write: No space left on device"], r.stderr
    assert "predictors" in report.read_text()  # the report still went to -o
    s = json.loads(summary.read_text())  # complete, and it says why the run stopped
    assert "No space left on device" in s["end"]["reason"]
    assert s["whole"]["intervals"] >= 1
    assert oct(summary.stat().st_mode & 0o777) == oct(0o666 & ~current_umask())


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.fixture
def tiny_fs(tmp_path):
    """A 128 KiB tmpfs: a disk that really fills (needs root and mount)."""
    mnt = tmp_path / f"fs{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a full filesystem needs a tmpfs mount, which needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(mnt)], capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=300)


def test_whole_disk_fills_summary_never_half_written(build, tiny_fs, tmp_path):
    exe = build("robust.c", "-pthread")
    summary = tiny_fs / "s.json"
    previous = {"previous": True, "pad": "x" * 2000}
    summary.write_text(json.dumps(previous))
    r = run_cli("--no-dashboard", "--interval", "100000", "--log", str(tiny_fs / "log.jsonl"),
                "--summary", str(summary), "-o", str(tmp_path / "report.txt"), "-f", exe, "exit", "100", "0")
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot write: No space left on device" in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    # The summary is the previous complete file or a new complete one, never a torn one; no
    # temporary file is left behind on the full disk.
    s = json.loads(summary.read_text())
    assert s == previous or s["end"]["reason"]
    assert sorted(p.name for p in tiny_fs.iterdir()) == ["log.jsonl", "s.json"]
    # Every line of the log that made it is a complete record, except possibly a torn last one.
    text = (tiny_fs / "log.jsonl").read_text()
    records = text.split("\n")
    for line in records[:-1]:
        json.loads(line)


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_report_disk_full_is_said_at_the_end(build, tmp_path, mode):
    """``-o`` on a full disk: the run goes on and its outputs are whole, then one line and exit 1,
    as for the other outputs (stop 45 had made it nothing at all and exit 0; a traceback before)."""
    summary = tmp_path / "s.json"
    r = run_cli("--no-dashboard", "--mode", mode, "--summary", str(summary), "-o", "/dev/full",
                "-f", build("robust.c", "-pthread"), "exit", "20", "0")
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines() == ["phasescope: error: /dev/full: cannot write: No space left on device"]
    assert json.loads(summary.read_text())["end"]["how"] == "exited"
