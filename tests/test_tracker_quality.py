"""Tracker options of issue 10 on footprint streams known by construction: K stable phases with
noise, plus one-off transition intervals."""

import numpy as np
import pytest

from phasescope.errors import InputError
from phasescope.commands.options import add_engine_options, engine_config_from_args
from phasescope.engine.phase_table import settled
from phasescope.engine.tracker import PRESETS, TRANSITION, Tracker, TrackerConfig

K = 4


def synthetic(seed=0, periods=12, noise=0.02, transitions=True):
    """Footprints (full precision, 32 buckets summing to 32) of K phases visited in turn, each run
    5 intervals with per-bucket noise, and between runs (if ``transitions``) one interval that
    mixes two phases half and half plus a random part: a one-off that matches nothing."""
    rng = np.random.default_rng(seed)
    bases = []
    for p in range(K):
        v = np.zeros(32)
        v[p * 8:(p + 1) * 8] = rng.uniform(1, 3, 8)
        bases.append(v / v.sum() * 32)
    fps, truth = [], []
    for _ in range(periods):
        for p in range(K):
            for _ in range(5):
                f = np.clip(bases[p] + rng.normal(0, noise, 32), 0, None)
                fps.append(f / f.sum() * 32)
                truth.append(p)
            if transitions:
                r = rng.uniform(0, 1, 32)
                f = 0.35 * bases[p] + 0.35 * bases[(p + 1) % K] + 0.3 * r / r.sum() * 32
                fps.append(f)
                truth.append(-1)
    return np.array(fps), np.array(truth)


def classify(config, fps):
    t = Tracker(config)
    return t, t.classify_many(fps)


def cfg(preset, **over):
    d = dict(PRESETS[preset], bits=None)
    d.update(over)
    return TrackerConfig(**d)


def test_improved_tracker_gives_k_ids_plus_one_transition_id():
    fps, truth = synthetic()
    t, ms = classify(cfg("paper", threshold=0.1, transition=True), fps)
    ids = np.array([m.phase for m in ms])
    assert len(set(ids.tolist())) == K + 1
    assert set(ids[truth == -1].tolist()) == {TRANSITION}  # every one-off is the transition phase
    # Each stable phase's first interval is a transition (not yet confirmed), the rest one ID each;
    # the run's first interval starts its phase at once (an empty table: nothing to wait for).
    settled_ids = np.array(settled(ms))
    for p in range(K):
        got = ids[truth == p]
        assert (got[0] == TRANSITION) == (p != 0) and len(set(got[1:].tolist())) == 1 and got[1] != TRANSITION
        assert len(set(settled_ids[truth == p].tolist())) == 1  # the confirming interval relabels the first
    assert all(m.transition == (m.phase == TRANSITION) for m in ms)
    assert t.evictions == 0


def test_paper_tracker_gives_an_id_to_every_one_off():
    fps, truth = synthetic()
    _, ms = classify(cfg("paper"), fps)  # (full precision here; 6 bits would add noise)
    ids = {m.phase for m in ms}
    assert len(ids) == K + (truth == -1).sum()  # 4 phases + 48 one-off IDs
    assert len(ids) > 2 * (K + 1)


def test_lru_shreds_ids_in_a_small_table_and_lfu_does_not():
    fps, truth = synthetic()
    _, lru = classify(cfg("paper", table_size=K + 1), fps)
    _, lfu = classify(cfg("paper", table_size=K + 1, evict_policy="lfu"), fps)
    stable = truth >= 0
    ids_lru = {m.phase for m, s in zip(lru, stable) if s}
    ids_lfu = {m.phase for m, s in zip(lfu, stable) if s}
    assert len(ids_lfu) == K  # the four big phases keep their IDs
    assert len(ids_lru) > 3 * K  # one-offs push the big phases out, which come back with new IDs


def test_candidates_do_not_evict_stable_phases():
    fps, truth = synthetic()
    t, ms = classify(cfg("paper", threshold=0.1, transition=True, table_size=K), fps)
    assert t.evictions == 0 and len({m.phase for m in ms}) == K + 1


def test_confirm_three_needs_three_matching_intervals():
    fps, truth = synthetic(transitions=False)
    _, ms = classify(cfg("paper", threshold=0.1, transition=True, confirm=3), fps[4:10])  # A, then 5 B
    assert [m.phase for m in ms] == [1, TRANSITION, TRANSITION, 2, 2, 2]
    assert [m.new_phase for m in ms] == [True, False, False, True, False, False]
    assert ms[3].relabel == 2 and ms[3].relabel_seqs == (1, 2) and settled(ms) == [1, 2, 2, 2, 2, 2]


def test_adaptive_threshold_absorbs_a_noisy_phase():
    rng = np.random.default_rng(5)
    base = np.full(32, 1.0)
    # Spread of the phase's own intervals: distances around 0.1 x 32 units = the base threshold.
    fps = []
    for _ in range(300):
        f = np.clip(base + rng.normal(0, 0.13, 32), 0, None)
        fps.append(f / f.sum() * 32)
    fps = np.array(fps)
    _, fixed = classify(cfg("paper", threshold=0.1, transition=True), fps)
    _, adaptive = classify(cfg("paper", threshold=0.1, transition=True, adaptive=True), fps)
    n_fixed, n_adaptive = len({m.phase for m in fixed}), len({m.phase for m in adaptive})
    assert n_adaptive < n_fixed
    assert n_adaptive <= 4  # 13 without: the first interval's noisy footprint founds the phase at once


