"""The live monitor driven through its real CLI against real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from conftest import check_thread_streams, cli_command, end_process, log_lines, read_records, run_cli, wait_for

from phasescope.formats.log import settled_phases

pytestmark = pytest.mark.slow  # every test here starts a real process


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.fixture
def long_running(build, tmp_path):
    """A copy of the phased program with a unique name, running until killed; output in a file."""
    exe = build("phased.c", name=f"psq{os.getpid()}")
    out = open(tmp_path / "target.out", "w")
    proc = subprocess.Popen([exe, "0", "2"], stdout=out, stderr=subprocess.STDOUT)
    yield proc, tmp_path / "target.out"
    end_process(proc)
    out.close()


def test_spawn_log_and_summary_agree(build, tmp_path):
    exe = build("phased.c")
    native = subprocess.run([exe, "4", "3"], capture_output=True, text=True, check=True, timeout=300).stdout
    log, summary = tmp_path / "log.jsonl", tmp_path / "summary.json"
    r = run_cli("--no-dashboard", "--log", str(log), "--summary", str(summary), "-f", exe, "4", "3")
    assert r.returncode == 0, r.stderr
    target_lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("round", "checksum"))]
    assert target_lines == native.splitlines()  # the target's output passes through unchanged
    assert "exited with code 0" in r.stderr
    records = read_records(log)
    s = json.loads(summary.read_text())
    assert s["end"]["how"] == "exited" and s["end"]["code"] == 0
    # The log's instructions add up to the summary's, per phase and in total.
    assert sum(rec["instructions"] for rec in records) == s["whole"]["instructions"]
    assert len(records) == s["whole"]["intervals"]
    per_phase = {}  # the summary's statistics are the settled labels' (the log's relabels applied)
    for rec, phase in zip(records, settled_phases(records)):
        per_phase[phase] = per_phase.get(phase, 0) + rec["instructions"]
    assert per_phase == {p["phase"]: p["instructions"] for p in s["phases"]}
    # 10M-instruction intervals, cut at the first block end past the budget; only the last is partial.
    assert all(10_000_000 <= rec["instructions"] < 10_000_100 for rec in records[:-1])
    assert records[-1]["partial"] and not any(rec["partial"] for rec in records[:-1])
    assert [rec["seq"] for rec in records] == list(range(len(records)))
    # Four rounds of A A B C: the three kinds of work recur, so few phases cover most of the run.
    top3 = s["phases"][:3]
    assert sum(p["share"] for p in top3) > 0.75, top3
    assert all(p["runs"] >= 3 for p in top3), top3
    # Each main phase names its hot code from the target's symbols, and shows it disassembled.
    hottest = [p["top_code"][0] for p in top3]
    assert {h["symbol"].split("!")[-1] for h in hottest} == {"hash_phase", "float_phase", "chase_phase"}
    assert all(h["disassembly"] and "0x" in h["disassembly"][-1] for h in hottest)
    assert s["predictors"]["rle_markov"]["overall"]["n"] == len(records) - 1
    # The live log replays unchanged: same phases, distances and predictions.
    replayed = tmp_path / "replayed.jsonl"
    r = run_cli("replay", str(log), "--log", str(replayed))
    assert r.returncode == 0, r.stderr
    fields = ("thread", "thread_seq", "phase", "new_phase", "predictions", "instructions")
    assert [[x[f] for f in fields] for x in read_records(replayed)] == [[x[f] for f in fields] for x in records]


def test_plain_output_lines(build):
    exe = build("phased.c")
    r = run_cli("--no-dashboard", "--status-every", "0.2", "-f", exe, "3", "3")
    assert r.returncode == 0, r.stderr
    native = subprocess.run([exe, "3", "3"], capture_output=True, text=True, check=True, timeout=300).stdout
    assert r.stdout == native  # phasescope's own lines go to stderr, never into the target's output
    lines = r.stderr.splitlines()
    changes = [ln for ln in lines if " -> P" in ln]
    assert changes and changes[0].split(": ")[1].startswith("start -> P0 (new)")
    assert any("intervals," in ln and "prediction accuracy" in ln for ln in lines)


def test_attach_by_pid_with_duration_leaves_target_running(long_running, tmp_path):
    proc, out = long_running
    wait_for(lambda: out.read_text().count("round") >= 1, what="target start")
    summary = tmp_path / "s.json"
    r = run_cli("--no-dashboard", "--duration", "1.5", "--summary", str(summary), "-p", str(proc.pid))
    assert r.returncode == 0, r.stderr
    assert "detached" in r.stderr
    s = json.loads(summary.read_text())
    assert s["end"]["how"] == "detached" and "--duration" in s["end"]["reason"]
    assert s["whole"]["intervals"] > 0
    rounds = out.read_text().count("round")
    wait_for(lambda: out.read_text().count("round") > rounds + 1, what="target progress after detach")
    assert alive(proc.pid)


def test_attach_by_name(long_running, tmp_path):
    proc, out = long_running
    wait_for(lambda: out.read_text().count("round") >= 1, what="target start")
    r = run_cli("--no-dashboard", "--duration", "1", "-n", f"psq{os.getpid()}")
    assert r.returncode == 0, r.stderr
    assert f"(pid {proc.pid}) detached" in r.stderr
    assert alive(proc.pid)


def test_sigint_detaches_and_writes_summary(long_running, tmp_path):
    proc, out = long_running
    wait_for(lambda: out.read_text().count("round") >= 1, what="target start")
    log, summary = tmp_path / "log.jsonl", tmp_path / "s.json"
    mon = subprocess.Popen(cli_command("--no-dashboard", "--log", str(log), "--summary", str(summary),
                                       "-p", str(proc.pid)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    wait_for(lambda: log_lines(log) >= 3, what="first intervals")
    mon.send_signal(signal.SIGINT)
    stdout, stderr = mon.communicate(timeout=30)
    assert mon.returncode == 0, stderr
    assert "Traceback" not in stderr and "stopped by SIGINT" in stderr
    s = json.loads(summary.read_text())
    records = read_records(log)
    assert s["end"]["how"] == "detached"
    assert sum(r["instructions"] for r in records) == s["whole"]["instructions"]
    check_thread_streams(records, s)  # the interval in flight at detach is shipped, partial
    rounds = out.read_text().count("round")
    wait_for(lambda: out.read_text().count("round") > rounds + 1, what="target progress after detach")


@pytest.mark.parametrize("args, message", [
    (["-p", "999999999"], "no such process"),
    (["-n", "no-such-process-name-xyz"], "no process named"),
    (["-f", "/nonexistent/program"], "no such program"),
    (["-f", "/etc/passwd"], "not executable"),
    ([], "give a target"),
    (["--buckets", "0", "-f", "/bin/true"], "buckets"),
    (["--threshold", "-1", "-f", "/bin/true"], "threshold"),
    (["--interval", "0", "-f", "/bin/true"], "interval"),
    (["--duration", "0", "-f", "/bin/true"], "--duration"),
    (["--log", "/nonexistent-dir/log.jsonl", "-f", "/bin/true"], "cannot write"),
])
def test_bad_input_one_line_error(args, message):
    r = run_cli("--no-dashboard", *args, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr
