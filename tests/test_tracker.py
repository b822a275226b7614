"""Tracker: hashing, footprint arithmetic, classification, table policies, live == batch."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from phasescope.engine.phase_engine import EngineConfig, PhaseEngine
from phasescope.errors import InputError
from phasescope.engine.interval import Interval
from phasescope.sources.modules import Module, ModuleMap
from phasescope.engine.footprint import bucket_index, projection_rows
from phasescope.engine.hashing import mix64
from phasescope.engine.tracker import Tracker, TrackerConfig


def keys_in_buckets(buckets, wanted):
    """One key per wanted bucket, found with the tracker's own hash."""
    cand = np.arange(1, 10_000, dtype=np.uint64)
    b = bucket_index(cand, buckets)
    return np.array([cand[b == w][0] for w in wanted], dtype=np.uint64)


def fp(tracker, keys, counts):
    f, total = tracker.footprints([np.asarray(keys, np.uint64)], [np.asarray(counts, np.uint64)])
    return f[0], total[0]


def test_mix64_is_splitmix64():
    # First output of the reference SplitMix64 generator seeded with 0.
    assert int(mix64(np.zeros(1, np.uint64))[0]) == 0xE220A8397B1DCDAF


def test_bucket_index_spreads_keys_over_every_bucket():
    b = bucket_index(np.arange(32_000, dtype=np.uint64), 32)
    counts = np.bincount(b, minlength=32)
    assert b.min() == 0 and b.max() == 31
    assert counts.min() > 800 and counts.max() < 1200


def test_scale_follows_the_paper():
    assert TrackerConfig().scale == 32  # 32 buckets, 6 bits: bucket x 32 / interval
    assert TrackerConfig(buckets=64, bits=6).scale == 32
    assert TrackerConfig(buckets=32, bits=8).scale == 128
    assert TrackerConfig(buckets=4, bits=6).scale == 32
    assert TrackerConfig(buckets=32, bits=None).scale == 32


def test_footprint_matches_hand_computed_values():
    k = keys_in_buckets(32, [3, 17])
    t = Tracker(TrackerConfig())
    f, total = fp(t, k, [7, 3])
    assert total == 10
    expected = np.zeros(32)
    expected[3], expected[17] = 22, 9  # floor(7*32/10)=22, floor(3*32/10)=9
    assert np.array_equal(f, expected)

    full = Tracker(TrackerConfig(bits=None))
    f, _ = fp(full, k, [7, 3])
    expected[3], expected[17] = 22.4, 9.6
    assert np.allclose(f, expected)

    k4 = keys_in_buckets(4, [0, 1, 2])
    f, _ = fp(Tracker(TrackerConfig(buckets=4)), k4, [50, 25, 25])
    assert f.tolist() == [16, 8, 8, 0]  # scale 32 for 4 buckets at 6 bits
    f, _ = fp(Tracker(TrackerConfig(buckets=4, bits=None)), k4, [50, 25, 25])
    assert f.tolist() == [2, 1, 1, 0]


def test_projection_rows_are_splitmix64_outputs_seeded_by_the_key():
    # SplitMix64 seeded with 0: outputs 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4; top 53 bits as [-1, 1)
    first = [(0xE220A8397B1DCDAF >> 11) * 2.0**-52 - 1, (0x6E789E6AA1B965F4 >> 11) * 2.0**-52 - 1]
    assert projection_rows(np.zeros(1, np.uint64), 2)[0].tolist() == first
    r = projection_rows(np.arange(50_000, dtype=np.uint64), 3)
    assert r.min() >= -1 and r.max() < 1 and abs(r.mean()) < 0.01 and abs(np.corrcoef(r.T)[0, 1]) < 0.02
    assert np.array_equal(projection_rows(np.array([7, 9], np.uint64), 3), r[[7, 9]])  # a key's row is its own


def test_projected_footprint_is_three_times_the_weighted_mean_of_the_block_vectors():
    t = Tracker(TrackerConfig(buckets=15, bits=None, projection=True))
    keys = np.array([5, 1 << 40, 5], np.uint64)  # a key given twice counts twice
    f, total = fp(t, keys, [300, 200, 100])
    rows = projection_rows(np.array([5, 1 << 40], np.uint64), 15)
    assert total == 600 and np.allclose(f, 3 * (400 * rows[0] + 200 * rows[1]) / 600)
    assert np.allclose(fp(t, keys, [30, 20, 10])[0], f)  # normalised by the interval's instructions


