"""Issue 28, continued: SimPoint's k-means and BIC run online (engine/kmeans.py), the threshold
calibrated on the program's own clusters (``calibrate_on="kmeans"``, the ``clustered`` preset) and
the online k-means tracker (``--tracker kmeans``), on streams whose phases are known by construction."""

import argparse

import numpy as np
import pytest

from phasescope.commands.options import add_engine_options, engine_config_from_args
from phasescope.engine import kmeans
from phasescope.engine.kmeans_tracker import KMeansTracker
from phasescope.engine.phase_engine import EngineConfig, PhaseEngine
from phasescope.engine.interval import Interval
from phasescope.engine.tracker import PRESETS, Tracker, TrackerConfig, preset
from phasescope.errors import InputError
from phasescope.quality.metrics import adjusted_rand_index


def blobs(k, n, spread, seed=0, buckets=32):
    """``n`` footprints (``buckets`` summing to ``buckets``) drawn from ``k`` phases in a random
    order: phase t has all its work in buckets 4t..4t+3, plus normal noise of sd ``spread`` units
    in every bucket (two intervals of one phase are then about 1.1 x ``spread`` of an interval apart)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n)
    out = []
    for t in truth:
        f = np.zeros(buckets)
        f[4 * t: 4 * t + 4] = buckets / 4
        f = np.clip(f + rng.normal(0, spread, buckets), 0, None)
        out.append(f / f.sum() * buckets)
    return np.array(out), truth


def test_choose_k_finds_separated_clusters():
    fps, truth = blobs(5, 300, 0.05)
    x = kmeans.project(fps, kmeans.projection_matrix(32))
    labels, centers = kmeans.choose_k(x, 30, np.random.default_rng(1))
    assert len(centers) == 5 and adjusted_rand_index(labels, truth) == pytest.approx(1.0)


def test_bic_prefers_the_true_k_to_one_cluster():
    x = kmeans.project(blobs(3, 200, 0.05)[0], kmeans.projection_matrix(32))
    rng = np.random.default_rng(2)
    assert kmeans.kmeans(x, 3, rng)[0] > kmeans.kmeans(x, 1, rng)[0]


def test_cluster_distances_are_to_the_cluster_mean():
    # Two far-apart clusters; each member is its cluster's center with 0.25 units moved from one
    # random bucket to another, in pairs (+e, -e) so that the mean is the center: every member is
    # 0.5 units (Manhattan) from its cluster's mean.
    rng = np.random.default_rng(0)
    fps = []
    for c in (0, 16):
        for _ in range(30):
            e = np.zeros(32)
            i, j = rng.choice(32, 2, replace=False)
            e[i], e[j] = 0.25, -0.25
            f = np.full(32, 0.5)
            f[c: c + 8] += 2.0
            fps += [f + e, f - e]
    d = kmeans.cluster_distances(np.array(fps), kmeans.projection_matrix(32), 30, np.random.default_rng(0))
    assert d == pytest.approx(np.full(120, 0.5))


def test_due_doubles_then_keeps_the_period():
    assert [n for n in range(1, 400) if kmeans.due(n, 128)] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 384]


def labels_of(config, fps):
    return np.array([m.phase for m in Tracker(config).classify_many(fps)])


def test_clustered_separates_tight_phases_that_the_paper_threshold_merges():
    # cc1's shape: phases 0.04-0.06 of an interval apart, each tight, visited in a random order.
    rng = np.random.default_rng(3)
    base = np.full(32, 1.0)
    centers = []
    for p in range(4):
        c = base.copy()
        c[p] += 0.6  # 0.6 of 32 units moved in and out: 2 x 1.2 = 2.4 units, 0.075 of an interval apart
        c[8 + p] -= 0.6
        centers.append(c)
    truth = rng.integers(0, 4, 600)
    fps = np.array([centers[t] + rng.normal(0, 0.002, 32) for t in truth])
    paper = labels_of(preset("paper", bits=None), fps)
    clustered = labels_of(preset("clustered"), fps)
    assert adjusted_rand_index(paper, truth) < 0.1  # 0.1 of an interval holds them all
    assert adjusted_rand_index(clustered[64:], truth[64:]) > 0.95 and len(set(clustered)) <= 8


def test_clustered_keeps_broad_phases_whole():
    # bzip2's shape: phases far apart, each broad (neighbours 0.1-0.2 of an interval apart).
    fps, truth = blobs(4, 600, 0.15, seed=4)
    clustered = labels_of(preset("clustered"), fps)
    fixed = labels_of(preset("clustered", calibrate=0.0), fps)  # the 0.02 floor alone
    assert adjusted_rand_index(fixed, truth) < 0.5  # too tight: no interval confirms another
    assert adjusted_rand_index(clustered, truth) > 0.95 and len(set(clustered)) <= 8


def test_kmeans_tracker_labels_recurring_phases_with_stable_ids():
    fps, truth = blobs(4, 700, 0.05, seed=5)
    config = preset("kmeans", buckets=32)
    got = np.array([m.phase for m in KMeansTracker(config).classify_many(fps)])
    again = np.array([m.phase for m in KMeansTracker(config).classify_many(fps)])
    assert np.array_equal(got, again)  # seeded: a stream always gives the same IDs
    assert adjusted_rand_index(got[16:], truth[16:]) == pytest.approx(1.0)
    assert len(set(got)) <= 8
    for p in range(4):  # each phase keeps one ID across the re-clusterings (at 128, 256, ... 640)
        assert len(set(got[64:][truth[64:] == p])) == 1


def test_kmeans_tracker_reloads_its_phases():
    fps, truth = blobs(3, 200, 0.05, seed=6)
    config = preset("kmeans", buckets=32)
    first = KMeansTracker(config)
    before = np.array([m.phase for m in first.classify_many(fps)])
    second = KMeansTracker(config)
    second.preload([(r["phase"], r["representative"]) for r in first.table()], first.next_id)
    after = [m for m in second.classify_many(fps[:5])]
    assert [m.phase for m in after] == [int(before[truth == t][-1]) for t in truth[:5]]
    assert not any(m.new_phase for m in after)


def test_engine_runs_the_kmeans_tracker():
    # Code A for 10 intervals, then code B, A, B: once the window has seen both, two IDs.
    rng = np.random.default_rng(7)
    engine = PhaseEngine(EngineConfig(preset("kmeans")))
    got = []
    for i in range(40):
        keys = np.arange(10, dtype=np.uint64) + np.uint64(1000 * (i // 10 % 2))
        counts = rng.integers(1000, 2000, 10).astype(np.uint64)
        got.append(engine.feed(Interval(thread=1, seq=i, instructions=int(counts.sum()), keys=keys, counts=counts)).phase)
    late = got[20:]
    assert late == [late[0]] * 10 + [late[10]] * 10 and late[0] != late[10]
    table = {r["phase"] for r in engine.summary()["phases"] if r["in_table"]}
    assert {late[0], late[10]} <= table


def test_kmeans_options_are_checked():
    with pytest.raises(InputError):
        TrackerConfig(**dict(PRESETS["kmeans"], bits=6))
    with pytest.raises(InputError):
        preset("kmeans", kmeans_every=0)
    p = argparse.ArgumentParser()
    add_engine_options(p)
    with pytest.raises(InputError, match="k-means tracker"):
        engine_config_from_args(p.parse_args(["--tracker", "kmeans", "--update-policy", "mean"]))
    assert engine_config_from_args(p.parse_args(["--tracker", "clustered"])).tracker.calibrate_on == "kmeans"


def drifts(n_phases=3, run=150, seed=8):
    """bc's shape: long phases far apart, each drifting slowly over 0.1 of an interval (3.2 units
    moved from one bucket to another over the run), with a little noise: k-means, whose BIC sees
    the drift, cuts each phase into pieces."""
    rng = np.random.default_rng(seed)
    fps, truth = [], []
    for p in range(n_phases):
        for i in range(run):
            f = np.full(32, 0.5)
            f[8 * p: 8 * p + 8] += 2.0
            f[8 * p] += 1.6 * i / run
            f[8 * p + 7] -= 1.6 * i / run
            fps.append(f + rng.normal(0, 0.002, 32))
            truth.append(p)
    return np.array(fps), np.array(truth)


def test_drift_test_keeps_a_drifting_phase_whole():
    fps, truth = drifts()
    clustered = labels_of(preset("clustered"), fps)
    drift = Tracker(preset("drift"))
    got = np.array([m.phase for m in drift.classify_many(fps)])
    assert adjusted_rand_index(clustered, truth) < 0.8  # k-means's pieces become phases
    assert drift.drifting and adjusted_rand_index(got, truth) > 0.95 and len(set(got)) <= 6


def test_drift_test_leaves_jumps_between_tight_phases_apart():
    # cc1's shape (as above): the program jumps between tight phases, so no drift is found.
    rng = np.random.default_rng(3)
    centers = []
    for p in range(4):
        c = np.full(32, 1.0)
        c[p] += 0.6
        c[8 + p] -= 0.6
        centers.append(c)
    truth = rng.integers(0, 4, 600)
    fps = np.array([centers[t] + rng.normal(0, 0.002, 32) for t in truth])
    drift = Tracker(preset("drift"))
    got = np.array([m.phase for m in drift.classify_many(fps)])
    assert not drift.drifting and adjusted_rand_index(got[64:], truth[64:]) > 0.95
