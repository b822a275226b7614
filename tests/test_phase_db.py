"""--phase-db: the same code gets the same phase ID in every run; other settings and corrupt
files are refused and left untouched."""

from __future__ import annotations

import pytest
import json

from conftest import run_cli

pytestmark = pytest.mark.slow  # every test here starts a real process


def main_phases(summary_path, share=0.1):
    with open(summary_path) as f:
        s = json.load(f)
    return {p["phase"]: p for p in s["phases"] if p["share"] >= share}


def test_two_runs_same_ids_then_refused(build, tmp_path):
    prog = build("phased.c")
    db = tmp_path / "phases.json"
    tops = []
    for i in (1, 2):
        summary = tmp_path / f"s{i}.json"
        r = run_cli("-f", prog, "3", "6", "--no-dashboard", "--phase-db", str(db), "--summary", str(summary),
                    timeout=60)
        assert r.returncode == 0, r.stderr
        phases = main_phases(summary)
        assert len(phases) >= 3
        assert all(p["known"] is (i == 2) for p in phases.values())
        tops.append({pid: p["top_code"][0]["key"] for pid, p in phases.items()})
    assert tops[0] == tops[1]  # same IDs for the same hottest code
    saved = json.loads(db.read_text())
    assert saved["runs"] == 2 and {r["phase"] for r in saved["representatives"]} >= set(tops[0])
    before = db.read_bytes()
    r = run_cli("-p", "999999", "--no-dashboard", "--phase-db", str(db), "--threshold", "0.05", timeout=30)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "other tracker settings" in r.stderr and "threshold" in r.stderr
    assert db.read_bytes() == before


def _log(path, order):
    """A log of three 'programs' (keys 1000, 2000, 3000), 4 intervals each, in ``order``."""
    recs, seq = [], 0
    for key in order:
        for _ in range(4):
            recs.append({"seq": seq, "thread": 7, "thread_seq": seq, "instructions": 100000,
                         "blocks": [[key, 60000], [key + 1, 40000]]})
            seq += 1
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_replay_in_another_order_keeps_ids(tmp_path):
    db, s1, s2, s3 = (tmp_path / n for n in ("db.json", "s1.json", "s2.json", "s3.json"))
    a = _log(tmp_path / "a.jsonl", [1000, 2000, 3000])
    b = _log(tmp_path / "b.jsonl", [3000, 1000, 2000])
    assert run_cli("replay", str(a), "--phase-db", str(db), "--summary", str(s1)).returncode == 0
    assert run_cli("replay", str(b), "--phase-db", str(db), "--summary", str(s2)).returncode == 0
    assert run_cli("replay", str(b), "--summary", str(s3)).returncode == 0  # no database
    key = lambda s: {p["top_code"][0]["key"] // 2 * 2: p["phase"] for p in json.loads(s.read_text())["phases"]}
    assert key(s1) == key(s2) == {1000: 0, 2000: 1, 3000: 2}
    assert key(s3) == {3000: 0, 1000: 1, 2000: 2}  # without it, IDs follow discovery order
    assert all(p["known"] for p in json.loads(s2.read_text())["phases"])


def test_corrupt_db_refused_and_unchanged(tmp_path):
    log = _log(tmp_path / "a.jsonl", [1000, 2000])
    db = tmp_path / "db.json"
    assert run_cli("replay", str(log), "--phase-db", str(db)).returncode == 0
    good = db.read_text()
    for bad in (good[: len(good) // 2], "[]", good.replace('"footprint": [', '"footprint": ["x", ')):
        db.write_text(bad)
        r = run_cli("replay", str(log), "--phase-db", str(db))
        assert r.returncode == 2 and "not a valid phasescope phase database" in r.stderr
        assert r.stderr.count("\n") == 1
        assert db.read_text() == bad


def test_a_folded_phase_counts_as_the_phase_it_was_folded_into(tmp_path):
    """Three behaviours in a two-entry merging table: the first two (the same blocks in other
    proportions) are folded together when the third arrives; the database credits the folded
    phase's intervals to the phase that kept its ID, so every interval is counted once."""
    recs = []
    for mix, n in (((60000, 40000), 4), ((20000, 80000), 3), ((None, None), 5)):
        for _ in range(n):
            blocks = [[5000, 100000]] if mix[0] is None else [[1000, mix[0]], [1001, mix[1]]]
            recs.append({"seq": len(recs), "thread": 7, "thread_seq": len(recs), "instructions": 100000,
                         "blocks": blocks})
    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    db, summary = tmp_path / "db.json", tmp_path / "s.json"
    r = run_cli("replay", str(log), "--tracker", "coarse", "--table-size", "2", "--threshold", "0.1",
                "--phase-db", str(db), "--summary", str(summary))
    assert r.returncode == 0, r.stderr
    phases = {p["phase"]: p for p in json.loads(summary.read_text())["phases"]}
    assert {p: q["merged_into"] for p, q in phases.items()} == {0: None, 1: 0, 2: None}  # 4 intervals keep 0
    saved = {r["phase"]: r for r in json.loads(db.read_text())["representatives"]}
    assert {p: r["intervals"] for p, r in saved.items()} == {0: 7, 2: 5}
    assert saved[0]["instructions"] == 700000


def test_a_database_saved_before_projection_existed_is_used(tmp_path):
    log = _log(tmp_path / "a.jsonl", [1000, 2000])
    db = tmp_path / "db.json"
    assert run_cli("replay", str(log), "--phase-db", str(db)).returncode == 0
    saved = json.loads(db.read_text())
    assert saved["settings"].pop("projection") is False
    db.write_text(json.dumps(saved))
    r = run_cli("replay", str(log), "--phase-db", str(db))
    assert r.returncode == 0, r.stderr
    assert json.loads(db.read_text())["runs"] == 2


def test_a_database_of_another_preset_names_the_preset_it_fits(tmp_path):
    # a database saved under the paper's tracker (the default before issue 28) under today's default
    log, db = _log(tmp_path / "a.jsonl", [1000, 2000]), tmp_path / "db.json"
    assert run_cli("replay", str(log), "--tracker", "paper", "--phase-db", str(db)).returncode == 0
    before = db.read_bytes()
    r = run_cli("replay", str(log), "--phase-db", str(db))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "other tracker settings" in r.stderr and "it fits --tracker paper" in r.stderr
    assert db.read_bytes() == before
    assert run_cli("replay", str(log), "--tracker", "paper", "--phase-db", str(db)).returncode == 0
