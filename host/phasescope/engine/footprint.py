"""The accumulator and footprint of the phase tracker (:mod:`phasescope.engine.tracker`).

Accumulator: each block key is hashed into one of ``buckets`` counters (a degenerate random
projection) and the counter grows by the block's instructions. Footprint: counter x M / total,
where total is the interval's actual instruction count (so partial intervals still compare) and
M = buckets x 2**k is the scale the paper uses (M = 32 for 32 buckets and 6 bits): the largest
power-of-two multiple of ``buckets`` for which a bucket holding the whole interval still fits in
``bits`` bits. Quantized footprints keep ``floor`` of that value; ``bits=None`` keeps full
precision. A footprint unit is 1/M of the interval, so ``distance / M`` is a fraction of the
interval: Manhattan distance 3.2 units for 32 buckets is the paper's 1M of a 10M interval.

Projected footprint (``projection``, as SimPoint reduces a basic block vector): each block key
has a random vector of ``buckets`` entries uniform in [-1, 1) (the first ``buckets`` outputs of
SplitMix64 seeded with the key, so every run and thread agree without storing a matrix), and the
footprint is 3 x the instruction-weighted mean of its blocks' vectors. Every block keeps its own
direction (no bucket collisions, no quantization), and two intervals each wholly in one block of
its own are 2 x M apart on average (M = ``buckets``), as hashed footprints of disjoint code are.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from phasescope.engine.config import TrackerConfig
from phasescope.engine.hashing import GOLDEN, M64, mix64

_TEMP_ELEMENTS = 1 << 21


def bucket_index(keys: np.ndarray, buckets: int) -> np.ndarray:
    """Bucket of each key in ``[0, buckets)``: the high 32 bits of its hash, scaled (multiply-shift)."""
    z = mix64(keys)
    np.right_shift(z, np.uint64(32), out=z)
    np.multiply(z, np.uint64(buckets), out=z)
    np.right_shift(z, np.uint64(32), out=z)
    return z.view(np.int64)


def projection_rows(keys: np.ndarray, dims: int, first: int = 0) -> np.ndarray:
    """Entries ``first`` to ``first + dims`` of each key's random vector, shape (len(keys), dims),
    uniform in [-1, 1): entry j is the (j+1)-th output of SplitMix64 seeded with the key, its top
    53 bits as a fraction."""
    keys = np.asarray(keys, dtype=np.uint64)
    out = np.empty((len(keys), dims))
    for j in range(dims):
        z = mix64(keys + np.uint64((first + j) * GOLDEN & M64))
        np.right_shift(z, np.uint64(11), out=z)
        out[:, j] = z * 2.0**-52 - 1.0
    return out


def manhattan(footprints: np.ndarray, reps: np.ndarray) -> np.ndarray:
    """Manhattan distances, shape (len(footprints), len(reps)), in footprint units."""
    out = np.empty((len(footprints), len(reps)))
    rows = max(1, _TEMP_ELEMENTS // max(1, reps.size))  # bound the (rows, reps, buckets) temporary
    for start in range(0, len(footprints), rows):
        block = footprints[start:start + rows]
        out[start:start + rows] = np.abs(block[:, None, :] - reps[None, :, :]).sum(axis=2)
    return out


def footprints(config: TrackerConfig, keys: Sequence[np.ndarray], counts: Sequence[np.ndarray]):
    """Footprints of many intervals at once (one hash pass, one bincount).

    ``keys[i]``/``counts[i]`` are interval i's block keys and instructions. Returns
    ``(footprints, totals)``: shape (n, buckets) and (n,); a row whose total is 0 is all zeros.
    """
    n, nb = len(keys), config.buckets
    lens = np.fromiter((len(k) for k in keys), dtype=np.int64, count=n)
    flat_keys = np.concatenate(keys) if n else np.zeros(0, np.uint64)
    flat_counts = np.concatenate(counts) if n else np.zeros(0)  # bincount takes them as float64
    rows = np.repeat(np.arange(n, dtype=np.int64), lens)
    if config.projection:
        total = np.bincount(rows, weights=flat_counts, minlength=n)
        uniq, inverse = np.unique(flat_keys, return_inverse=True)
        weights = np.asarray(flat_counts, float)
        acc = np.empty((n, nb))
        for j in range(nb):  # one dimension at a time: memory stays a few times the keys'
            acc[:, j] = np.bincount(rows, weights=weights * projection_rows(uniq, 1, j)[inverse, 0], minlength=n)
        scale = 3.0
    else:
        idx = bucket_index(flat_keys, nb)
        idx += rows * nb
        acc = np.bincount(idx, weights=flat_counts, minlength=n * nb).reshape(n, nb)
        total, scale = acc.sum(axis=1), config.scale
    fp = acc * scale
    np.divide(fp, total[:, None], out=fp, where=total[:, None] > 0)
    if config.bits is not None:
        np.floor(fp, out=fp)
        np.minimum(fp, (1 << config.bits) - 1, out=fp)
    return fp, total
