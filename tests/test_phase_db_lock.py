"""Two runs with one --phase-db at once: both loaded the same phases, handed out the same new IDs
to different code, and the second save replaced the first's (its phases lost, ``runs`` counted
once). A run now holds the database from its load to its end; a second one is refused."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from phasescope.engine import Interval
from phasescope.engine.config import PRESETS, EngineConfig, TrackerConfig
from phasescope.pipeline.processes import ProcessEngines
from phasescope.errors import InputError
from phasescope.sinks.phase_db import PhaseDb, settings_of


def test_a_second_run_on_a_database_in_use_is_refused_naming_the_holder(tmp_path):
    db = tmp_path / "phases.json"
    first = PhaseDb(str(db), EngineConfig())
    with pytest.raises(InputError, match=rf"--phase-db {db}: in use by another phasescope run \(pid {os.getpid()}\)"):
        PhaseDb(str(db), EngineConfig())
    first.close()
    assert sorted(os.listdir(tmp_path)) == []  # the lock file goes with its run
    PhaseDb(str(db), EngineConfig()).close()


def test_a_database_refused_for_its_content_is_not_left_locked(tmp_path):
    db = tmp_path / "phases.json"
    db.write_text("{not json")
    with pytest.raises(InputError, match="not a valid phasescope phase database"):
        PhaseDb(str(db), EngineConfig())
    assert sorted(os.listdir(tmp_path)) == ["phases.json"]


def test_a_read_only_database_and_one_opened_unlocked_are_not_locked(tmp_path):
    """``lock=False``: -a's per-process openings, the program's lock held once by the run."""
    db = tmp_path / "phases.json"
    db.write_text(json.dumps({"format": "phasescope-phase-db", "version": 1, "settings": settings_of(EngineConfig()), "runs": 0,
                              "next_id": 0, "representatives": []}))
    a = PhaseDb(str(db), EngineConfig(), lock=False)
    b = PhaseDb(str(db), EngineConfig(), lock=False)
    a.close(), b.close()
    db.chmod(0o444)
    readers = [PhaseDb(str(db), EngineConfig()) for _ in range(2)]  # never saved: nothing to lose
    assert all(r.read_only for r in readers)


def test_a_lock_name_that_is_a_link_is_refused_not_written_through(tmp_path):
    """``.NAME.lock`` a symbolic link (planted in a shared directory, or left by hand): the run
    opened it through the link, truncated the file it names and wrote its pid there."""
    db, victim = tmp_path / "phases.json", tmp_path / "victim.txt"
    victim.write_text("precious data\n")
    (tmp_path / ".phases.json.lock").symlink_to(victim)
    with pytest.raises(InputError, match=r"--phase-db .*phases.json: its lock file .*\.phases\.json\.lock is a symbolic "
                                         r"link: remove it"):
        PhaseDb(str(db), EngineConfig())
    assert victim.read_text() == "precious data\n"
    assert (tmp_path / ".phases.json.lock").is_symlink()


def _window(pid: int, seq: int) -> Interval:
    return Interval(thread=pid, seq=seq, instructions=None, keys=np.array([7 << 12], dtype=np.uint64),
                    counts=np.array([100], dtype=np.uint64), mode="sampled", samples=100, period_ns=1_000_000,
                    pid=pid, comm="prog")


def test_a_second_system_wide_run_does_without_a_program_database_in_use(tmp_path):
    """Two ``-a --phase-db DIR`` runs at once both loaded and saved ``DIR/prog-*.json`` without a
    lock (stop 46): the second now does without it, saying why, while the first, holding it once for
    both its processes of the program, saves it."""
    config = EngineConfig(tracker=TrackerConfig(**PRESETS["sampled"]))
    first, second = (ProcessEngines(config, phase_db_dir=str(tmp_path)) for _ in range(2))
    for pid in (100, 101):
        first.feed(_window(pid, 0))
    assert all(run.db is not None for run in first.runs.values())
    second.feed(_window(200, 0))
    assert second.runs[200].db is None
    assert len(second.notes) == 1 and "prog[200]: phase database not used" in second.notes[0]
    assert f"in use by another phasescope run (pid {os.getpid()})" in second.notes[0]
    first.close(), second.close()
    assert [f for f in os.listdir(tmp_path) if f.endswith(".lock")] == []
    assert [f for f in os.listdir(tmp_path) if f.startswith("prog-") and f.endswith(".json")]


def _windows(pid: int, page: int, n: int = 3):
    for seq in range(n):
        yield Interval(thread=pid, seq=seq, instructions=None, keys=np.array([page << 12], dtype=np.uint64),
                       counts=np.array([100], dtype=np.uint64), mode="sampled", samples=100, period_ns=1_000_000,
                       pid=pid, comm="prog")


def test_two_processes_of_one_program_in_one_system_wide_run_both_keep_their_phases(tmp_path):
    """Each process of a program loaded the database at its start and saved at its end: the last
    to end saved over the first (its phases lost), and both had handed out the same new ID to
    different code (stop 47). Each now merges into what the ones before it saved."""
    config = EngineConfig(tracker=TrackerConfig(**PRESETS["sampled"]))
    engines = ProcessEngines(config, phase_db_dir=str(tmp_path))
    for pid, page in ((100, 7), (101, 9)):
        for iv in _windows(pid, page):
            engines.feed(iv)
    engines.end(100)
    engines.end(101)
    engines.close()
    [name] = [f for f in os.listdir(tmp_path) if f.startswith("prog-")]
    saved = json.loads((tmp_path / name).read_text())
    phases = [r["phase"] for r in saved["representatives"]]
    assert saved["runs"] == 1 and len(phases) == 2 and len(set(phases)) == 2, saved
    assert saved["next_id"] == max(phases) + 1
    assert sorted(r["intervals"] for r in saved["representatives"]) == [3, 3]
    # the next run's processes know both programs' code: each gets its saved ID, known
    again = ProcessEngines(config, phase_db_dir=str(tmp_path))
    for pid, page in ((200, 9), (201, 7)):
        for iv in _windows(pid, page, 1):
            again.feed(iv)
    ids = {pid: again.runs[pid].engine.summary()["phases"][0] for pid in (200, 201)}
    assert all(p["known"] for p in ids.values()) and {p["phase"] for p in ids.values()} == set(phases)
    again.close()
