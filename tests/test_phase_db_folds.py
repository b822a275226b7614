"""--phase-db with the default tracker's folds (``overlap``, stop 47), fed constructed footprints
(no process): a phase the database knows keeps its ID when it folds with a new one, and a phase
folded away is not saved to be preloaded again."""

import json

import numpy as np
import pytest

from phasescope.engine.config import EngineConfig
from phasescope.engine.interval import Interval
from phasescope.engine.phase_engine import PhaseEngine
from phasescope.errors import InputError
from phasescope.sinks.phase_db import PhaseDb
from test_tracker_confirm import noisy_behaviour, two_noisy_modes


def run(db_path, fps):
    """One run over ``fps`` (one thread) with the database at ``db_path``: its results."""
    config = EngineConfig()
    engine, db = PhaseEngine(config), PhaseDb(str(db_path), config, lock=False)
    engine.tracker.footprints = lambda keys, counts: (fps[[int(k[0]) for k in keys]], np.full(len(keys), 8000.0))
    db.prepare(engine)
    ivs = [Interval(1, i, 8000, np.array([i], np.uint64), np.array([8000], np.uint64), start_ns=10 * i,
                    end_ns=10 * i + 5) for i in range(len(fps))]
    results = engine.feed_many(ivs)
    db.on_end(engine.summary())
    db.close()
    return engine, results


def test_a_known_phase_keeps_its_id_and_a_folded_one_is_not_saved(tmp_path):
    # One noisy behaviour, three runs on one database. Run 2 (seed 3) folds the phase that run 1
    # saved with a phase it made, which matched more intervals in run 2: before r47a the new ID
    # kept the behaviour and the database held both (the known one as run 1 left it), so run 3
    # preloaded two phases for one behaviour and the code's ID was a matter of which matched first.
    db = tmp_path / "db.json"
    folds = 0
    for seed in (1, 3, 0):
        engine, results = run(db, noisy_behaviour(seed))
        known = engine.tracker.known
        for r in results:
            if r.merged is not None:
                folds += 1
                gone, kept = r.merged
                assert kept in known or gone not in known, f"seed {seed}: known {gone} folded into new {kept}"
        saved = {e["phase"] for e in json.loads(db.read_text())["representatives"]}
        gone = {r.merged[0] for r in results if r.merged is not None}
        assert not saved & gone, f"seed {seed}: {sorted(saved & gone)} folded away, yet saved"
    assert folds >= 3


def new_phases_in_run_2(tmp_path, seed, forget):
    """Run 1 (two noisy modes of one behaviour, which fold) then run 2 (the same behaviour, another
    seed) on one database; with ``forget``, the file loses what main's did not save (``folded_spread``)
    before run 2. The phases run 2 made, and the database run 1 left."""
    db = tmp_path / f"db-{seed}-{forget}.json"
    run(db, np.array(two_noisy_modes(seed)))
    saved = json.loads(db.read_text())
    if forget:
        for r in saved["representatives"]:
            r.pop("folded_spread", None)
        db.write_text(json.dumps(saved))
    engine, results = run(db, np.array(two_noisy_modes(seed + 10)))
    return {r.phase for r in results if r.phase not in engine.tracker.known}, saved


def test_the_database_remembers_a_phase_that_has_folded(tmp_path):
    # stop 47's review: the database forgot that a phase had folded another in (FOLDED_REACH), so each
    # run made phases beside it again (bzip2 replayed four times: 13, 17, 18, 18 phases saved; now
    # 13, 15, 15, 15). Saved with its spread, the next run makes fewer new phases (4 seeds).
    made, forgot = [], []
    for seed in range(4):
        new, saved = new_phases_in_run_2(tmp_path, seed, False)
        assert any("folded_spread" in r for r in saved["representatives"]), f"seed {seed}: nothing folded"
        made.append(len(new))
        forgot.append(len(new_phases_in_run_2(tmp_path, seed, True)[0]))
    assert all(m <= f for m, f in zip(made, forgot)) and sum(made) <= sum(forgot) // 3


@pytest.mark.parametrize("value", ['"x"', "-1", "true"])
def test_a_bad_folded_spread_is_refused(tmp_path, value):
    db = tmp_path / "db.json"
    run(db, np.array(two_noisy_modes(0)))
    text = db.read_text().replace('"folded_spread": ', f'"folded_spread": {value}, "was": ', 1)
    db.write_text(text)
    with pytest.raises(InputError, match="bad folded_spread"):
        PhaseDb(str(db), EngineConfig(), lock=False)
    assert db.read_text() == text


def test_a_retired_phase_s_code_takes_no_new_id_in_the_next_run(tmp_path):
    # A passage confirmed as a phase of its own (3 matches) that retires once idle; the same
    # stream three times on one database. Before r48d the database kept nothing of the retired
    # phase: each run made a new ID for the passage's code (1, 2, 3) and retired it again, the
    # database's next_id growing by one a run. Now it keeps the retired representative, and the
    # later runs label the passage with its nearest phase from the start, as run 1's log settled it.
    from phasescope.engine.phase_table import settled
    from test_tracker_retire import passage

    db = tmp_path / "db.json"
    fps = passage(0)
    for i in range(3):
        engine, results = run(db, fps)
        assert [r.new_phase for r in results].count(True) == (2 if i == 0 else 0), f"run {i + 1}"
        assert set(settled(results)) == {0}
        saved = json.loads(db.read_text())
        assert saved["next_id"] == 2 and [r["phase"] for r in saved["representatives"]] == [0]
    assert len(saved["retired"]) == 1


@pytest.mark.parametrize("value", ['"x"', "[[1, 2]]", "[null]"])
def test_a_bad_retired_list_is_refused(tmp_path, value):
    from test_tracker_retire import passage

    db = tmp_path / "db.json"
    run(db, passage(0))
    saved = json.loads(db.read_text())
    saved["retired"] = json.loads(value)
    db.write_text(text := json.dumps(saved))
    with pytest.raises(InputError, match="bad retired"):
        PhaseDb(str(db), EngineConfig(), lock=False)
    assert db.read_text() == text
