"""Reuse distances, per-phase histograms and sampled LRU miss-rate curves (phasescope.engine.locality)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phasescope.engine.locality import (
    CACHE_BYTES,
    COLD,
    HIST_BINS,
    PhaseLocality,
    exact_miss_rates,
    log2_histogram,
    reuse_distances,
    smaller_before_permutation,
    window_estimates,
)

KIB, MIB = 1 << 10, 1 << 20


def brute_distances(blocks):
    """O(n^2): distinct blocks strictly between each access and the previous use of its block."""
    blocks = list(blocks)
    out = []
    for i, b in enumerate(blocks):
        for j in range(i - 1, -1, -1):
            if blocks[j] == b:
                out.append(len(set(blocks[j + 1:i])))
                break
        else:
            out.append(COLD)
    return np.array(out, np.int64)


def fenwick_distances(blocks):
    """Bennett-Kruskal: a Fenwick tree marks each block's last access time; O(n log n) pure Python."""
    n = len(blocks)
    tree = [0] * (n + 1)

    def add(i, delta):
        i += 1
        while i <= n:
            tree[i] += delta
            i += i & -i

    def prefix(i):  # marks at times < i
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    last, out = {}, []
    for t, b in enumerate(blocks.tolist()):
        p = last.get(b)
        if p is None:
            out.append(COLD)
        else:
            out.append(prefix(t) - prefix(p + 1))
            add(p, -1)
        add(t, 1)
        last[b] = t
    return np.array(out, np.int64)


def lru_misses(trace, capacity):
    """Exact fully associative LRU simulation: per-access miss flags."""
    cache, out = OrderedDict(), []
    for b in trace:
        if b in cache:
            cache.move_to_end(b)
            out.append(False)
        else:
            out.append(True)
            cache[b] = None
            if len(cache) > capacity:
                cache.popitem(last=False)
    return np.array(out, bool)


# ---------------------------------------------------------------- reuse distances


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=120))
def test_reuse_distances_match_brute_force_small_alphabet(trace):
    blocks = np.array(trace, np.uint64)
    assert reuse_distances(blocks).tolist() == brute_distances(trace).tolist()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=60).flatmap(
    lambda pool: st.lists(st.sampled_from(pool), max_size=200) if pool else st.just([])))
def test_reuse_distances_match_brute_force_any_block_numbers(trace):
    blocks = np.array(trace, np.uint64)
    assert reuse_distances(blocks).tolist() == brute_distances(trace).tolist()


def brute_smaller_before(r):
    return np.tril(r[None, :] < r[:, None], -1).sum(1)


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 150).flatmap(lambda m: st.permutations(range(m))), st.integers(2, 8))
def test_smaller_before_permutation_matches_brute_force(perm, chunk_bits):
    # Any permutation of 0..m-1, sliced small or not: slices of 4 values up to one slice for all (256).
    r = np.array(perm, np.int64)
    assert np.array_equal(smaller_before_permutation(r, chunk_bits), brute_smaller_before(r))


@pytest.mark.parametrize("m", [2047, 2048, 2049, 3000])
def test_smaller_before_permutation_many_slices(m):
    r = np.random.default_rng(m).permutation(m)
    assert np.array_equal(smaller_before_permutation(r, 4), brute_smaller_before(r))


@pytest.mark.parametrize("n,alphabet", [(0, 1), (1, 1), (2, 1), (700, 1), (700, 2), (900, 30),
                                        (1000, 400), (800, 10**6)])
def test_reuse_distances_random_traces_brute_force(n, alphabet):
    rng = np.random.default_rng(n * 7 + alphabet)
    blocks = rng.integers(0, alphabet, n).astype(np.uint64)
    assert np.array_equal(reuse_distances(blocks), brute_distances(blocks.tolist()))


@pytest.mark.parametrize("n,alphabet", [(20_000, 50), (30_000, 5_000), (20_000, 10**9)])
def test_reuse_distances_long_traces_match_fenwick(n, alphabet):
    rng = np.random.default_rng(alphabet)
    # Skewed reuse: a mix of hot and cold blocks gives distances across many log2 bins.
    blocks = (rng.zipf(1.3, n) % alphabet).astype(np.uint64)
    assert np.array_equal(reuse_distances(blocks), fenwick_distances(blocks))


def test_reuse_distances_known_sequence():
    # a b a a c b: a reused over {b} (1), a immediately (0), b over {a, c} (2).
    assert reuse_distances(np.array([1, 2, 1, 1, 3, 2])).tolist() == [-1, -1, 1, 0, -1, 2]


