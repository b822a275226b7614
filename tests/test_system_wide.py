"""System-wide sampling (-a) and forked children in sampled mode, on real processes: programs
started after phasescope are seen, each with its own engine whose phases tell its activities
apart; children of a spawned target (fork, a shell pipeline) are followed with engines of their
own; the -a refusals are one line and exit 2; the per-process engines stay bounded."""

from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np
import pytest

from conftest import cli_command, read_records, run_cli
from phasescope.engine import EngineConfig, Interval
from phasescope.engine.tracker import PRESETS, TrackerConfig
from phasescope.pipeline.processes import ProcessEngines

N = "400000000"  # sampled_two: phase_a about 1 s, then phase_b about 0.5 s of CPU


def _wait_for_line(proc, text: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stderr.readline()
        if text in line:
            return
        assert line or proc.poll() is None, f"phasescope ended before saying {text!r}"
    raise AssertionError(f"phasescope did not say {text!r} in {timeout} s")


def _main_phases(process: dict, floor: float = 0.15) -> set:
    return {p["phase"] for p in process["phases"] if (p["share"] or 0) >= floor}


@pytest.mark.slow
def test_a_sees_two_programs_started_after_it_and_tells_their_phases_apart(build, tmp_path):
    exe = build("sampled_two.c", name="two_sys")
    summary, log = tmp_path / "s.json", tmp_path / "l.jsonl"
    mon = subprocess.Popen(cli_command("-a", "--no-dashboard", "--comm", "two_sys", "--duration", "25",
                                       "--summary", str(summary), "--log", str(log)),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_line(mon, "sampling")
        first = subprocess.Popen([exe, N], stdout=subprocess.PIPE)
        second = subprocess.Popen([exe, N], stdout=subprocess.PIPE)
        assert first.wait(60) == 0 and second.wait(60) == 0
        time.sleep(0.5)
    finally:
        mon.send_signal(2)
        _, err = mon.communicate(timeout=60)
    assert mon.returncode == 0, err
    s = json.loads(summary.read_text())
    procs = {p["pid"]: p for p in s["processes"]}
    assert {first.pid, second.pid} <= set(procs), err
    for pid in (first.pid, second.pid):
        p = procs[pid]
        assert p["comm"] == "two_sys" and p["ended"] == "exited"
        assert len(_main_phases(p)) == 2, p["phases"]  # phase_a and phase_b, each its own phase
    records = read_records(log)
    assert {r["pid"] for r in records} == {first.pid, second.pid}
    assert all(r["comm"] == "two_sys" for r in records)
    for pid in (first.pid, second.pid):  # each engine numbers its own phases from 0
        assert min(r["phase"] for r in records if r["pid"] == pid) == 0
    assert "busiest processes" in err and "system-wide sampling stopped" in err


@pytest.mark.slow
def test_a_forked_child_is_followed_with_its_own_engine(build, tmp_path):
    exe = build("forks.c", name="forks_sampled")
    native = subprocess.run([exe, "300000000"], capture_output=True, check=True, timeout=300).stdout
    summary = tmp_path / "s.json"
    r = subprocess.run(cli_command("--mode", "sampled", "--no-dashboard", "--summary", str(summary),
                                   "-f", exe, "300000000"), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(native.splitlines())
    s = json.loads(summary.read_text())
    children = s["children"]
    assert [c["comm"] for c in children] == ["forks_sampled"], children
    assert children[0]["intervals"] >= 2 and children[0]["pid"] != s["target"]["pid"]
    assert children[0]["ended"] == "exited"  # its end was seen, not only the run's


@pytest.mark.slow
def test_a_shell_pipeline_is_followed_children_included(build, tmp_path):
    exe = build("sampled_two.c", name="two_pipe")
    summary, log = tmp_path / "s.json", tmp_path / "l.jsonl"
    r = subprocess.run(cli_command("--mode", "sampled", "--no-dashboard", "--summary", str(summary),
                                   "--log", str(log), "-f", "/bin/sh", "--", "-c", f"{exe} {N} | cat"),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(b"ready\nchecksum ")
    children = {c["comm"]: c for c in json.loads(summary.read_text())["children"]}
    assert "two_pipe" in children, children  # exec renamed the forked shell
    assert len(_main_phases(children["two_pipe"])) == 2, children["two_pipe"]["phases"]
    records = read_records(log)
    assert any(rec.get("comm") == "two_pipe" for rec in records)


@pytest.mark.slow
@pytest.mark.parametrize("args, says", [
    (["-a", "-p", "1"], "takes no -p"),
    (["-a", "--mode", "exact"], "needs --mode sampled"),
    (["-a", "--bursts"], "--bursts"),
    (["-a", "--bbv", "x.bb"], "--bbv"),
    (["-a", "--pids", "12,x"], "--pids takes process ids"),
    (["-a", "--cgroup", "system.slice"], "--cgroup takes a cgroup path"),
    (["-a", "--max-processes", "0"], "--max-processes"),
    (["--comm", "bash", "-p", "1"], "give -a"),
])
def test_bad_system_wide_options_are_one_line_and_exit_2(args, says, tmp_path):
    r = run_cli(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.slow
def test_a_phase_db_that_is_a_file_is_refused_with_a(tmp_path):
    db = tmp_path / "db.json"
    db.write_text("{}")
    r = run_cli("-a", "--duration", "1", "--phase-db", str(db))
    assert r.returncode == 2 and "directory" in r.stderr, r.stderr
    assert db.read_text() == "{}"


def _window(pid: int, seq: int, key: int) -> Interval:
    return Interval(thread=pid, seq=seq, instructions=None, keys=np.array([key << 12], dtype=np.uint64),
                    counts=np.array([100], dtype=np.uint64), mode="sampled", samples=100, period_ns=1_000_000,
                    pid=pid, comm=f"p{pid}")


def test_process_engines_stay_bounded_and_keep_each_process_apart():
    config = EngineConfig(tracker=TrackerConfig(**PRESETS["sampled"]))
    engines = ProcessEngines(config, max_processes=3)
    for pid in range(100, 110):  # ten processes, each with one code page of its own, three windows
        for seq in range(3):
            engines.feed(_window(pid, seq, pid))
    assert len(engines.runs) == 3 and engines.retired == 7 and engines.seen == 10
    assert sorted(engines.runs) == [107, 108, 109]  # the most recently active stay
    for pid in range(107, 110):
        assert engines.runs[pid].engine.stats.intervals == 3
        assert set(engines.runs[pid].engine.stats.phases) == {0}  # its own engine: its own phase 0
    engines.end(108)
    kept = engines.summary()
    assert [p["pid"] for p in kept[:2]] == [107, 109] or [p["pid"] for p in kept[:2]] == [109, 107]
    assert {p["pid"]: p["ended"] for p in kept}[108] == "exited"
    assert sum(1 for p in kept if p["ended"] == "retired") == 7


@pytest.mark.slow
def test_a_without_the_right_to_sample_every_cpu_says_what_to_change():
    """As an unprivileged user (perf_event_paranoid > 0) CPU-wide events are refused: one line
    naming the settings that allow them, exit 2."""
    if open("/proc/sys/kernel/perf_event_paranoid").read().strip() in ("-1", "0"):
        pytest.skip("perf_event_paranoid allows CPU-wide events to every user here")
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        *cli_command("-a", "--duration", "1", "--no-dashboard")],
                       capture_output=True, text=True, timeout=60)
    if "No module named" in r.stderr or "Permission denied: '" in r.stderr:
        pytest.skip(f"the unprivileged user cannot run this checkout's interpreter: {r.stderr.strip()[:200]}")
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "CAP_PERFMON" in r.stderr and "perf_event_paranoid" in r.stderr


class _Run:
    """What system_view.render reads of a run: a header and the busiest rows."""

    def __init__(self, rows):
        self.rows = rows

    def header(self):
        return {"status": "sampling", "filter": "every process", "elapsed": 12.0, "rate_hz": 1000, "cpus": 2,
                "processes": len(self.rows), "seen": 40, "samples": 123456, "lost": 0, "skipped": 0, "recent_s": 5.0}

    def busiest(self, n):
        return self.rows[:n]


@pytest.mark.parametrize("width, height", [(80, 24), (100, 30), (160, 48)])
def test_the_system_dashboard_shows_every_figure_whole(width, height):
    from rich.console import Console
    from phasescope.view.system_view import render
    rows = [{"pid": 4000000 + i, "comm": "a-rather-long-command-name" if i == 0 else f"proc{i}", "cpu_s": 1.0,
             "recent_cpu_s": 4.5 - i * 0.1, "threads": 3, "intervals": 99, "phases": 12, "changes": 345,
             "thread": 4000000 + i, "phase": 10 + i, "run_length": 777, "next": 11 + i, "confidence": 0.83,
             "ended": None} for i in range(30)]
    console = Console(width=width, height=height, record=True, color_system=None)
    console.print(render(_Run(rows), width, height))
    text = console.export_text()
    lines = text.splitlines()
    assert len(lines) <= height and max(map(len, lines)) <= width
    for i, row in enumerate(rows[:height - 12]):
        assert str(row["pid"]) in text and f"P{row['phase']}" in text and f"{90 - 2 * i}%" in text, (i, text)
    assert "123456" in text and "83%" in text


class _EndedSampler:
    """What SystemRun._feed reads of a sampler: a process that ended in the windows being fed (the
    sampler has forgotten it)."""

    def __init__(self, proc):
        self.processes, self._ended = {}, [proc]

    def take_ended(self):
        ended, self._ended = self._ended, []
        return ended


def test_a_process_first_classified_as_it_ends_keeps_its_executable(tmp_path):
    """Its engine starts on windows the sampler returned with its end: the executable was looked up
    after the sampler forgot the process, so its phase database was named after its comm, another
    file than the program's other runs used (seen live: ``spin-a801301e`` beside ``spin-4d68f591``;
    stop 47)."""
    from phasescope.pipeline.system import SystemRun
    from phasescope.pipeline.processes import program_key
    from phasescope.sources.system_sampler import ProcessInfo
    config = EngineConfig(tracker=TrackerConfig(**PRESETS["sampled"]))
    proc = ProcessInfo(321, "p321", "/opt/prog/bin/p321", True)
    run = SystemRun(_EndedSampler(proc), config, [], dashboard=False, out=None, phase_db_dir=str(tmp_path))
    run._feed([_window(321, 0, 7)])
    ended = run.processes.finished[-1]
    assert (ended["exe"], ended["key"]) == ("/opt/prog/bin/p321", program_key("p321", "/opt/prog/bin/p321"))
    run.processes.close()  # the run's end: the program's database is released
    assert os.listdir(tmp_path) == [program_key("p321", "/opt/prog/bin/p321") + ".json"]
