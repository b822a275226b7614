"""Two runs with one --phase-db at once: both loaded the same phases, handed out the same new IDs
to different code, and the second save replaced the first's (its phases lost, ``runs`` counted
once). A run now holds the database from its load to its end; a second one is refused."""

from __future__ import annotations

import json
import os

import pytest

from phasescope.engine.config import EngineConfig
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


def test_a_read_only_database_and_the_per_process_ones_of_a_are_not_locked(tmp_path):
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