def test_log2_histogram_bin_edges():
    d = np.array([COLD, COLD, 0, 1, 2, 3, 4, 7, 8, 1023, 1024, 2**31 - 1, 2**31])
    hist, cold = log2_histogram(d)
    assert cold == 2 and len(hist) == HIST_BINS
    expected = np.zeros(HIST_BINS, np.int64)
    for b, k in {0: 1, 1: 1, 2: 2, 3: 2, 4: 1, 10: 1, 11: 1, 31: 1, 32: 1}.items():
        expected[b] = k
    assert hist.tolist() == expected.tolist()


# ---------------------------------------------------------------- the window correction


@settings(max_examples=120, deadline=None)
@given(st.lists(st.integers(0, 15), max_size=80), st.lists(st.integers(0, 15), min_size=1, max_size=80),
       st.integers(1, 20))
def test_warm_window_outcomes_are_exact_whatever_came_before(prefix, window, capacity):
    """The soundness of the correction: after the window's C-th distinct block, the window alone
    gives the exact LRU outcome of every access; before it, in-window reuses hit; and when the
    window never touches C distinct blocks only its first uses can miss."""
    d = reuse_distances(np.array(window, np.uint64))
    est, unc = window_estimates(d, [capacity])
    misses = lru_misses(prefix + window, capacity)[len(prefix):]
    first = np.flatnonzero(d == COLD)
    if capacity < len(first):
        tail = first[capacity - 1] + 1
        assert est[0] == pytest.approx(misses[tail:].mean())
        assert unc[0] == 0
    else:
        assert not misses[d != COLD].any()
        assert misses.sum() <= len(first)
        assert est[0] == pytest.approx(len(first) / len(window)) and unc[0] == est[0]


def cyclic(working_blocks, length, rng=None, base=1 << 30):
    """A cycle over `working_blocks` blocks (a random permutation if rng), `length` accesses."""
    order = np.arange(working_blocks, dtype=np.uint64)
    if rng is not None:
        rng.shuffle(order)
    return np.resize(order + np.uint64(base), length)


def windows_of(trace, size, every):
    return [trace[s:s + size] for s in range(0, len(trace) - size + 1, every)]


