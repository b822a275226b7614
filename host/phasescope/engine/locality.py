"""Per-phase cache behaviour: reuse-distance histograms and LRU miss-rate curves from sampled windows.

Pure numpy; no Frida, no I/O. The agent ships *windows*: N consecutive memory accesses of one
thread (effective addresses, or 64-byte block numbers), each tagged with the thread's phase.

Reuse distance
--------------
The reuse distance of an access is the number of DISTINCT 64-byte blocks touched between it and
the previous access to the same block (0 for an immediate reuse); a first use has no previous
access (``COLD``, -1). A fully associative LRU cache of C blocks hits exactly the accesses whose
reuse distance is < C (Mattson et al.'s stack property), so one pass gives the miss rate of every
cache size.

Method (offline, O(n log n), vectorised). Let ``p = prev(i)`` be the previous occurrence of the
block accessed at ``i`` (-1 if none); the previous occurrences of the whole window come from one
sort of (block, position) pairs packed in an int64. The distinct blocks in ``(p, i)`` are the
positions ``j`` in ``(p, i)`` holding the first occurrence of their block inside the interval,
i.e. ``prev(j) < p``. Every ``j <= p`` has ``prev(j) < j <= p``, so

    distance(i) = #{ j < i : prev(j) < prev(i) } - (prev(i) + 1).

The count "earlier elements with a smaller value" is a 2-D dominance count, the offline form of
Bennett-Kruskal's / Almasi et al.'s Fenwick-tree counting over last-access times. The first uses
(prev -1) before a reuse are simply counted; the reuses' ``prev`` are distinct positions, so their
ranks (one cumulative sum) are a permutation, and the count over a permutation is a wavelet-matrix
sweep (``smaller_before_permutation``): for each bit from the top, the elements are kept stably
grouped by their higher bits; an element whose bit is 1 is larger than every earlier element of
its group whose bit is 0, the number of those is a cumulative sum, and a stable partition by the
bit (one scatter) refines the groups for the next bit. Over a permutation every group but the last
holds exactly 2^b zeros at bit b, so each group's place follows from its position alone, and once
the groups are smaller than a slice of 2^15 elements each slice runs its remaining bits while it is in
cache. ``log2(n)`` levels of O(n) numpy work each: no per-access Python loop, no O(n*m) scan.
``bench/reuse_throughput.py`` measures it: 3.3-6 million accesses per CPU second on windows of
16k-2M accesses at load 5, where the previous sweep (over all n values, with per-group counts from
a bincount per bit) did 0.9-1.1 million on 1M-2M-access windows and 1.6-2.2 million on 16k-64k.

Window bias and how it is handled
---------------------------------
A window cannot see a reuse whose earlier use lies before the window: every in-window first use
of a block is of unknown distance. What the window does know about such an access at position i
is a lower bound: its distance is at least ``D(i)``, the number of distinct blocks the window has
touched before i. For a cache of C blocks this makes the outcome of an access EXACT once the
window has touched C distinct blocks ("warm-up", as in sampled simulation): from that point on an
LRU cache of C blocks holds exactly the last C distinct blocks of the window, whatever came
before, so an in-window reuse misses iff its distance >= C and an in-window first use always
misses. So, per window and cache size C (blocks), with F = distinct blocks in the window:

* C < F (the window warms): the window's miss rate is measured exactly over its tail, the
  accesses after its C-th distinct block (``warm-up estimator``). The tail is chosen by position
  only, not by outcome.
* C >= F (the window never fills the cache): every in-window reuse hits (its distance is < F);
  only the F first uses are unknown. The window's miss rate lies in ``[0, F/N]``; the estimate
  counts the F first uses as misses (the upper bound, "cold misses count as misses") and its
  uncertainty is F/N.

A phase's estimate for size C is the access-weighted mean of its windows' estimates, with
uncertainty the access-weighted mean of the windows' uncertainties. It is reported only where
the uncertainty is at most ``MAX_UNCERTAINTY`` (default 5%); larger sizes are ``None``: a window
of N accesses that touches F distinct blocks cannot speak for caches larger than F blocks unless
F/N is small, i.e. unless the footprint is small and reused. ``tests/test_locality.py`` checks
this against the exact full-trace curve: cyclic working sets larger and smaller than the window,
random working sets and a streaming trace agree with the exact curve at every reported size, and
the sizes beyond a large-footprint window are ``None``.

The reuse signature (issue 21) is the same estimate on a finer grid of cache sizes, 16 per octave
from 1 block to 2^24 blocks (1 GiB), kept only where it is exact to 0.5%: the phase's reuse-distance
distribution, P(distance >= C), as far as its windows reach (``signature``). Together with the
run's input size it is what :mod:`phasescope.engine.locality_model` fits across runs. The data a
phase's windows touched together (their distinct blocks, ``touched_bytes``) bounds the reuses no
window saw; all windows' together are the run's default input size (a lower bound of its data).

The reuse-distance histogram is of in-window distances: log2 bins (bin 0 = distance 0, bin b =
[2^(b-1), 2^b) blocks), plus the ``cold`` bin for in-window first uses (distance unknown, at
least the distinct blocks seen so far in the window).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Hashable, List, Optional

import numpy as np

from phasescope.engine.arrays import unique

BLOCK_SHIFT = 6
BLOCK_BYTES = 1 << BLOCK_SHIFT
COLD = -1
HIST_BINS = 33  # finite log2 bins: 0, [1,2), [2,4), ..., [2^31, 2^32)
CACHE_BYTES = tuple(1 << s for s in range(12, 27))  # 4 KiB .. 64 MiB
MAX_UNCERTAINTY = 0.05
#: the signature keeps the sizes its windows measure exactly, but for this much (first uses counted
#: as misses in windows that never fill the cache): past them lie the reuses no window can see
SIGNATURE_UNCERTAINTY = 0.005
#: cache sizes (blocks) of the reuse signature: 16 per octave, 1 block to 2^24 blocks (1 GiB)
SIGNATURE_BLOCKS = tuple(int(b) for b in unique(np.round(2.0 ** (np.arange(16 * 24 + 1) / 16)).astype(np.int64)))


def previous_occurrences(blocks: np.ndarray) -> np.ndarray:
    """prev[i] = the largest j < i with blocks[j] == blocks[i], or -1 (int64)."""
    blocks = np.asarray(blocks)
    n = len(blocks)
    prev = np.full(n, -1, np.int64)
    if n < 2:
        return prev
    shift = (n - 1).bit_length()
    lo = blocks.min()
    if (int(blocks.max()) - int(lo)).bit_length() + shift <= 63:
        # One sort of (block, position) packed in an int64: several times faster than the stable
        # argsort, and user-space block numbers (< 2^41) fit beside any window's positions.
        key = np.sort(((blocks - lo).astype(np.int64) << shift) | np.arange(n, dtype=np.int64))
        order = key & ((1 << shift) - 1)
        key >>= shift
    else:
        order = np.argsort(blocks, kind="stable")
        key = blocks[order]
    same = key[1:] == key[:-1]
    prev[order[1:][same]] = order[:-1][same]
    return prev


#: positions per slice of a wavelet level (its int64 work arrays of 256 KiB each stay in cache)
CHUNK_BITS = 15


def _wavelet_level(packed: np.ndarray, x0: int, b: int, ones: int, out: np.ndarray, work: list) -> int:
    """Bit ``b`` of :func:`smaller_before_permutation` for the elements ``packed`` (value << 32 | count)
    at positions x0, x0+1, ... of the level's order, ``ones`` being the ones of bit b before x0:
    adds to each one the zeros before it in its group, scatters every element to its position in
    the next level's order (``out``, same positions) and returns the ones up to the last element.
    ``work``: 0, 1, 2, ... and five arrays to write, as long as ``packed`` at least (allocated once:
    arrays of 128 KiB and more are mapped and unmapped by malloc at each use)."""
    n = len(packed)
    positions, x, bit, co, before, count = (w[:n] for w in work)
    np.add(positions, x0, out=x)
    np.right_shift(packed, 32 + b, out=bit)
    bit &= 1
    np.cumsum(bit, out=co)  # ones up to and including each element
    if ones:
        co += ones
    ones = int(co[-1])
    np.right_shift(x, b + 1, out=before)  # zeros in the groups before the element's (each has 2^b)
    before <<= b
    x -= co  # zeros before the element in all groups, one fewer if it is a one
    np.subtract(x, before, out=count)
    count += 1
    count *= bit  # a one is larger than every earlier zero of its group
    count += packed
    # new position: a zero goes to its group's start + the group's zeros before it = before + x - co;
    # a one after the group's 2^b zeros, + the group's ones before it = before + 2^b + co - 1
    co -= x
    co += (1 << b) - 1
    co *= bit
    x += before
    x += co
    out[x] = count
    return ones


def smaller_before_permutation(r: np.ndarray, chunk_bits: int = CHUNK_BITS) -> np.ndarray:
    """c[i] = #{ j < i : r[j] < r[i] } for a permutation r of 0..m-1 (m < 2^31), in O(m log m).

    The levels of groups larger than ``2^chunk_bits`` run slice by slice; then every slice holds
    whole groups and runs its remaining levels while it is in cache."""
    m = len(r)
    if m >= 1 << 31:
        raise ValueError("smaller_before_permutation needs fewer than 2^31 values")
    levels = max(m - 1, 1).bit_length()
    chunk = 1 << chunk_bits
    local = min(levels, chunk_bits)
    packed = np.asarray(r, np.int64) << 32  # value in the high half, count in the low half
    out = np.empty_like(packed)
    size = min(chunk, m)
    work = [np.arange(size, dtype=np.int64)] + [np.empty(size, np.int64) for _ in range(5)]
    for b in range(levels - 1, local - 1, -1):  # groups larger than a slice: slice by slice
        ones = 0
        for s in range(0, m, chunk):
            ones = _wavelet_level(packed[s:s + chunk], s, b, ones, out, work)
        packed, out = out, packed
    for s in range(0, m, chunk):  # each slice is whole groups now: its remaining bits in cache
        p, o = packed[s:s + chunk], out[s:s + chunk]
        for b in range(local - 1, -1, -1):
            _wavelet_level(p, 0, b, 0, o, work)
            p, o = o, p
        if local & 1:
            packed[s:s + chunk] = p
    return (packed & 0xFFFFFFFF)[r]  # sorted by value now: position = value


def reuse_distances(blocks: np.ndarray) -> np.ndarray:
    """Reuse distance of every access of ``blocks`` (block numbers), ``COLD`` (-1) for first uses."""
    prev = previous_occurrences(blocks)
    n = len(prev)
    out = np.full(n, COLD, np.int64)
    reuse = np.flatnonzero(prev >= 0)
    p = prev[reuse]
    # The reuses' previous positions are distinct: their ranks, by one cumulative sum, are a
    # permutation. Earlier first uses (prev -1) are smaller than every reuse's: reuse[k] - k of them.
    has_next = np.zeros(n, bool)
    has_next[p] = True
    rank = np.cumsum(has_next)[p] - 1
    out[reuse] = smaller_before_permutation(rank) + reuse - np.arange(len(reuse)) - p - 1
    return out


def log2_histogram(distances: np.ndarray) -> tuple:
    """(finite log2-bin counts, length HIST_BINS; cold count) of reuse distances."""
    d = np.asarray(distances, np.int64)
    finite = d[d >= 0]
    # bin = bit length of the distance: 0 -> 0, [2^(b-1), 2^b) -> b (frexp is exact below 2^53).
    bins = np.frexp(finite.astype(np.float64))[1].astype(np.int64)
    hist = np.bincount(np.minimum(bins, HIST_BINS - 1), minlength=HIST_BINS)[:HIST_BINS]
    return hist.astype(np.int64), int(len(d) - len(finite))


def exact_miss_rates(distances: np.ndarray, cache_blocks) -> np.ndarray:
    """Miss rate of a fully associative LRU cache of each size (blocks): distance >= C or cold."""
    d = np.asarray(distances, np.int64)
    c = np.asarray(cache_blocks, np.int64)
    if len(d) == 0:
        return np.full(len(c), np.nan)
    finite = np.sort(d[d >= 0])
    cold = len(d) - len(finite)
    misses = cold + len(finite) - np.searchsorted(finite, c, side="left")
    return misses / len(d)


def window_estimates(distances: np.ndarray, cache_blocks) -> tuple:
    """(estimate, uncertainty) of one window's miss rate per cache size (blocks); see module doc."""
    d = np.asarray(distances, np.int64)
    c = np.asarray(cache_blocks, np.int64)
    n = len(d)
    first = np.flatnonzero(d < 0)  # positions of in-window first uses
    f = len(first)
    finite = np.sort(d[d >= 0])
    far = len(finite) - np.searchsorted(finite, c, side="left")  # reuses with distance >= C
    est = np.empty(len(c))
    unc = np.zeros(len(c))
    warm = c < f
    # Warm: the tail after the C-th first use; reuses of distance >= C all lie in it (before it a
    # reuse's distance is < C), and so do the F - C later first uses, all misses.
    cw = c[warm]
    tail = n - (first[np.maximum(cw - 1, 0)] + 1)
    tail = np.where(cw == 0, n, tail)
    est[warm] = (far[warm] + f - cw) / tail
    est[~warm] = f / n
    unc[~warm] = f / n
    return est, unc


