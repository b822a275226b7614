"""Per-phase and whole-run statistics on a hand-made stream."""

import math

import numpy as np
import pytest

from phasescope.engine.phase_engine import PhaseEngine
from phasescope.engine.interval import Interval
from phasescope.engine.stats import Running, Stats


def iv(thread, seq, instructions, wall, partial=False, os=None, keys=(1, 2, 3), pcs=None):
    counts = np.array([instructions - 2, 1, 1][: len(keys)], dtype=np.uint64)
    return Interval(thread, seq, instructions, np.array(keys, np.uint64), counts,
                    pcs=None if pcs is None else np.array(pcs, np.uint64),
                    start_ns=1_000 + 100 * seq, end_ns=1_000 + 100 * seq + wall, partial=partial, os=os)


def test_running_mean_and_cv():
    r = Running()
    for x in (2, 4, 4, 4, 5, 5, 7, 9):
        r.add(x)
    assert r.mean == 5 and r.cv == pytest.approx(2 / 5)
    assert Running().cv is None


def test_running_undone_to_zeros_alone_has_no_cv():
    # a relabel takes a phase's nonzero majflt values out and leaves its zeros: the mean is 0 and
    # the CV unknown, as if only the zeros had been added (the rounding made a CV of 3.6e8 of it)
    vals = [33, 35, 0, 0, 9, 29, 0, 14, 22, 0, 7, 0]
    r = Running()
    for x in vals:
        r.add(x)
    for x in vals:
        if x:
            r.remove(x)
    assert (r.n, r.mean, r.cv) == (5, 0.0, None)
    r.add(4)
    r.add(8)
    assert r.mean == pytest.approx(12 / 7) and r.cv == pytest.approx(math.sqrt(80 / 7 - (12 / 7) ** 2) / (12 / 7))
    for x in (4, 8, 0, 0, 0, 0, 0):
        r.remove(x)
    assert (r.n, r.mean, r.cv) == (0, 0.0, None)


def test_phase_statistics_by_hand():
    s = Stats()
    # thread 7: phases 0 0 1 0 0 0; walls 10 10 40 10 10 10 ns; 100 instructions each, phase 1 has 200.
    phases = [0, 0, 1, 0, 0, 0]
    for i, p in enumerate(phases):
        s.add(iv(7, i, 200 if p == 1 else 100, 40 if p == 1 else 10,
                 os={"cpu_ns": 8 if p == 0 else 30, "minflt": 0, "majflt": 0, "nvcsw": 1, "nivcsw": 0}), p, i)
    d = s.to_dict()
    p0, p1 = d["phases"]
    assert (p0["phase"], p0["intervals"], p0["instructions"], p0["runs"]) == (0, 5, 500, 2)
    assert p0["share"] == pytest.approx(500 / 700) and p1["share"] == pytest.approx(200 / 700)
    assert p0["run_length"] == {"mean": 2.5, "max": 3}
    assert p0["transitions"] == [{"phase": 1, "count": 1}]
    assert p1["transitions"] == [{"phase": 0, "count": 1}]
    assert p0["first_seen"] == {"seq": 0, "ns": 1_000} and p0["last_seen"] == {"seq": 5, "ns": 1_510}
    assert p0["metrics"]["wall_ns"] == {"n": 5, "mean": 10, "cv": 0.0}
    assert p0["metrics"]["ns_per_instruction"]["mean"] == pytest.approx(0.1)
    assert p0["metrics"]["cpu_ns"]["mean"] == 8
    w = d["whole"]
    assert (w["intervals"], w["instructions"], w["phases"], w["runs"], w["phase_changes"]) == (6, 700, 2, 3, 2)
    assert w["change_rate"] == pytest.approx(2 / 5)
    walls = [10, 10, 40, 10, 10, 10]
    mean = sum(walls) / 6
    assert w["metrics"]["wall_ns"]["mean"] == pytest.approx(mean)
    assert w["metrics"]["wall_ns"]["cv"] == pytest.approx(math.sqrt(sum((x - mean) ** 2 for x in walls) / 6) / mean)
    # Figure 7: each phase is homogeneous (CV 0) while the whole run is not.
    assert w["homogeneity"]["wall_ns"]["phase_cv"] == 0.0 and w["homogeneity"]["wall_ns"]["whole_cv"] > 0.5
    assert d["threads"]["7"]["phase"] == 0 and d["threads"]["7"]["run_length"] == 3