def test_cyclic_32k_working_set_hits_a_256k_cache():
    trace = cyclic(32 * KIB // 64, 8 * 65536, np.random.default_rng(1))
    loc = PhaseLocality()
    for w in windows_of(trace, 65536, 2 * 65536):
        loc.add_blocks("small", w)
    curve = dict(loc.to_dict("small")["miss_rate_curve"])
    assert curve[256 * KIB] <= 0.10
    assert curve[256 * KIB] == pytest.approx(512 / 65536)  # only the window's first uses, as misses
    assert curve[16 * KIB] == 1.0  # LRU on a cycle larger than the cache misses every time
    exact = exact_miss_rates(reuse_distances(trace), [256 * KIB // 64, 16 * KIB // 64])
    assert exact[0] == pytest.approx(512 / len(trace)) and exact[1] == 1.0


@pytest.mark.slow  # computes for seconds (long synthetic traces): not in the fast lane
@pytest.mark.parametrize("window", [65536, 1 << 20])
def test_cyclic_32m_working_set_misses_a_1m_cache(window):
    """A random cycle over 32 MiB: no reuse fits in a 64k window, yet the warm tail is exact."""
    blocks = 32 * MIB // 64
    trace = cyclic(blocks, 2 * blocks + window, np.random.default_rng(2))
    loc = PhaseLocality()
    loc.add_blocks("big", trace[blocks:blocks + window])  # a window after the first full cycle
    d = loc.to_dict("big")
    curve = dict(d["miss_rate_curve"])
    assert curve[1 * MIB] >= 0.5 and curve[1 * MIB] == 1.0
    assert d["histogram"]["cold"] == min(window, blocks)
    if window == 65536:
        # The window touches 65536 blocks = 4 MiB: it speaks for caches up to 2 MiB (warm) and
        # not beyond (every access a first use: the uncertainty is 100%).
        assert all(curve[b] == 1.0 for b in CACHE_BYTES if b < 4 * MIB)
        assert all(curve[b] is None for b in CACHE_BYTES if b >= 4 * MIB)
    else:
        # 1M accesses cover two cycles: distances are exact and all 512k-1 (misses below 32 MiB).
        assert all(curve[b] == 1.0 for b in CACHE_BYTES if b < 32 * MIB)
        assert curve[32 * MIB] is None  # F = 512k blocks: C >= F with uncertainty 0.5
        assert curve[64 * MIB] is None
    assert loc.miss_rate("big", 1 * MIB) == 1.0


@pytest.mark.slow  # computes for seconds (long synthetic traces): not in the fast lane
def test_streaming_trace_misses_at_every_size():
    n = (1 << 20) + (1 << 18)  # more distinct blocks than a 64 MiB cache holds
    loc = PhaseLocality()
    loc.add_blocks("stream", np.arange(n, dtype=np.uint64) * np.uint64(3))
    curve = loc.to_dict("stream")["miss_rate_curve"]
    assert [b for b, _ in curve] == list(CACHE_BYTES)
    assert all(rate == 1.0 for _, rate in curve)
    small = PhaseLocality()
    small.add_blocks("stream", np.arange(65536, dtype=np.uint64))
    assert all(rate == 1.0 for b, rate in small.to_dict("stream")["miss_rate_curve"] if b < 4 * MIB)
    assert all(rate is None for b, rate in small.to_dict("stream")["miss_rate_curve"] if b >= 4 * MIB)


@pytest.mark.slow  # computes for seconds (long synthetic traces): not in the fast lane
@pytest.mark.parametrize("working_blocks", [256, 4096, 65536])
def test_sampled_windows_agree_with_the_exact_full_trace_curve(working_blocks):
    """Uniform random accesses over W blocks, 16k-access windows every 64k accesses of a 1M trace:
    at every reported size the estimate is within 0.02 + its uncertainty of the exact curve."""
    rng = np.random.default_rng(working_blocks)
    trace = rng.integers(0, working_blocks, 1 << 20).astype(np.uint64)
    exact = exact_miss_rates(reuse_distances(trace), [b // 64 for b in CACHE_BYTES])
    loc = PhaseLocality()
    for w in windows_of(trace, 16384, 65536):
        loc.add_blocks(0, w)
    d = loc.to_dict(0)
    assert d["windows"] == 16 and d["accesses"] == 16 * 16384
    unc = dict(d["uncertainty"])
    reported = 0
    for (b, rate), truth in zip(d["miss_rate_curve"], exact):
        if rate is not None:
            reported += 1
            assert abs(rate - truth) <= 0.02 + unc[b], (b, rate, truth)
    # The sizes the windows speak for: all sizes below the window footprint, and (small W) all.
    footprint = working_blocks * (1 - np.exp(-16384 / working_blocks))
    assert reported >= sum(1 for b in CACHE_BYTES if b // 64 < footprint)
    if working_blocks == 256:
        assert reported == len(CACHE_BYTES)


def test_the_correction_matters():
    """Counting in-window first uses as plain misses over the whole window overstates the miss
    rate when the window is not much longer than the footprint; the warm tail does not."""
    rng = np.random.default_rng(5)
    trace = rng.integers(0, 2048, 1 << 18).astype(np.uint64)
    c = 1024
    exact = exact_miss_rates(reuse_distances(trace), [c])[0]
    naive, warm = [], []
    for w in windows_of(trace, 4096, 16384):
        d = reuse_distances(w)
        naive.append(exact_miss_rates(d, [c])[0])
        warm.append(window_estimates(d, [c])[0][0])
    assert abs(np.mean(warm) - exact) < 0.02
    assert np.mean(naive) - exact > 0.05  # measured: 0.577 vs 0.500


# ---------------------------------------------------------------- PhaseLocality API


def test_phases_are_kept_apart_and_addresses_are_64_byte_blocks():
    loc = PhaseLocality()
    # 4 addresses per 64-byte block, 32 KiB cycled: byte addresses map to blocks.
    addrs = np.resize(np.arange(0, 32 * KIB, 16, dtype=np.uint64) + np.uint64(0x7F0000000000), 65536)
    loc.add_window(1, addrs)
    loc.add_window(2, np.arange(65536, dtype=np.uint64) * np.uint64(64))  # streaming
    one, two = loc.to_dict(1), loc.to_dict(2)
    assert one["windows"] == 1 and one["accesses"] == 65536
    assert one["histogram"]["cold"] == 512
    # Three immediate reuses of each block per cycle, then a reuse over the other 511 blocks.
    assert one["histogram"]["log2"][0] == 3 * 16384 and one["histogram"]["log2"][9] == 16384 - 512
    assert sum(one["histogram"]["log2"]) + one["histogram"]["cold"] == 65536
    assert loc.miss_rate(1, 64 * KIB) == pytest.approx(512 / 65536)
    assert loc.miss_rate(2, 64 * KIB) == 1.0
    assert two["histogram"] == {"log2": [], "cold": 65536}
    assert sorted(loc.phases()) == [1, 2]
    assert loc.miss_rate(3, 64 * KIB) is None
    with pytest.raises(ValueError):
        loc.miss_rate(1, 100_000)
    loc.add_window(1, np.zeros(0, np.uint64))  # empty windows are ignored
    assert loc.to_dict(1)["windows"] == 1


def test_custom_cache_sizes_are_validated():
    with pytest.raises(ValueError):
        PhaseLocality(cache_bytes=[100])
    loc = PhaseLocality(cache_bytes=[64, 128])
    loc.add_blocks("p", np.array([1, 2, 1, 2, 1, 2, 3, 3], np.uint64))
    assert [b for b, _ in loc.to_dict("p")["miss_rate_curve"]] == [64, 128]
