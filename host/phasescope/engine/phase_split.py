"""Splitting a page-tracker phase that holds two activities (issue 27, stop 41).

Two activities that run one engine (point queries and updates of SQLite) can sit 0.3 (L1) apart
while one 100-sample window is 0.7 from its own activity's centre: no single window leaves the
phase that both fell into. Yet each window is nearer its own activity's centre than the other's
(the noise adds to both distances alike), and the activities come in runs. So each phase remembers
its last ``BUFFER`` windows and, every ``EVERY`` of them, clusters them in two (2-means, L1, each
window's distances summed with its thread's neighbours'). The phase holds two activities when both
groups have ``MIN_CHILD`` windows and consecutive windows of a thread are nearest the same group's
centre at least ``COHERENT`` of the time: the two halves of one activity's noise alternate (0.4-0.8
on bench/truth's tuning half), two activities do not (0.98-1.00).
And the groups must take turns (``TURNS`` changes between runs of ``RUN`` windows or more, in
one thread's windows; the table's order interleaves threads): one activity whose code moved once
(a JIT runtime's tiers) makes two coherent groups too, but one after the other.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

BUFFER = 64
EVERY = 16
MIN_CHILD = 10
COHERENT = 0.95
TURNS = 2
RUN = 3
_ROUNDS = 10


class Splitter:
    """Each phase's recent windows (by slot) and the test that splits one in two."""

    def __init__(self, buckets: int):
        self.buckets = buckets
        #: slot -> [(thread, that thread's window count, bucket indices, weights)], oldest first
        self._windows: Dict[int, List[Tuple[int, int, np.ndarray, np.ndarray]]] = {}
        self._since: Dict[int, int] = {}

    def add(self, slot: int, thread: int, tick: int, v: np.ndarray) -> bool:
        """Remember a window of ``slot``; True when the slot is due a test."""
        nz = np.flatnonzero(v)
        kept = self._windows.setdefault(slot, [])
        kept.append((thread, tick, nz, v[nz]))
        del kept[:-BUFFER]
        self._since[slot] = self._since.get(slot, 0) + 1
        if self._since[slot] < EVERY or len(kept) < 2 * MIN_CHILD:
            return False
        self._since[slot] = 0
        return True

    def forget(self, slot: int) -> None:
        """A slot taken by a new phase: its windows are another phase's."""
        self._windows.pop(slot, None)
        self._since.pop(slot, None)

    def split(self, slot: int) -> Optional[Tuple[np.ndarray, np.ndarray, int, int, Dict[int, int]]]:
        """``(older, newer, n_older, n_newer, last)`` when ``slot`` holds two activities: the centre
        and window count of the group whose first window came first, then the other's, and each
        thread's group (0 older, 1 newer) at its last window. The slot's windows are forgotten."""
        kept = self._windows.get(slot, [])
        seen = np.zeros(self.buckets, dtype=bool)
        seen[np.concatenate([nz for _, _, nz, _ in kept])] = True
        cols = np.flatnonzero(seen)  # the buckets any window has
        x = np.zeros((len(kept), len(cols)))
        for i, (_, _, nz, w) in enumerate(kept):
            x[i, np.searchsorted(cols, nz)] = w
        index = {(t, k): i for i, (t, k, _, _) in enumerate(kept)}
        nxt = np.array([index.get((t, k + 1), -1) for t, k, _, _ in kept])
        group = _two_means(x, nxt)
        if group is None:
            return None
        sizes = np.bincount(group, minlength=2)
        if sizes.min() < MIN_CHILD:
            return None
        where = {(t, k): g for (t, k, _, _), g in zip(kept, group.tolist())}
        pairs = [(g, where[t, k + 1]) for (t, k), g in where.items() if (t, k + 1) in where]
        if len(pairs) < 2 * MIN_CHILD or np.mean([a == b for a, b in pairs]) < COHERENT:
            return None
        threads = np.array([t for t, _, _, _ in kept])
        if max(_turns(group[threads == t]) for t in np.unique(threads)) < TURNS:
            return None
        if group[0] == 1:
            group = 1 - group
            sizes = sizes[::-1]
        last = {t: g for (t, _, _, _), g in zip(kept, group.tolist())}
        self.forget(slot)
        centres = np.zeros((2, self.buckets))
        centres[:, cols] = x[group == 0].mean(axis=0), x[group == 1].mean(axis=0)
        return centres[0], centres[1], int(sizes[0]), int(sizes[1]), last


def _two_means(x: np.ndarray, nxt: np.ndarray) -> Optional[np.ndarray]:
    """Each row's group (0/1), nearest of two centres under L1. The centres come from Lloyd's
    iterations whose assignment sums each row's distances with its thread's windows before and
    after (``nxt``: the row of the next one, -1 if none), from two starts (the rows' two halves in
    time; the row farthest from the mean against the rest), the one with the lower cost; None if
    every start collapses to one group."""
    n = len(x)
    prv = np.full(n, -1)
    prv[nxt[nxt >= 0]] = np.flatnonzero(nxt >= 0)
    far = np.abs(x - x.mean(axis=0)).sum(axis=1).argmax()
    starts = [np.arange(n) >= n // 2, np.arange(n) == far]
    best, cost = None, np.inf
    for first in starts:
        group = first.astype(np.int64)
        for _ in range(_ROUNDS):
            if group.min() == group.max():
                break
            dist = _distances(x, group)
            padded = np.vstack([dist, np.zeros((1, 2))])  # row -1: no neighbour
            again = (dist + padded[nxt] + padded[prv]).argmin(axis=1)
            if np.array_equal(again, group):
                break
            group = again
        if group.min() == group.max():
            continue
        dist = _distances(x, group)
        if dist.min(axis=1).sum() < cost:
            best, cost = dist.argmin(axis=1), dist.min(axis=1).sum()
    return None if best is None or best.min() == best.max() else best


def _distances(x: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Each row's L1 distance to the mean of group 0's rows and to group 1's: shape (n, 2)."""
    return np.stack([np.abs(x - x[group == g].mean(axis=0)).sum(axis=1) for g in (0, 1)], axis=1)


def _turns(group: np.ndarray) -> int:
    """Changes of group between the runs of ``RUN`` windows or more, in order (one thread's windows)."""
    runs = []
    start = 0
    for i in range(1, len(group) + 1):
        if i == len(group) or group[i] != group[start]:
            if i - start >= RUN and (not runs or runs[-1] != group[start]):
                runs.append(int(group[start]))
            start = i
    return len(runs) - 1 if runs else 0