def test_projected_footprints_of_disjoint_code_are_two_intervals_apart_on_average():
    c = TrackerConfig(buckets=15, bits=None, projection=True)
    t = Tracker(c)
    a, _ = t.footprints([np.array([k], np.uint64) for k in range(0, 4000, 2)], [np.ones(1)] * 2000)
    b, _ = t.footprints([np.array([k], np.uint64) for k in range(1, 4000, 2)], [np.ones(1)] * 2000)
    d = np.abs(a - b).sum(axis=1) / c.scale
    assert d.mean() == pytest.approx(2.0, abs=0.05)
    same, _ = t.footprints([np.array([1, 2], np.uint64)] * 2, [np.array([5, 5]), np.array([1, 1])])
    assert np.allclose(same[0], same[1])


def test_projection_needs_full_precision():
    with pytest.raises(InputError, match="projected"):
        TrackerConfig(buckets=15, bits=6, projection=True)


def test_footprint_sums_duplicate_keys_and_normalises_partial_intervals():
    k = keys_in_buckets(32, [1, 2])
    t = Tracker(TrackerConfig())
    full, _ = fp(t, [k[0], k[1], k[0]], [300, 400, 300])
    half, total = fp(t, k, [300, 200])  # same proportions, half the instructions
    assert total == 500
    assert np.array_equal(full, half)
    assert full[1] == 19 and full[2] == 12  # floor(600*32/1000), floor(400*32/1000)


def test_keys_are_stable_across_aslr():
    offsets = np.array([0x1000, 0x1F40, 0x2A00], dtype=np.uint64)
    counts = np.array([5, 3, 2], dtype=np.uint64)
    footprints = []
    for base in (0x7F0000000000, 0x5600AB000000):
        mm = ModuleMap([Module("/usr/lib/libfoo.so", base, 0x10000)])
        f, _ = fp(Tracker(), mm.keys(offsets + np.uint64(base)), counts)
        footprints.append(f)
    assert np.array_equal(*footprints)
    # Code outside every module (JIT) keeps its raw address.
    jit = np.array([0x10_0000_0000], dtype=np.uint64)
    assert mm.keys(jit).tolist() == jit.tolist()


def one_hot(buckets, *pairs):
    f = np.zeros(buckets)
    for i, v in pairs:
        f[i] = v
    return f


def test_repeating_pattern_gets_stable_ids():
    t = Tracker(TrackerConfig(bits=None))
    a, b, c = one_hot(32, (0, 32)), one_hot(32, (1, 32)), one_hot(32, (2, 16), (3, 16))
    phases = [m.phase for m in t.classify_many(np.array([a, a, b, c] * 5))]
    assert phases == [0, 0, 1, 2] * 5


def test_footprints_closer_than_the_threshold_stay_one_phase():
    # Moving 4% of the instructions between two buckets is a distance of 8% < 10%.
    base = one_hot(32, (0, 16), (1, 16))
    stream = [base + one_hot(32, (0, -d), (1, d)) for d in (0, 1.28, -1.28, 0.64, 1.28)]
    matches = Tracker(TrackerConfig(bits=None)).classify_many(np.array(stream))
    assert [m.phase for m in matches] == [0] * 5
    assert matches[1].distance == pytest.approx(0.08)
    # 6% moved is 12%: a new phase, whose distance shows how far it was.
    far = Tracker(TrackerConfig(bits=None)).classify_many(np.array([base, base + one_hot(32, (0, -1.92), (1, 1.92))]))
    assert [m.phase for m in far] == [0, 1] and far[1].new_phase
    assert far[1].distance == pytest.approx(0.12)


def test_threshold_is_strict_and_distance_is_a_fraction_of_the_interval():
    t = Tracker(TrackerConfig(threshold=0.125))
    a = one_hot(32, (0, 20), (1, 12))
    b = one_hot(32, (0, 18), (1, 14))  # 4 units = 0.125 of the interval: not under the threshold
    m = t.classify_many(np.array([a, b]))
    assert m[1].new_phase and m[1].distance == 0.125


def test_full_table_evicts_least_recently_matched():
    t = Tracker(TrackerConfig(table_size=2))
    a, b, c = one_hot(32, (0, 32)), one_hot(32, (1, 32)), one_hot(32, (2, 32))
    ms = t.classify_many(np.array([a, b, b, c, a]))
    assert [(m.phase, m.new_phase, m.evicted) for m in ms] == [
        (0, True, None), (1, True, None), (1, False, None), (2, True, 0), (3, True, 1)]
    assert sorted(e["phase"] for e in t.table()) == [2, 3]
    assert t.evictions == 2


def test_full_table_nearest_policy_joins_the_nearest_phase():
    t = Tracker(TrackerConfig(table_size=2, full_policy="nearest"))
    a, b = one_hot(32, (0, 32)), one_hot(32, (1, 32))
    c = one_hot(32, (0, 24), (2, 8))  # nearer to a (distance 16 units = 0.5)
    ms = t.classify_many(np.array([a, b, c]))
    assert (ms[2].phase, ms[2].new_phase, ms[2].distance) == (0, False, 0.5)
    assert t.representative(0).tolist() == a.tolist()


