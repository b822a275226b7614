"""Predictors on phase streams whose right answer is known by construction."""

import pytest

from phasescope.errors import InputError
from phasescope.engine.markov import LastPhase, Markov, RleMarkov
from phasescope.engine.predict import PREDICTORS, PredictorConfig, Scoreboard, ThreadPredictors
from phasescope.engine.predictors import STREAM_PREDICTORS


def run(stream, thread=1, config=PredictorConfig()):
    """Feed a stream through all predictors and the scoreboard; returns the accuracies."""
    tp, sb = ThreadPredictors(config), Scoreboard()
    for phase in stream:
        sb.score(thread, phase)
        sb.expect(thread, phase, tp.observe(phase))
    return {n: {k: s.accuracy for k, s in kinds.items()} for n, kinds in sb.scores.items()}, sb


def test_rle_markov_learns_a_repeating_pattern_and_beats_last_phase():
    acc, _ = run([0, 0, 1, 2] * 50)
    assert acc["rle_markov"]["overall"] > 0.97  # perfect after one period
    assert acc["rle_markov"]["changes"] > 0.95
    assert acc["last_phase"]["overall"] == pytest.approx(50 / 199)  # only 0 -> 0 is right
    assert acc["last_phase"]["changes"] == 0.0


def test_rle_markov_predicts_the_end_of_long_runs_where_markov_cannot():
    stream = ([5] * 6 + [7] * 3 + [9]) * 30
    acc, _ = run(stream)
    assert acc["rle_markov"]["overall"] > 0.97
    # Markov-2 sees (5, 5) both inside the run and at its end: it cannot tell them apart.
    assert acc["markov2"]["overall"] < acc["rle_markov"]["overall"] - 0.1
    assert acc["markov1"]["changes"] < 0.5 and acc["rle_markov"]["changes"] > 0.95


def test_tag_miss_predicts_the_last_phase():
    p = RleMarkov()
    p.observe(42)
    assert p.predict() == 42


def test_rle_markov_inserts_on_change_and_updates_on_tag_hit():
    p = RleMarkov()
    for phase in [1, 1, 2]:  # inserts (1, run 2) -> 2
        p.observe(phase)
    for phase in [1, 1]:
        p.observe(phase)
    assert p.predict() == 2  # tag hit
    p.observe(1)  # the run went on: the tag hit updates (1, 2) -> 1
    for phase in [2, 1, 1]:
        p.observe(phase)
    assert p.predict() == 1


def test_rle_markov_does_not_insert_inside_a_run():
    p = RleMarkov(entries=4)
    for phase in [3] * 50:
        p.observe(phase)
    assert all(t == -1 for t in p.table._tags)


def test_markov_history_lengths():
    m1, m2 = Markov(1), Markov(2)
    for phase in [0, 1, 0, 2] * 3:
        m1.observe(phase)
        m2.observe(phase)
    # After ... 0 2 the history-2 predictor knows (0, 2) -> 0; history 1 knows 2 -> 0 too.
    assert m2.predict() == 0 and m1.predict() == 0
    m1.observe(0)
    m2.observe(0)
    assert m2.predict() == 1  # (2, 0) -> 1
    assert m1.predict() == 2  # 0 -> 2 was its latest update


def test_last_phase():
    p = LastPhase()
    p.observe(3)
    assert p.predict() == 3


def test_scoreboard_splits_changes_and_steady_state_per_thread():
    sb = Scoreboard(("x",))
    sb.score(1, 0)  # nothing pending yet: not scored
    sb.expect(1, 0, {"x": 0})
    sb.expect(2, 5, {"x": 6})
    sb.score(1, 0)  # steady, right
    sb.score(2, 6)  # change, right
    sb.expect(1, 0, {"x": 0})
    sb.score(1, 4)  # change, wrong
    d = sb.to_dict()["x"]
    assert d["overall"] == {"n": 3, "correct": 2, "accuracy": 2 / 3}
    assert d["changes"] == {"n": 2, "correct": 1, "accuracy": 0.5}
    assert d["steady"] == {"n": 1, "correct": 1, "accuracy": 1.0}


def test_small_tables_alias_but_keep_working():
    acc, _ = run([0, 0, 1, 2, 3, 3, 3, 4] * 20, config=PredictorConfig(rle_entries=1, markov_entries=1))
    assert set(acc) == set(PREDICTORS)
    assert acc["rle_markov"]["overall"] < run([0, 0, 1, 2, 3, 3, 3, 4] * 20)[0]["rle_markov"]["overall"]


def test_table_sizes_are_validated():
    with pytest.raises(InputError, match="rle entries"):
        PredictorConfig(rle_entries=0)
    with pytest.raises(InputError, match="gpht entries must be from 1 to 65536"):
        PredictorConfig(gpht_entries=1 << 31)


def test_every_predictor_named_is_run_once():
    # the names (engine/config.py, numpy-free) and the instances (predictors.STREAM_PREDICTORS) agree
    assert tuple(STREAM_PREDICTORS) + ("hybrid", "gated", "measured", "order_length", "cycle", "context") == PREDICTORS
    assert list(ThreadPredictors(PredictorConfig()).observe(3)) == list(PREDICTORS)