def test_threads_have_their_own_runs_and_current_phase():
    s = Stats()
    for seq, (thread, phase) in enumerate([(1, 0), (2, 1), (1, 0), (2, 0), (1, 1)]):
        s.add(iv(thread, seq, 100, 10), phase, seq)
    assert s.threads[1].phase == 1 and s.threads[2].phase == 0
    assert s.phases[0].runs == 2 and s.phases[0].max_run == 2
    assert s.phases[0].transitions == {1: 1} and s.phases[1].transitions == {0: 1}


def test_partial_intervals_count_but_do_not_skew_per_interval_metrics():
    s = Stats()
    s.add(iv(1, 0, 100, 10), 0, 0)
    s.add(iv(1, 1, 30, 3, partial=True), 0, 1)
    p = s.phases[0]
    assert p.intervals == 2 and p.weight == 130
    assert p.metrics.values["wall_ns"].n == 1


def test_top_code_ranks_blocks_by_instructions():
    s = Stats()
    for i in range(40):
        s.add(iv(1, i, 1000, 10, keys=(0xAA, 0xBB, 0xCC), pcs=(0x1AA, 0x1BB, 0x1CC)), 0, i)
    top = s.phases[0].top_code()
    assert top[0]["key"] == 0xAA and top[0]["pc"] == 0x1AA
    assert top[0]["share"] == pytest.approx(998 / 1000)


def test_engine_summary_is_json_and_shares_sum_to_one():
    import json
    rng = np.random.default_rng(3)
    base = np.arange(1, 11) * 100.0
    e = PhaseEngine()
    for i in range(30):
        keys = np.arange(10, dtype=np.uint64) + np.uint64(100 * (i % 3))
        counts = (base * rng.uniform(0.97, 1.03, 10)).astype(np.uint64)
        e.feed(Interval(1, i, int(counts.sum()), keys, counts))
    s = json.loads(json.dumps(e.summary()))
    assert s["whole"]["phases"] == 3 and all(p["in_table"] for p in s["phases"])
    assert sum(p["share"] for p in s["phases"]) == pytest.approx(1.0)
    assert sum(p["instructions"] for p in s["phases"]) == s["whole"]["instructions"]


def test_final_ids_follow_folds_to_their_end():
    from phasescope.engine.stats import final_ids
    assert final_ids({3: 5, 5: 7, 2: 7, 9: 1}) == {3: 7, 5: 7, 2: 7, 9: 1}
    assert final_ids({}) == {}


def test_a_locality_window_that_began_before_a_phase_change_is_left_out():
    """A window that spans a change measures two phases: it is counted as straddled, not added."""
    s = Stats()
    window = np.arange(0, 64 * 100, 64, dtype=np.uint64)  # 100 distinct blocks, no reuse
    phases = [0, 0, 0, 1, 1, 1]
    reach = {3: 1, 4: 1, 5: 2}  # seq 3: began in seq 2 (phase 0); 4: began in 3; 5: began in 3
    for i, p in enumerate(phases):
        x = iv(7, i, 100, 10)
        if i in reach:
            x.locality, x.locality_reach = window, reach[i]
        s.add(x, p, i)
    assert s.locality_straddled == 1
    assert s.locality_of(1)["windows"] == 2 and s.locality_of(0)["windows"] == 0
    assert s.to_dict()["whole"]["locality_straddled"] == 1
