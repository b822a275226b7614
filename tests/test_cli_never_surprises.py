"""What a new user tries first, on real processes and files: outputs never destroy inputs, and every
bad value is one line and exit 2 (the CLI fuzz tests are in test_cli_fuzz.py)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess

import pytest

from conftest import run_cli, wait_for
from phasescope.engine import PhaseEngine
from phasescope.engine.interval import Interval
from phasescope.formats.log import dumps, to_record

import numpy as np

pytestmark = pytest.mark.slow  # every test here starts a real process


def write_log(path, sampled=False, n=40):
    """A real log: two alternating phases, as the live monitor writes it."""
    engine = PhaseEngine()
    with open(path, "w") as f:
        for i in range(n):
            keys = (np.arange(8, dtype=np.uint64) + (100 if (i // 10) % 2 else 0)) << np.uint64(12)
            counts = np.full(8, 12, dtype=np.uint64)
            iv = Interval(1, i, None if sampled else 96, keys, counts, mode="sampled" if sampled else "exact",
                          samples=96 if sampled else 0, period_ns=1_000_000, start_ns=i * 10**8, end_ns=(i + 1) * 10**8)
            f.write(dumps(to_record(iv, engine.feed(iv))) + "\n")
    return path


def digest(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def one_line(r, code=2, *fragments):
    assert r.returncode == code, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for f in fragments:
        assert f in r.stderr, (f, r.stderr)


def test_an_output_that_is_an_input_or_another_output_is_refused(tmp_path):
    log = write_log(tmp_path / "run.jsonl")
    before = digest(log)
    for args, fragment in ((["replay", log, "--log", log], "is the input FILE"),
                           (["export-bbv", log, log], "is the input LOG"),
                           (["plot", log, "-o", log], "is the input LOG"),
                           (["reference", log, "-o", log], "is the input FILE"),
                           (["profile", log, "-o", log, "--format", "folded"], "is the input LOG"),
                           (["replay", log, "--log", tmp_path / "x", "--summary", tmp_path / "x"], "same file"),
                           (["--log", tmp_path / "y", "--summary", tmp_path / "y", "-f", "/bin/true"], "same file"),
                           (["replay", log, "--summary", tmp_path / "." / "run.jsonl"], "is the input FILE")):
        one_line(run_cli(*map(str, args)), 2, fragment)
        assert digest(log) == before
    os.link(log, tmp_path / "hard.jsonl")  # another name for the same file
    one_line(run_cli("replay", str(log), "--log", str(tmp_path / "hard.jsonl")), 2, "is the input FILE")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    # the file the shell gives as standard input (`< FILE`: the target's stdin in pipe mode)
    other = write_log(tmp_path / "other.jsonl")
    for args, fragment in ((["-o", log, "--mode", "sampled", "-f", "/bin/cat"], "is phasescope's standard input"),
                           (["replay", other, "--summary", log], "is phasescope's standard input"),
                           (["replay", "-", "--summary", log], "is the input FILE")):  # - reads standard input
        with open(log, "rb") as stdin:
            one_line(run_cli(*map(str, args), stdin=stdin), 2, fragment)
        assert digest(log) == before


def test_empty_and_cut_logs(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for args in (["export-bbv", empty, tmp_path / "e.bb"], ["replay", empty], ["plot", empty, "-o", tmp_path / "e.png"],
                 ["profile", empty, "-o", tmp_path / "e.folded"]):
        one_line(run_cli(*map(str, args)), 2)
    assert not (tmp_path / "e.bb").exists()
    log = write_log(tmp_path / "run.jsonl")
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(log.read_bytes()[:-30])  # a run killed mid-write
    for args in (["export-bbv", cut, tmp_path / "c.bb"], ["score", cut, "--reference", "auto"],
                 ["profile", cut, "-o", tmp_path / "c.pb.gz"]):
        r = run_cli(*map(str, args))
        assert r.returncode == 0 and "the last line is cut short" in r.stderr, r.stderr


def test_plot_takes_sampled_logs_and_refuses_what_it_cannot_write(tmp_path):
    pytest.importorskip("matplotlib")
    log = write_log(tmp_path / "s.jsonl", sampled=True)
    r = run_cli("plot", str(log), "-o", str(tmp_path / "s.png"))
    assert r.returncode == 0 and (tmp_path / "s.png").stat().st_size > 0 and r.stdout == "", r.stderr
    one_line(run_cli("plot", str(log), "-o", str(tmp_path / "s.xyz")), 2, "unknown image format")
    one_line(run_cli("plot", str(log), "-o", str(tmp_path)), 2, "is a directory")


def test_a_read_only_phase_database_is_used_and_never_rewritten(tmp_path):
    log, db = write_log(tmp_path / "run.jsonl"), tmp_path / "phases.json"
    assert run_cli("replay", str(log), "--phase-db", str(db)).returncode == 0
    db.chmod(0o444)
    before = digest(db)
    summary = tmp_path / "s.json"
    r = run_cli("replay", str(log), "--phase-db", str(db), "--summary", str(summary))
    assert r.returncode == 0 and "read-only" in r.stderr
    assert digest(db) == before and stat.S_IMODE(db.stat().st_mode) == 0o444
    assert json.loads(summary.read_text())["phase_db"] == {"path": str(db), "saved": False}
    db.chmod(0o640)
    assert run_cli("replay", str(log), "--phase-db", str(db)).returncode == 0
    assert stat.S_IMODE(db.stat().st_mode) == 0o640  # replaced, with its mode kept
    one_line(run_cli("replay", str(log), "--phase-db", str(db), "--buckets", "64"), 2,
             "made with other tracker settings", "buckets 32 (now 64)")


def test_event_addresses_say_what_they_bound_or_why_not(tmp_path):
    log = write_log(tmp_path / "run.jsonl")
    summary = tmp_path / "s.json"
    r = run_cli("replay", str(log), "--events", "tcp:127.0.0.1:0", "--summary", str(summary))
    address = json.loads(summary.read_text())["events"]["address"]
    assert r.returncode == 0 and f"serving events on {address}" in r.stderr and not address.endswith(":0")
    one_line(run_cli("replay", str(log), "--events", "unix:" + str(tmp_path / ("s" * 120))), 2,
             "longer than a socket path may be")


def test_pids_that_cannot_be_traced_say_why(tmp_path):
    child = subprocess.Popen(["true"])
    wait_for(lambda: "Z" in open(f"/proc/{child.pid}/stat").read().split()[2], 10, "the child to be a zombie")
    try:
        one_line(run_cli("--no-dashboard", "-p", str(child.pid)), 2, "zombie")
    finally:
        child.wait(timeout=10)
    one_line(run_cli("-H", "127.0.0.1:1", "-n", "app"), 2, "cannot")
    for args, fragment in ((["--table-size", "1000000000"], "table size"),
                           (["--interval", "99999999999999999999"], "interval must be")):
        one_line(run_cli(*args, "-f", "/bin/true"), 2, fragment)