class _Touched:
    """The distinct blocks of many windows together: sorted unique arrays, merged lazily."""

    def __init__(self):
        self._union = np.zeros(0, np.uint64)
        self._pending: List[np.ndarray] = []
        self._pending_size = 0

    def add(self, unique_blocks: np.ndarray) -> None:
        u = unique_blocks
        self._pending.append(u)
        self._pending_size += len(u)
        if self._pending_size > 4 * len(self._union) + (1 << 16):
            self._merge()

    def _merge(self) -> None:
        if self._pending:
            self._union = unique(np.concatenate([self._union, *self._pending]))
            self._pending, self._pending_size = [], 0

    def count(self) -> int:
        self._merge()
        return len(self._union)


@dataclass
class _Phase:
    windows: int = 0
    accesses: int = 0
    histogram: np.ndarray = field(default_factory=lambda: np.zeros(HIST_BINS, np.int64))
    cold: int = 0
    weighted: np.ndarray = field(default_factory=lambda: np.zeros(len(CACHE_BYTES)))
    uncertainty: np.ndarray = field(default_factory=lambda: np.zeros(len(CACHE_BYTES)))
    touched: "_Touched" = field(default_factory=lambda: _Touched())


class PhaseLocality:
    """Per-phase accumulation of sampled access windows (one window = one thread's consecutive accesses)."""

    def __init__(self, cache_bytes=CACHE_BYTES, max_uncertainty: float = MAX_UNCERTAINTY):
        self.cache_bytes = tuple(int(b) for b in cache_bytes)
        if any(b <= 0 or b % BLOCK_BYTES for b in self.cache_bytes):
            raise ValueError("cache sizes must be positive multiples of 64 bytes")
        cache_blocks = [b // BLOCK_BYTES for b in self.cache_bytes]
        # one grid for both the curve's sizes and the signature's (one estimate pass per window)
        self._blocks = unique(np.array(cache_blocks + list(SIGNATURE_BLOCKS), np.int64))
        self._curve_at = np.searchsorted(self._blocks, cache_blocks)
        self._signature_at = np.searchsorted(self._blocks, SIGNATURE_BLOCKS)
        self.max_uncertainty = max_uncertainty
        self._phases: Dict[Hashable, _Phase] = {}
        self._touched = _Touched()

    def add_window(self, phase: Hashable, addresses: np.ndarray) -> None:
        """One window of byte addresses (any integer dtype), tagged with ``phase``."""
        addresses = np.asarray(addresses)
        self.add_blocks(phase, addresses.astype(np.uint64, copy=False) >> np.uint64(BLOCK_SHIFT))

    def add_blocks(self, phase: Hashable, blocks: np.ndarray) -> None:
        """One window of 64-byte block numbers (address >> 6), as the agent ships them."""
        blocks = np.asarray(blocks)
        if len(blocks) == 0:
            return
        d = reuse_distances(blocks)
        self.add_distances(phase, d)
        u = unique(blocks)
        self._touched.add(u)
        self._phases[phase].touched.add(u)

    def touched_bytes(self) -> int:
        """Bytes of the distinct 64-byte blocks all windows touched together (the default input size)."""
        return self._touched.count() * BLOCK_BYTES

    def add_distances(self, phase: Hashable, distances: np.ndarray) -> None:
        """One window given by its in-window reuse distances (``COLD`` for first uses)."""
        d = np.asarray(distances, np.int64)
        n = len(d)
        if n == 0:
            return
        p = self._phases.get(phase)
        if p is None:
            p = self._phases[phase] = _Phase(
                weighted=np.zeros(len(self._blocks)), uncertainty=np.zeros(len(self._blocks)))
        hist, cold = log2_histogram(d)
        est, unc = window_estimates(d, self._blocks)
        p.windows += 1
        p.accesses += n
        p.histogram += hist
        p.cold += cold
        p.weighted += est * n
        p.uncertainty += unc * n

    def phases(self) -> List[Hashable]:
        return list(self._phases)

    def _curve(self, phase: Hashable, at=None):
        p = self._phases[phase]
        at = self._curve_at if at is None else at
        return p.weighted[at] / p.accesses, p.uncertainty[at] / p.accesses

    def signature(self, phase: Hashable) -> list:
        """[[cache blocks, miss rate], ...] on the fine grid, where the windows can tell (see module doc)."""
        est, unc = self._curve(phase, self._signature_at)
        return [[b, round(float(e), 6)] for b, e, u in zip(SIGNATURE_BLOCKS, est, unc) if u <= SIGNATURE_UNCERTAINTY]

    def miss_rate(self, phase: Hashable, cache_bytes: int) -> Optional[float]:
        """Estimated LRU miss rate of ``phase`` at ``cache_bytes`` (one of the configured sizes), or None."""
        if phase not in self._phases:
            return None
        try:
            k = self.cache_bytes.index(int(cache_bytes))
        except ValueError:
            raise ValueError(f"cache size {cache_bytes} is not one of {self.cache_bytes}") from None
        est, unc = self._curve(phase)
        return float(est[k]) if unc[k] <= self.max_uncertainty else None

    def to_dict(self, phase: Hashable) -> dict:
        """windows, accesses, histogram {"log2": [...], "cold": n}, miss_rate_curve [[bytes, rate|None]],
        uncertainty, signature [[blocks, rate]] (the fine grid, where known), touched_bytes (its windows'
        distinct blocks together)."""
        p = self._phases[phase]
        est, unc = self._curve(phase)
        last = int(np.flatnonzero(p.histogram)[-1]) + 1 if p.histogram.any() else 0
        return {
            "windows": p.windows,
            "accesses": p.accesses,
            "histogram": {"log2": [int(x) for x in p.histogram[:last]], "cold": p.cold},
            "miss_rate_curve": [[b, float(e) if u <= self.max_uncertainty else None]
                                for b, e, u in zip(self.cache_bytes, est, unc)],
            "uncertainty": [[b, float(u)] for b, u in zip(self.cache_bytes, unc)],
            "signature": self.signature(phase),
            "touched_bytes": p.touched.count() * BLOCK_BYTES,
        }
