"""The table tracker's multinomial test (``--test multinomial``) on synthetic windows whose phases are known by
construction: multinomial draws of 100 samples from distributions that overlap (L1 distance 0.5
between phases)."""

import numpy as np
import pytest

from phasescope.engine.tracker import Tracker, preset
from phasescope.errors import InputError
from phasescope.quality.metrics import adjusted_rand_index

BUCKETS = 64
N = 100
#: the table tracker as sampled mode ran it before the page tracker (issue 9): threshold 0.2 grown
#: by 2 x the sampling noise; and the multinomial setting the sweep of docs/quality.md measured best
TABLE = dict(threshold=0.2, table_size=256, full_policy="evict", noise_z=2.0)
MULTINOMIAL = dict(TABLE, buckets=BUCKETS, test="multinomial", noise_z=12.0)


def phases(count=3, seed=0):
    """``count`` distributions over the buckets: a shared 75% body plus 25% on each phase's own 8
    buckets, so any two are 0.5 apart (Manhattan, as a fraction of the window)."""
    rng = np.random.default_rng(seed)
    body = rng.dirichlet(np.ones(BUCKETS - 8 * count)) * 0.75
    out = []
    for k in range(count):
        own = np.zeros(8 * count)
        own[8 * k:8 * k + 8] = rng.dirichlet(np.ones(8)) * 0.25
        out.append(np.concatenate([body, own]))
    return out


def windows(dists, order, seed=1, n=N):
    """Footprints and sample counts of windows drawn from ``dists[i]`` for each i in ``order``."""
    rng = np.random.default_rng(seed)
    counts = np.array([rng.multinomial(n, dists[i]) for i in order], dtype=np.float64)
    return counts * (BUCKETS / n), np.full(len(order), float(n))


def labels(config, fps, samples):
    return np.array([m.phase for m in Tracker(config).classify_many(fps, samples)])


def test_overlapping_phases_are_separated_and_repeats_recognised():
    dists = phases(3)
    assert all(abs(np.abs(a - b).sum() - 0.5) < 1e-9 for a in dists for b in dists if a is not b)
    truth = np.repeat(np.tile(np.arange(3), 3), 12)  # A x12, B x12, C x12, three times
    got = labels(preset("coarse", **MULTINOMIAL), *windows(dists, truth))
    assert len(set(got)) == 3
    assert adjusted_rand_index(got, truth) == 1.0


def test_repeated_draws_of_one_phase_stay_one_phase():
    got = labels(preset("coarse", **MULTINOMIAL), *windows(phases(1), np.zeros(300, int), seed=7))
    assert set(got) == {got[0]}


def test_the_manhattan_allowance_merges_what_the_multinomial_test_separates():
    truth = np.repeat(np.tile(np.arange(3), 3), 12)
    fps, samples = windows(phases(3), truth)
    merged = labels(preset("coarse", **TABLE, buckets=BUCKETS), fps, samples)
    assert len(set(merged)) < 3


def test_samples_in_buckets_the_representative_never_saw_are_a_new_phase():
    base = np.zeros(BUCKETS)
    base[:48] = np.random.default_rng(3).dirichlet(np.ones(48))
    fps, samples = windows([base], np.zeros(20, int), seed=4)
    odd = np.random.default_rng(5).multinomial(80, base).astype(np.float64)
    odd[60] += 20  # a fifth of the window where the phase never runs
    t = Tracker(preset("coarse", **MULTINOMIAL))
    first = t.classify_many(fps, samples)
    m = t.classify_many((odd * BUCKETS / N)[None, :], np.array([float(N)]))[0]
    assert {x.phase for x in first} == {0}
    assert m.new_phase


def test_fit_z_is_calibrated_on_the_representatives_own_windows():
    dist = phases(1, seed=9)[0]
    t = Tracker(preset("coarse", **MULTINOMIAL))
    t.classify_many(*windows([dist], np.zeros(50, int), seed=10))
    fps, _ = windows([dist], np.zeros(400, int), seed=11)
    z = np.array([t.fit_z(fp, N)[0] for fp in fps])
    assert abs(z.mean()) < 0.5 and 0.6 < z.std() < 1.5


def test_every_preset_keeps_the_manhattan_test_and_the_multinomial_needs_counts():
    assert preset("paper").test == preset("default").test == "manhattan"
    with pytest.raises(InputError):
        preset("coarse", bits=6, **MULTINOMIAL)
    with pytest.raises(InputError):
        preset("coarse", test="chi")
