"""Replay and export-bbv through the real command line."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import read_records
from phasescope.engine.phase_engine import PhaseEngine
from phasescope.engine.interval import Interval
from phasescope.formats.log import dumps, settled_phases, to_record

pytestmark = pytest.mark.slow  # every test here starts a real process

TWO_PHASES_C = r"""
#include <stdio.h>
static long integer_phase(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) {
        if (i & 1) s += i * 3; else s ^= i;
        if ((i & 7) == 3) s -= 5;
    }
    return s;
}
static double float_phase(long n) {
    double d = 1.0, e = 0.5;
    for (long i = 0; i < n; i++) {
        d = d * 1.0000001 + e;
        if (d > 1e6) { d = d / 3.0; e = e * 0.5 + 0.25; }
    }
    return d + e;
}
int main(void) {
    long s = integer_phase(400000);
    double d = float_phase(400000);
    printf("%ld %f\n", s, d);
    return 0;
}
"""


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "phasescope.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def assert_input_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.mark.skipif(not (shutil.which("valgrind") and shutil.which("cc")), reason="needs valgrind and cc")
def test_valgrind_exp_bbv_end_to_end(tmp_path):
    src = tmp_path / "two.c"
    src.write_text(TWO_PHASES_C)
    exe = tmp_path / "two"
    subprocess.run(["cc", "-O1", "-o", exe, src], check=True, timeout=300)
    bb, pc = tmp_path / "two.bb", tmp_path / "two.pc"
    subprocess.run(["valgrind", "--tool=exp-bbv", "--interval-size=200000", f"--bb-out-file={bb}",
                    f"--pc-out-file={pc}", exe], check=True, capture_output=True, timeout=120)
    summary = tmp_path / "summary.json"
    log = tmp_path / "log.jsonl"
    proc = cli("replay", bb, "--pc-out-file", pc, "--summary", summary, "--log", log)
    assert proc.returncode == 0, proc.stderr
    assert "rle_markov" in proc.stdout
    s = json.loads(summary.read_text())

    # Independent count of the file: every block count of every T line.
    lines = [ln for ln in bb.read_text().splitlines() if ln.startswith("T")]
    total = sum(int(tok.split(":")[-1]) for ln in lines for tok in ln[1:].split())
    assert s["whole"]["instructions"] == total and s["whole"]["intervals"] == len(lines)
    assert sum(p["instructions"] for p in s["phases"]) == total
    assert sum(p["share"] for p in s["phases"]) == pytest.approx(1.0)

    # The two loops are distinct phases; each holds for many intervals.
    records = read_records(log)
    phases = [r["phase"] for r in records]
    n = len(phases)
    assert n >= 10
    first, second = phases[n // 4], phases[3 * n // 4]
    assert first != second
    assert phases.count(first) >= n // 4 and phases.count(second) >= n // 4
    # Blocks are code addresses from the pc map, so top code points into the program.
    pcs = {int(ln.split(":")[2], 16) for ln in pc.read_text().splitlines()}
    assert all(t["key"] in pcs for p in s["phases"] for t in p["top_code"])


def recorded_stream(n=120):
    rng = np.random.default_rng(5)
    profiles = [rng.integers(0, 2**63, 40, dtype=np.uint64) for _ in range(3)]
    weights = [rng.integers(10, 500, 40) for _ in range(3)]
    pattern = [0, 0, 1, 2]
    out = []
    for i in range(n):
        thread = 100 + i % 2
        p = pattern[(i // 2) % 4]
        counts = (weights[p] * rng.uniform(0.95, 1.05, 40)).astype(np.uint64)
        out.append(Interval(thread, i // 2, int(counts.sum()), profiles[p], counts, start_ns=10 * i,
                            end_ns=10 * i + 7, os={"cpu_ns": 5, "minflt": 1, "majflt": 0, "nvcsw": 0, "nivcsw": 1}))
    return out


def write_live_log(path):
    """A log as the live monitor writes it (with an extra field the reader must ignore)."""
    engine = PhaseEngine()
    with open(path, "w") as f:
        for iv in recorded_stream():
            f.write(dumps(dict(to_record(iv, engine.feed(iv)), module_map_version=3)) + "\n")
    return engine


def test_live_log_replays_unchanged(tmp_path):
    live = tmp_path / "live.jsonl"
    engine = write_live_log(live)
    out_log, summary = tmp_path / "replay.jsonl", tmp_path / "s.json"
    proc = cli("replay", live, "--log", out_log, "--summary", summary)
    assert proc.returncode == 0, proc.stderr
    strip = lambda r: {k: v for k, v in r.items() if k != "module_map_version"}  # noqa: E731
    a = [strip(r) for r in read_records(live)]
    b = read_records(out_log)
    assert a == b
    s = json.loads(summary.read_text())
    assert s["phases"] == json.loads(json.dumps(engine.summary()))["phases"]
    assert s["predictors"]["rle_markov"]["overall"]["accuracy"] > s["predictors"]["last_phase"]["overall"]["accuracy"]


def test_a_stopped_replay_leaves_the_old_profile_and_writes_no_summary(tmp_path, monkeypatch):
    """A stop signal ends a replay at once (stop 45): its --profile had been emptied at the start
    and was then written from the part replayed, a whole-looking profile of part of the log."""
    from phasescope.commands.replay import ReplayCommand
    from phasescope.pipeline.flow import Flow

    def stopped(self, batch):
        raise KeyboardInterrupt  # what the stop signal's handler raises there

    live, profile, summary = tmp_path / "live.jsonl", tmp_path / "p.folded", tmp_path / "s.json"
    write_live_log(live)
    profile.write_text("the old profile\n")
    monkeypatch.setattr(Flow, "feed_many", stopped)
    argv = [str(live), "--profile", str(profile), "--summary", str(summary)]
    assert ReplayCommand("phasescope replay").main(argv) == 130
    assert profile.read_text() == "the old profile\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live.jsonl", "p.folded"]  # no summary, no temporary file


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["replay", "{log}"], ["score", "{log}", "--reference", "auto"]])
def test_a_full_standard_output_is_one_line_and_exit_1(tmp_path, argv):
    """``phasescope replay run.jsonl > /dev/full`` was rich's traceback; now one line, as cat says it."""
    live = tmp_path / "live.jsonl"
    write_live_log(live)
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "phasescope.cli", *(a.format(log=live) for a in argv)],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"phasescope {argv[0]}: error: No space left on device"]