def test_update_policies():
    a = one_hot(32, (0, 16), (1, 16))
    a2 = one_hot(32, (0, 17), (1, 15))
    paper = Tracker(TrackerConfig())
    paper.classify_many(np.array([a, a2]))
    assert paper.representative(0).tolist() == a.tolist()  # never updated on a match
    mean = Tracker(TrackerConfig(update_policy="mean"))
    mean.classify_many(np.array([a, a2, a2]))
    assert mean.representative(0)[:2].tolist() == pytest.approx([16 + 2 / 3, 16 - 2 / 3])


def synthetic_stream(seed=7, n=600, threads=(11, 12, 13)):
    """Noisy intervals from five code profiles, three threads interleaved."""
    rng = np.random.default_rng(seed)
    profiles = [(rng.integers(0, 2**40, 50, dtype=np.uint64), rng.integers(1, 1000, 50)) for _ in range(5)]
    order = [0, 0, 1, 2, 0, 3, 3, 4, 1]
    seqs = {t: 0 for t in threads}
    out = []
    for i in range(n):
        th = threads[i % len(threads)]
        keys, base = profiles[order[(i // len(threads)) % len(order)]]
        counts = (base * rng.uniform(0.9, 1.1, len(base))).astype(np.uint64)
        out.append(Interval(th, seqs[th], int(counts.sum()), keys, counts,
                            start_ns=1000 * i, end_ns=1000 * i + 900 + i % 7, partial=i == n - 1))
        seqs[th] += 1
    return out


@pytest.mark.parametrize("tracker", [
    TrackerConfig(),
    TrackerConfig(bits=None, table_size=3, threshold=0.05),
    TrackerConfig(buckets=16, update_policy="mean", table_size=4),
    TrackerConfig(table_size=3, full_policy="nearest"),
    TrackerConfig(bits=None, table_size=3, threshold=0.05, update_policy="mean", full_policy="merge", stay=1.5),
    TrackerConfig(buckets=15, bits=None, projection=True, threshold=0.1, table_size=3),
])
def test_live_and_batch_paths_agree(tracker):
    stream = synthetic_stream()
    live, batch = PhaseEngine(EngineConfig(tracker)), PhaseEngine(EngineConfig(tracker))
    one = [live.feed(iv) for iv in stream]
    many = batch.feed_many(stream[:250]) + batch.feed_many(stream[250:])
    assert len({r.phase for r in one}) > 2
    for a, b in zip(one, many):
        assert (a.seq, a.thread, a.phase, a.distance, a.new_phase, a.evicted, a.predictions) == \
               (b.seq, b.thread, b.phase, b.distance, b.new_phase, b.evicted, b.predictions)
        assert np.array_equal(a.footprint, b.footprint)
    assert live.summary() == batch.summary()


def test_empty_intervals_are_skipped():
    e = PhaseEngine()
    assert e.feed(Interval(1, 0, 0, np.zeros(0, np.uint64), np.zeros(0, np.uint64))) is None
    assert e.skipped_empty == 1 and e.stats.intervals == 0


@pytest.mark.parametrize("kwargs, text", [
    ({"buckets": 0}, "buckets"), ({"threshold": -0.1}, "threshold"), ({"interval": 0}, "interval"),
    ({"bits": 0}, "bits"), ({"table_size": 0}, "table size"), ({"update_policy": "x"}, "update policy"),
    ({"threshold": float("nan")}, "threshold"),
])
def test_out_of_range_options_are_refused(kwargs, text):
    with pytest.raises(InputError, match=text):
        TrackerConfig(**kwargs)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(1, 10**9)), min_size=1, max_size=60),
       st.sampled_from([4, 7, 32, 100]), st.sampled_from([4, 6, 8]))
def test_footprint_invariants(blocks, buckets, bits):
    keys = np.array([k for k, _ in blocks], dtype=np.uint64)
    counts = np.array([c for _, c in blocks], dtype=np.uint64)
    exact, total = fp(Tracker(TrackerConfig(buckets=buckets, bits=None)), keys, counts)
    assert total == counts.sum()
    assert exact.sum() == pytest.approx(buckets)  # full precision: the footprint sums to N
    cfg = TrackerConfig(buckets=buckets, bits=bits)
    q, _ = fp(Tracker(cfg), keys, counts)
    scaled = exact * cfg.scale / buckets
    assert np.all(q == np.floor(q)) and q.max() <= 2**bits - 1
    assert np.all(q <= scaled + 1e-9) and np.all(q > scaled - 1 - 1e-9)  # floor of the scaled value
