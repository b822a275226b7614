"""SimPoint 3.2's clustering, small enough to run online (issue 28): random projection to 15
dimensions, Lloyd's k-means (k-means++ starts), its BIC, and its binary search for the smallest k
whose BIC reaches 90% of the range seen (KMeans::bicScore, Simpoint::doClustering/findBestRun).
Used by the k-means tracker (:mod:`.kmeans_tracker`) and by the table tracker's threshold
calibrated on the program's own clusters (``calibrate_on="kmeans"``, :func:`cluster_distances`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

DIMS = 15  # SimPoint's projection
STARTS = 3  # random starts per k (SimPoint: 5); the best BIC wins
ITERATIONS = 50  # Lloyd iterations at most (SimPoint: 100); they stop when no label moves
BIC_SHARE = 0.9  # SimPoint's -bicThreshold
MIN_SIZE = 4  # points per cluster at least, on average (choose_k)
MAX_K = 30  # SimPoint's -maxK as people run it
SEED = 2042712918  # SimPoint's default projection seed, for the record


def projection_matrix(buckets: int) -> np.ndarray:
    """The fixed random projection of a footprint: (buckets, DIMS), uniform in [-1, 1)."""
    return np.random.default_rng(SEED).uniform(-1.0, 1.0, size=(buckets, DIMS))


def project(footprints: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Footprints normalised to sum 1 (SimPoint normalises each vector), then projected."""
    f = np.atleast_2d(np.asarray(footprints, dtype=np.float64))
    total = f.sum(axis=1, keepdims=True)
    return np.divide(f, total, out=np.zeros_like(f), where=total > 0) @ matrix


def bic(x: np.ndarray, labels: np.ndarray, centers: np.ndarray) -> float:
    """SimPoint 3.2's BIC of a clustering of equally weighted points."""
    n, d = x.shape
    k = len(centers)
    sigma2 = max(float(((x - centers[labels]) ** 2).sum()) / (d * n), 1e-300)
    sizes = np.bincount(labels, minlength=k)
    sizes = sizes[sizes > 0]
    likelihood = -n * d * (np.log(2 * np.pi * sigma2) + 1) / 2 + float((sizes * np.log(sizes / n)).sum())
    return likelihood - ((k - 1) + k * d + 1) / 2 * np.log(n)


def nearest(x: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Index of each point's nearest center (squared Euclidean)."""
    d = (x * x).sum(axis=1)[:, None] - 2 * x @ centers.T + (centers * centers).sum(axis=1)[None, :]
    return d.argmin(axis=1)


def seeds(x: np.ndarray, k: int, rng: np.random.Generator, first: Optional[np.ndarray] = None) -> np.ndarray:
    """k-means++ starting centers (Arthur & Vassilvitskii 2007): after ``first`` (or one point at
    random), each next one a point drawn with probability proportional to its squared distance to
    the nearest center so far."""
    centers = np.empty((k, x.shape[1]))
    m = 0
    if first is not None and len(first):
        m = len(first)
        centers[:m] = first
    else:
        centers[0] = x[rng.integers(len(x))]
        m = 1
    d2 = ((x[:, None, :] - centers[None, :m, :]) ** 2).sum(axis=2).min(axis=1)
    for j in range(m, k):
        total = d2.sum()
        i = int(rng.choice(len(x), p=d2 / total)) if total > 0 else int(rng.integers(len(x)))
        centers[j] = x[i]
        d2 = np.minimum(d2, ((x - x[i]) ** 2).sum(axis=1))
    return centers


def kmeans(x: np.ndarray, k: int, rng: np.random.Generator, warm: Optional[np.ndarray] = None):
    """Lloyd's k-means, best of :data:`STARTS` by BIC: (BIC, labels, centers). Each start is
    k-means++ (SimPoint samples k points at random, which often leaves two starts in one of
    several well separated clusters and none in another: tests/test_kmeans.py). ``warm``: earlier
    centers, most important first; the first start takes the first ``k`` of them and seeds the rest."""
    best = None
    for start in range(STARTS if k > 1 else 1):
        first = warm[:k] if start == 0 and warm is not None else None
        centers = seeds(x, k, rng, first)
        labels = nearest(x, centers)
        for _ in range(ITERATIONS):
            sums = np.zeros_like(centers)
            np.add.at(sums, labels, x)
            counts = np.bincount(labels, minlength=k)
            filled = counts > 0
            centers[filled] = sums[filled] / counts[filled, None]
            moved = nearest(x, centers)
            if np.array_equal(moved, labels):
                break
            labels = moved
        score = bic(x, labels, centers)
        if best is None or score > best[0]:
            best = (score, labels, centers)
    return best


def choose_k(x: np.ndarray, max_k: int, rng: np.random.Generator, warm: Optional[np.ndarray] = None):
    """SimPoint's search: k = 1, max_k, their middle, then halving towards where the BIC reaches
    90% of its range; the smallest k tried that reaches it wins. Returns (labels, centers). At
    most one cluster per :data:`MIN_SIZE` points: on a few points, k near their number has next to
    no variance and an unbounded BIC (SimPoint never runs on so few)."""
    max_k = max(1, min(max_k, len(x) // MIN_SIZE, len(np.unique(x, axis=0))))
    runs = {}
    lo, hi = 1, max_k
    todo = [1, max_k, (1 + max_k) // 2]
    while todo:
        k = todo.pop(0)
        if k in runs:
            continue
        runs[k] = kmeans(x, k, rng, warm)
        if len(runs) < 3:
            continue
        scores = {j: r[0] for j, r in runs.items()}
        kmin, kmax = min(scores, key=scores.get), max(scores, key=scores.get)
        bar = scores[kmin] + BIC_SHARE * (scores[kmax] - scores[kmin])
        if kmax > kmin and scores[k] < bar:
            lo, nxt = k, (k + hi) // 2
        else:
            hi, nxt = k, (k + lo) // 2
        if hi - lo > 1:
            todo.append(nxt)
    scores = {j: r[0] for j, r in runs.items()}
    bar = min(scores.values()) + BIC_SHARE * (max(scores.values()) - min(scores.values()))
    k = min(j for j, s in scores.items() if s >= bar)
    return runs[k][1], runs[k][2]


def due(count: int, every: int) -> bool:
    """Whether the ``count``-th interval re-clusters: at 1, 2, 4, ... up to ``every``, then every ``every``."""
    return count <= every and count & (count - 1) == 0 or count % every == 0


def cluster_distances(footprints: np.ndarray, matrix: np.ndarray, max_k: int, rng: np.random.Generator) -> np.ndarray:
    """SimPoint's clustering of ``footprints`` (projected by ``matrix``), then each footprint's
    Manhattan distance to its cluster's mean footprint, in footprint units."""
    labels, centers = choose_k(project(footprints, matrix), max_k, rng)
    means = np.zeros((len(centers), footprints.shape[1]))
    np.add.at(means, labels, footprints)
    means /= np.maximum(np.bincount(labels, minlength=len(centers)), 1)[:, None]
    return np.abs(footprints - means[labels]).sum(axis=1)