def test_replay_settings_change_the_result(tmp_path):
    live = tmp_path / "live.jsonl"
    write_live_log(live)
    s1, s2 = tmp_path / "a.json", tmp_path / "b.json"
    assert cli("replay", live, "--summary", s1).returncode == 0
    assert cli("replay", live, "--summary", s2, "--threshold", "2", "--full-precision", "--buckets", "8").returncode == 0
    a, b = json.loads(s1.read_text()), json.loads(s2.read_text())
    assert a["whole"]["phases"] == 3 and b["whole"]["phases"] == 1
    assert b["config"]["tracker"]["bits"] is None and b["config"]["tracker"]["buckets"] == 8


def test_replay_interval_merges_recorded_intervals(tmp_path):
    live = tmp_path / "live.jsonl"
    write_live_log(live)
    stream = recorded_stream()
    size = 2 * max(iv.instructions for iv in stream)  # every merged interval takes 3 or more
    out = tmp_path / "merged.jsonl"
    assert cli("replay", live, "--interval", size, "--log", out).returncode == 0
    recs = read_records(out)
    assert sum(r["instructions"] for r in recs) == sum(iv.instructions for iv in stream)
    assert len(recs) <= len(stream) // 3 + 2
    for thread in (100, 101):
        mine = [r for r in recs if r["thread"] == thread]
        assert [r["thread_seq"] for r in mine] == list(range(len(mine)))
        assert all(r["instructions"] >= size and not r["partial"] for r in mine[:-1])
        assert mine[-1]["partial"] == (mine[-1]["instructions"] < size)


@pytest.mark.parametrize("server", [("--events", "tcp:127.0.0.1:0"), ("--metrics", "127.0.0.1:0")])
def test_interval_on_a_sampled_log_is_one_line_before_any_server(tmp_path, server):
    # the refusal came after --events/--metrics had announced their server: two lines for exit 2
    from test_cli_never_surprises import write_log
    log = tmp_path / "sampled.jsonl"
    write_log(log, sampled=True)
    r = cli("replay", log, "--interval", "20000000", *server)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "phasescope replay: error: --interval merges intervals by instructions, and a sampled log has none"], r.stderr


def test_export_bbv_round_trip(tmp_path):
    live = tmp_path / "live.jsonl"
    write_live_log(live)
    bb, pc = tmp_path / "out.bb", tmp_path / "out.pc"
    proc = cli("export-bbv", live, bb, "--pc-out-file", pc, "--thread", 100)
    assert proc.returncode == 0, proc.stderr
    lines = bb.read_text().splitlines()
    assert len(lines) == 60 and all(ln.startswith("T:") for ln in lines)
    ids = {int(tok.split(":")[1]) for ln in lines for tok in ln[1:].split()}
    assert ids == set(range(1, 121))  # dense and 1-based: 3 profiles x 40 blocks
    replay_log = tmp_path / "r.jsonl"
    assert cli("replay", bb, "--pc-out-file", pc, "--log", replay_log).returncode == 0
    original = [r for r in read_records(live) if r["thread"] == 100]
    replayed = read_records(replay_log)
    assert settled_phases(replayed) == [0, 0, 1, 2] * 15  # as the log settles them: B and C confirmed late
    assert [sorted(map(tuple, r["blocks"])) for r in replayed] == [sorted(map(tuple, r["blocks"])) for r in original]