def test_tracker_preset_and_overrides_from_the_command_line():
    import argparse
    p = argparse.ArgumentParser()
    add_engine_options(p)
    c = engine_config_from_args(p.parse_args([])).tracker
    assert (c.transition, c.table_size, c.evict_policy) == (PRESETS["default"]["transition"],
                                                             PRESETS["default"]["table_size"],
                                                             PRESETS["default"]["evict_policy"])
    c = engine_config_from_args(p.parse_args(["--tracker", "paper"])).tracker
    assert (c.transition, c.table_size, c.evict_policy, c.threshold, c.bits, c.update_policy) == \
        (False, 64, "lru", 0.10, 6, "none")
    c = engine_config_from_args(p.parse_args(["--tracker", "paper", "--transition", "--full-precision"])).tracker
    assert c.transition and c.bits is None and c.table_size == 64
    with pytest.raises(InputError, match="confirm must be at least 1"):
        engine_config_from_args(p.parse_args(["--confirm", "0"]))


def split_profile(shift):
    """Footprint (32 buckets summing to 32) of a profile on buckets 0-7 with 2 x ``shift`` units
    moved between buckets 0 and 1: profiles at +2 and -2 are 8 units (0.25 of the interval) apart."""
    v = np.zeros(32)
    v[:8] = 4.0
    v[0] += shift
    v[1] -= shift
    return v


def disjoint_profile(first):
    v = np.zeros(32)
    v[first:first + 8] = 4.0
    return v


def test_merge_policy_folds_the_two_closest_phases_to_make_room():
    # A phase whose intervals alternate between two profiles 0.25 apart: at threshold 0.2 it
    # starts as two IDs. With a 3-entry table, C needs room: the closest pair (the two halves of
    # A) is folded into the older ID, and A's intervals carry that one ID from then on.
    a1, a2, b, c = split_profile(2), split_profile(-2), disjoint_profile(8), disjoint_profile(16)
    stream = np.array([a1, a2, a1, a2, b, b, a1, a2, c, c, a1, a2, b, c])
    t, ms = classify(cfg("paper", threshold=0.2, table_size=3, full_policy="merge"), stream)
    assert [m.phase for m in ms] == [0, 1, 0, 1, 2, 2, 0, 1, 3, 3, 0, 0, 2, 3]
    assert t.merges == 1 and t.evictions == 0
    assert t.representative(0).tolist() == split_profile(0).tolist()  # the hit-weighted mean of the halves
    assert t.representative(1) is None
    # Least-used eviction in the same table keeps A split and shreds B and C instead.
    _, lfu = classify(cfg("paper", threshold=0.2, table_size=3, full_policy="evict"), stream)
    assert len({m.phase for m in lfu}) > 4


def test_merge_policy_joins_the_nearest_phase_when_the_interval_is_nearer_than_any_pair():
    a, b, c = disjoint_profile(0), disjoint_profile(8), disjoint_profile(16)
    near_a = split_profile(3)  # 12 units from A, over the 0.2 threshold, under the 64 between phases
    t, ms = classify(cfg("paper", threshold=0.2, table_size=3, full_policy="merge"), np.array([a, b, c, near_a]))
    assert [m.phase for m in ms] == [0, 1, 2, 0] and not ms[3].new_phase and t.merges == 0


def test_stay_keeps_a_thread_in_its_phase_between_two_neighbours():
    # P and Q are 8 units apart (0.25, over the 0.2 threshold). Then intervals alternate between
    # one a little nearer P and one a little nearer Q, each within 0.2 of both.
    p, q = split_profile(2), split_profile(-2)
    x1, x2 = split_profile(0.5), split_profile(-0.5)
    stream = np.array([p, p, q, q] + [x1, x2] * 4)
    flat = dict(threshold=0.2, update_policy="none")
    _, nearest = classify(cfg("paper", **flat), stream)
    _, stay = classify(cfg("paper", stay=1.0, **flat), stream)
    assert [m.phase for m in nearest] == [0, 0, 1, 1] + [0, 1] * 4  # flips every interval
    assert [m.phase for m in stay] == [0, 0, 1, 1] + [1] * 8  # stays in Q, where the thread was


def test_stay_is_per_thread():
    p, q = split_profile(2), split_profile(-2)
    x1, x2 = split_profile(0.5), split_profile(-0.5)
    fps = np.array([p, q] + [x1, x2, x2, x1] * 3)
    threads = np.array([1, 2] + [1, 2] * 6)
    t = Tracker(cfg("paper", threshold=0.2, update_policy="none", stay=1.0))
    ms = t.classify_many(fps, threads=threads)
    assert [m.phase for m, th in zip(ms, threads) if th == 1] == [0] * 7
    assert [m.phase for m, th in zip(ms, threads) if th == 2] == [1] * 7


def test_stay_out_of_range_is_refused():
    with pytest.raises(InputError, match="stay"):
        TrackerConfig(stay=0.5)
