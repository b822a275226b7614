"""The offline reference: SimPoint's clustering (Sherwood et al., ASPLOS 2002; SimPoint 3) on
phasescope's own basic-block vectors.

1. Each interval's vector is normalised to sum 1 (block instructions / interval instructions).
2. Random projection to ``dims`` (15) dimensions: every block key gets a row of ``dims`` values
   uniform in [-1, 1) (a deterministic hash of the key and the seed, so the matrix needs no
   storage and any number of distinct blocks works).
3. k-means (scikit-learn, k-means++ seeding, ``n_init`` restarts) for every k = 1..``max_k``.
4. BIC of each clustering (Pelleg & Moore's, identical spherical Gaussians, as SimPoint scores
   them): with R points, M dimensions, K clusters of R_c points and SSE the sum of squared
   distances to the centres, sigma^2 = SSE / (M (R - K)),
   log L = sum_c R_c log(R_c / R) - R M / 2 log(2 pi sigma^2) - M (R - K) / 2,
   p = (K - 1) + M K + 1 free parameters, BIC = log L - p / 2 log R.
5. k: the smallest k whose BIC reaches ``bic_fraction`` (0.9) of the range
   [min BIC, max BIC] over all k tried (SimPoint's ``-bicThreshold 0.9``).

scikit-learn is an optional extra (``pip install 'phasescope[quality]'``); without it
:func:`cluster` raises an InputError with one line saying so.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

from phasescope.errors import InputError
from phasescope.engine.hashing import mix64

DIMS = 15
MAX_K = 10
BIC_FRACTION = 0.9
SEED = 493575226  # any fixed value: the reference must be reproducible
N_INIT = 5


@dataclass
class Reference:
    """Result of the offline clustering: one label per interval and how k was chosen."""

    labels: np.ndarray  # int, one per interval
    distances: np.ndarray  # Euclidean distance of each projected vector to its centre
    k: int
    bic: List[float]  # BIC for k = 1..len(bic)
    instructions: Optional[np.ndarray] = None  # per interval, for alignment


def projection_rows(keys: np.ndarray, dims: int = DIMS, seed: int = SEED) -> np.ndarray:
    """Rows of the random projection matrix for ``keys``: shape (len(keys), dims), uniform in [-1, 1)."""
    keys = np.asarray(keys, dtype=np.uint64)
    out = np.empty((len(keys), dims))
    for d in range(dims):
        salt = np.uint64((seed * 0x100000001B3 + d * 0x9E3779B1) & 0xFFFFFFFFFFFFFFFF)
        z = mix64(np.bitwise_xor(keys, salt))
        out[:, d] = (z >> np.uint64(11)).astype(np.float64) / float(1 << 53) * 2.0 - 1.0
    return out


def project(keys: Sequence[np.ndarray], counts: Sequence[np.ndarray], dims: int = DIMS,
            seed: int = SEED) -> np.ndarray:
    """Normalised, projected vectors of intervals, shape (n, dims); an empty interval is all zeros."""
    n = len(keys)
    if n == 0:
        return np.zeros((0, dims))
    lens = np.fromiter((len(k) for k in keys), dtype=np.int64, count=n)
    flat_keys = np.concatenate([np.asarray(k, dtype=np.uint64) for k in keys])
    flat_counts = np.concatenate([np.asarray(c, dtype=np.float64) for c in counts])
    row = np.repeat(np.arange(n), lens)
    totals = np.bincount(row, weights=flat_counts, minlength=n)
    weights = flat_counts / np.where(totals > 0, totals, 1.0)[row]
    uniq, inverse = np.unique(flat_keys, return_inverse=True)
    rows = projection_rows(uniq, dims, seed)
    out = np.empty((n, dims))
    for d in range(dims):
        out[:, d] = np.bincount(row, weights=weights * rows[inverse, d], minlength=n)
    return out


def bic(points: np.ndarray, labels: np.ndarray, centers: np.ndarray) -> float:
    """Pelleg & Moore BIC of a hard clustering (see the module docstring)."""
    r, m = points.shape
    k = len(centers)
    if r <= k:
        return float("-inf")
    sse = float(((points - centers[labels]) ** 2).sum())
    variance = max(sse / (m * (r - k)), 1e-300)
    sizes = np.bincount(labels, minlength=k).astype(np.float64)
    sizes = sizes[sizes > 0]
    loglik = float((sizes * np.log(sizes / r)).sum()) - r * m / 2 * np.log(2 * np.pi * variance) - m * (r - k) / 2
    params = (k - 1) + m * k + 1
    return loglik - params / 2 * np.log(r)


def choose_k(scores: Sequence[float], fraction: float = BIC_FRACTION) -> int:
    """The smallest k (1-based) whose BIC is at least min + fraction * (max - min)."""
    s = np.asarray(scores, dtype=np.float64)
    finite = np.isfinite(s)
    if not finite.any():
        return 1
    lo, hi = s[finite].min(), s[finite].max()
    goal = lo + fraction * (hi - lo)
    return int(np.nonzero(finite & (s >= goal - 1e-9 * max(1.0, abs(goal))))[0][0]) + 1


NEEDS_SKLEARN = "the offline reference needs scikit-learn: pip install 'phasescope[quality]'"


def require_sklearn() -> None:
    """InputError unless scikit-learn is installed: found, not imported (the import takes 1-2 s of
    CPU, spent only when there is something to cluster)."""
    if importlib.util.find_spec("sklearn") is None:
        raise InputError(NEEDS_SKLEARN)


def _kmeans_class():
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        raise InputError(NEEDS_SKLEARN) from None
    return KMeans


def cluster(points: np.ndarray, max_k: int = MAX_K, fraction: float = BIC_FRACTION, seed: int = SEED,
            n_init: int = N_INIT) -> Reference:
    """k-means for k = 1..max_k on ``points``; labels of the k chosen by BIC."""
    KMeans = _kmeans_class()
    points = np.asarray(points, dtype=np.float64)
    if len(points) == 0:
        raise InputError("no intervals to cluster")
    if max_k < 1:
        raise InputError(f"max k must be at least 1 (got {max_k})")
    distinct = len(np.unique(points.round(12), axis=0))
    fits, scores = [], []
    for k in range(1, min(max_k, distinct) + 1):
        km = KMeans(n_clusters=k, n_init=n_init, random_state=seed % (2**32)).fit(points)
        labels = km.labels_.astype(np.int64)
        fits.append((labels, km.cluster_centers_))
        scores.append(bic(points, labels, km.cluster_centers_))
    k = choose_k(scores, fraction)
    raw, centers = fits[k - 1]
    dist = np.sqrt(((points - centers[raw]) ** 2).sum(axis=1))
    labels = _relabel(raw)
    return Reference(labels, dist, k, [float(s) for s in scores])


def _relabel(labels: np.ndarray) -> np.ndarray:
    """Cluster IDs renumbered in order of first appearance (0, 1, ...), as a phase tracker would."""
    order = {}
    out = np.empty_like(labels)
    for i, lab in enumerate(labels.tolist()):
        out[i] = order.setdefault(lab, len(order))
    return out


def reference_of(intervals, dims: int = DIMS, max_k: int = MAX_K, fraction: float = BIC_FRACTION,
                 seed: int = SEED) -> Reference:
    """The reference of a stream of :class:`phasescope.interval.Interval` (empty ones are kept:
    they get the label of the all-zero vector's cluster)."""
    ivs = list(intervals)
    pts = project([iv.keys for iv in ivs], [iv.counts for iv in ivs], dims, seed)
    ref = cluster(pts, max_k, fraction, seed)
    ref.instructions = np.array([iv.instructions for iv in ivs], dtype=np.float64)
    return ref