@pytest.mark.parametrize("content, line, text", [
    ("T:1:5 :2:6\nT:1:5 :2:x6\n", 2, "malformed interval near ':2:x6'"),
    ("T:1:5 :2:6\n\nT:1:5 :2:\n", 3, "malformed interval"),
    ("T:1:5\nS:1:5\n", 2, "malformed interval"),
])
def test_malformed_bb_is_one_line_with_file_and_line(tmp_path, content, line, text):
    f = tmp_path / "bad.bb"
    f.write_text(content)
    assert_input_error(cli("replay", f, "--format", "bb"), f"{f}:{line}:", text)


def test_bb_block_missing_from_pc_map(tmp_path):
    bb, pc = tmp_path / "a.bb", tmp_path / "a.pc"
    bb.write_text("T:1:5 :2:6\nT:3:4\n")
    pc.write_text("F:1:400000:main\nF:2:400010:main\n")
    assert_input_error(cli("replay", bb, "--pc-out-file", pc), f"{bb}:2:", "block id 3")
    pc.write_text("F:1:400000:main\nF:zz:400010:main\n")
    assert_input_error(cli("replay", bb, "--pc-out-file", pc), f"{pc}:2:")


def test_truncated_or_malformed_log_line(tmp_path):
    live = tmp_path / "live.jsonl"
    write_live_log(live)
    text = live.read_text()
    cut = tmp_path / "cut.jsonl"
    cut.write_text(text[: len(text) // 2])  # truncated mid-record: a run killed while writing
    n = cut.read_text().count("\n") + 1
    summary = tmp_path / "cut.json"
    r = cli("replay", cut, "--summary", summary)
    assert r.returncode == 0 and f"{cut}:{n}: the last line is cut short" in r.stderr, r.stderr
    assert json.loads(summary.read_text())["whole"]["intervals"] == n - 1
    middle = tmp_path / "middle.jsonl"  # the same cut record with a newline after it is not a cut: an error
    middle.write_text(text[: len(text) // 2] + "\n" + text.splitlines()[0] + "\n")
    assert_input_error(cli("replay", middle), f"{middle}:{n}:", "not a JSON record")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text.splitlines()[0] + "\n" + '{"thread": 1, "thread_seq": 0, "instructions": 5, '
                   '"blocks": [[1, -5]]}\n')
    assert_input_error(cli("replay", bad), f"{bad}:2:", "blocks")
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"thread": 1, "instructions": 5, "blocks": []}\n')
    assert_input_error(cli("replay", missing), f"{missing}:1:", "thread_seq")


def test_unrecognised_input(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("\nhello\n")
    assert_input_error(cli("replay", f), f"{f}:2:")
    assert_input_error(cli("replay", tmp_path / "nope.bb"), "nope.bb", "cannot read")


@pytest.mark.parametrize("flags, text", [
    (["--buckets", "0"], "buckets"),
    (["--threshold", "-0.1"], "threshold"),
    (["--interval", "0"], "interval"),
    (["--table-size", "0"], "table size"),
    (["--rle-entries", "0"], "rle entries"),
    (["--rle-entries", "2147483648"], "rle entries must be from 1 to 65536"),  # was killed allocating it
    (["--rle-entries", "18446744073709551616"], "rle entries"),  # was an OverflowError traceback
    (["--gpht-depth", "100000"], "gpht depth"),
])
def test_out_of_range_options(tmp_path, flags, text):
    f = tmp_path / "a.bb"
    f.write_text("T:1:5\n")
    summary = tmp_path / "s.json"
    assert_input_error(cli("replay", f, "--summary", summary, *flags), "phasescope replay: error:", text)
    assert not summary.exists()


def test_unwritable_output_fails_before_work(tmp_path):
    f = tmp_path / "a.bb"
    f.write_text("T:1:5\n")
    assert_input_error(cli("replay", f, "--summary", tmp_path / "no" / "s.json"), "cannot write")
    assert_input_error(cli("replay", f, "--log", tmp_path), "cannot write")


def test_a_summary_to_standard_output_through_a_pipe(tmp_path):
    """``--summary /dev/stdout | ...``: its link names a pipe (``pipe:[N]``), which has no path to
    open or to put a temporary file beside: written in place, as to a FIFO."""
    live = tmp_path / "live.jsonl"
    write_live_log(live)
    proc = cli("replay", live, "--summary", "/dev/stdout")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout[:proc.stdout.index("\n}\n") + 2])["end"]["how"] == "replayed"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["--help"], ["help", "all"], ["help", "tracker"], ["replay", "--help"]])
def test_a_help_that_cannot_be_written_is_one_line_and_exit_1(argv):
    """``phasescope help all > /dev/full`` ended 0 with nothing written and nothing said: argparse
    drops the write's error."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "phasescope.cli", *argv], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    prog = "phasescope replay" if argv[0] == "replay" else "phasescope"
    assert proc.stderr.strip().splitlines() == [f"{prog}: error: standard output: No space left on device"]
