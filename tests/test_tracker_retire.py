"""``retire`` (issue 28, stop 48), on streams known by construction: a phase confirmed by a few
intervals of a passage that never comes back folds, once idle, into its nearest phase, and the log
and the statistics settle its intervals there."""

from collections import Counter

import numpy as np
import pytest

from phasescope.engine.folds import RETIRE_IDLE
from phasescope.engine.phase_table import settled
from phasescope.engine.tracker import PRESETS, Tracker, TrackerConfig
from phasescope.errors import InputError
from test_stats_settled import final_counts, on_footprints
from test_tracker_confirm import confirmed, phase


def passage(n, at=50, length=3, tail=RETIRE_IDLE + 20):
    """``at`` intervals of phase 0, ``length`` of phase 5 (confirmed by its second: a phase of
    ``length`` matches), then ``tail`` intervals of phase 0 again."""
    return np.array([phase(0)] * at + [phase(5)] * length + [phase(0)] * tail)


def test_a_short_lived_phase_folds_into_its_nearest_once_idle():
    # The default tracker: the passage's phase (3 matches) has not been matched for RETIRE_IDLE
    # intervals; the next interval folds it into phase 0 and relabels its three intervals. Without
    # ``retire`` (main before stop 48) the log ends with two IDs.
    assert PRESETS["confirmed"]["retire"] == 10
    ms = confirmed().classify_many(passage(0))
    folds = [(i, m) for i, m in enumerate(ms) if m.merged is not None]
    assert len(folds) == 1
    at, m = folds[0]
    assert at == 52 + RETIRE_IDLE and m.merged == (1, 0) and m.relabel == 0 and m.relabel_seqs == (50, 51, 52)
    assert m.phase == 0 and not m.new_phase
    assert set(settled(ms)) == {0}
    assert set(settled(confirmed(retire=0).classify_many(passage(0)))) == {0, 1}


def test_a_phase_matched_often_enough_or_lately_keeps_its_id():
    # 10 matches (not fewer than ``retire``), or a run that ends before the phase has been idle
    # RETIRE_IDLE intervals: the ID stays.
    for stream in (passage(0, length=10), passage(0, tail=RETIRE_IDLE - 1)):
        ms = confirmed().classify_many(stream)
        assert not any(m.merged for m in ms) and set(settled(ms)) == {0, 1}


def test_a_phase_database_s_phase_never_retires():
    # A preloaded phase is matched once (its representative) and may be idle all run: it stays.
    t = confirmed()
    t.preload([(7, phase(9))], 8)
    t.classify_many(passage(0))
    assert 7 in {p["phase"] for p in t.table()}


def test_the_statistics_settle_a_retired_phase_s_intervals_where_the_log_does():
    # Through the engine: the passage's intervals, counted as the phase the retired one ended up in
    # (``merged_into``), are where the settled labels put them.
    engine, results = on_footprints(passage(0))
    assert sum(r.merged is not None for r in results) == 1
    assert final_counts(engine) == Counter(settled(results)) == Counter({0: len(results)})


def test_classifying_a_whole_stream_is_classifying_one_interval_at_a_time_with_retirements():
    # Retirements free a slot (the last one moves into it) in the middle of classify_many's
    # distance matrix: random streams of 8 behaviours with short far passages (4 seeds), in a roomy table
    # and in one of 6 slots (retirements and evictions interleave).
    retired = 0
    for seed in range(4):
        rng = np.random.default_rng(seed)
        kinds = [phase(int(k)) for k in rng.integers(0, 8, 40).repeat(rng.integers(20, 60, 40))]
        fps = np.array([phase(int(rng.integers(8, 32))) if rng.random() < 0.03 else f for f in kinds][:1000])
        for size in (64, 6):
            many = confirmed(table_size=size).classify_many(fps)
            t = confirmed(table_size=size)
            one = [t.classify_many(f[None, :])[0] for f in fps]
            assert many == one, f"seed {seed}, table {size}"
            retired += t.retired
    assert retired >= 4


@pytest.mark.parametrize("value", [-1, 1.5, "x"])
def test_a_bad_retire_is_one_clear_error(value):
    with pytest.raises(InputError, match="retire must be an integer"):
        TrackerConfig(retire=value)


def test_the_paper_preset_never_retires():
    assert PRESETS["paper"].get("retire", 0) == 0
    t = Tracker(TrackerConfig(**dict(PRESETS["paper"], bits=None)))
    assert not any(m.merged for m in t.classify_many(passage(0))) and t.retired == 0


def test_a_segment_counts_its_units_toward_retire():
    # --segment-mode variable: a phase confirmed by two intervals, then matched by one row of 12
    # recorded units (a long run the segmenter found alike), has 14 units of evidence, not 3
    # matches: it is not short-lived and keeps its ID (OVERLAP_LEAST counts units the same way).
    fps = passage(0)
    units = np.ones(len(fps), dtype=np.int64)
    units[52] = 12
    ms = confirmed().classify_many(fps, units=units)
    assert ms[51].new_phase and not any(m.merged for m in ms) and set(settled(ms)) == {0, 1}
    units[52] = 3
    assert set(settled(confirmed().classify_many(fps, units=units))) == {0}
