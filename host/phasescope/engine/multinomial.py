"""Multinomial goodness of fit of a sampled window to phase representatives (the ``sampled`` preset).

A window of n samples is a multinomial draw of n bucket counts. Its fit to representative k is
the G statistic (log-likelihood ratio) of its counts c against the representative's smoothed
bucket distribution q_k: G = 2 sum_b c_b ln(c_b / (n q_{k,b})). Smoothing: the representative
counts as ``REP_WINDOWS`` windows of evidence (its bucket fractions x that many samples) plus
``ALPHA`` pseudo-samples in every bucket, so a bucket it never saw has a small probability, and
samples that land there weigh heavily (evidence the Manhattan distance spends no more on than on
any other difference). The null distribution of G, windows of n samples drawn from q_k, has no
closed form for sparse counts, so its mean and standard deviation are estimated from ``DRAWS``
simulated windows with a fixed seed (the same answer live and in a replay).
"""

from __future__ import annotations

from typing import Tuple

import numpy as np

REP_WINDOWS = 8
ALPHA = 0.5
DRAWS = 256
SEED = 0x5EED


def smoothed(fractions: np.ndarray, samples: float) -> np.ndarray:
    """Each representative's bucket fractions (rows sum to 1) as a smoothed distribution, all > 0."""
    pseudo = np.clip(np.atleast_2d(fractions), 0.0, None) * (REP_WINDOWS * samples) + ALPHA
    return pseudo / pseudo.sum(axis=1, keepdims=True)


def g_statistic(counts: np.ndarray, q: np.ndarray) -> np.ndarray:
    """G of each row of ``counts`` (..., buckets) against the distribution ``q`` (buckets,) or
    against each row of ``q`` (reps, buckets) for one window of counts."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(counts > 0, counts * np.log(counts / (n * q)), 0.0)
    return 2.0 * terms.sum(axis=-1)


def null_moments(q: np.ndarray, samples: int) -> Tuple[float, float]:
    """Mean and standard deviation of G for windows of ``samples`` samples drawn from ``q``."""
    draws = np.random.default_rng(SEED).multinomial(int(samples), q, size=DRAWS)
    g = g_statistic(draws, q)
    return float(g.mean()), float(g.std())
