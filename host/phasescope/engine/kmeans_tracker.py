"""Online SimPoint (``--tracker kmeans``): k-means with a BIC choice of k, re-run on a window of
recent intervals as the program runs, with phase IDs kept across re-clusterings (issue 28).

SimPoint 3.2 clusters a whole run offline: each basic-block vector, normalised, is randomly
projected to 15 dimensions; k-means runs for k from 1 to ``-maxK`` (a binary search over k), the
best of 5 random starts kept for each k by its BIC; the smallest k whose BIC reaches 90% of the
range of the BICs seen is chosen. This tracker does the same online (:mod:`.kmeans`):

- **Vectors.** The table tracker's full-precision hashed footprint (``buckets`` counters, each
  block's instructions in its bucket), normalised to sum 1 and projected to :data:`DIMS`
  dimensions by a fixed random matrix, uniform in [-1, 1) as SimPoint's.
- **Window.** The last ``kmeans_window`` projected vectors (a ring buffer), and their IDs.
- **Re-clustering.** At the 1st, 2nd, 4th, 8th ... interval, then every ``kmeans_every`` intervals,
  k-means runs on the window for k up to ``table_size`` by SimPoint's binary search, BIC and 90%
  rule (:func:`.kmeans.choose_k`), the previous centers as one start. Earlier when a second
  interval since the last one lies further than :data:`FAR` x the clustering's variance (per
  dimension, x 15) from every center (new behaviour), at most once per :data:`GAP` intervals.
- **Stable IDs.** A new cluster takes the ID its window members carried most, unless a larger new
  cluster has taken it already (greedy on the overlap, largest first); otherwise it gets a new ID.
  The window keeps the IDs its intervals were given (not the latest clustering's), so a phase
  that two clusterings cut differently is voted back to the ID it was shown under. IDs are never reused.
- **Labels.** Each interval gets the ID of its nearest centroid (Euclidean, in the projection),
  as k-means assigns every point; a re-clustering due at this interval runs first.

Everything is seeded (:data:`SEED`), so a stream always gives the same IDs. A phase's
representative (:meth:`KMeansTracker.table`, the phase database) is the mean full footprint of
its window members, in the table tracker's units.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from phasescope.engine.kmeans import DIMS, SEED, choose_k, due, nearest, project, projection_matrix
from phasescope.engine.phase_table import Match
from phasescope.engine.tracker import Tracker

FAR = 9.0  # an interval this many times the clustering's variance per dimension from every center is far
GAP = 32  # intervals at least between two re-clusterings that far intervals bring forward


class KMeansTracker:
    """Online SimPoint (module docstring). The same interface as
    :class:`~phasescope.engine.tracker.Tracker`; one per process, its threads share the phases."""

    def __init__(self, config):
        self.config = config
        c = config
        self._hasher = Tracker(config)  # the table tracker's full-precision footprints
        self._projection = projection_matrix(c.buckets)
        self._rng = np.random.default_rng(SEED + 1)
        w = c.kmeans_window
        self._x = np.zeros((w, DIMS))  # the window: projected vectors, footprints, IDs (a ring)
        self._fps = np.zeros((w, c.buckets))
        self._window_ids = np.full(w, -1, dtype=np.int64)
        self._count = 0
        self._centers = np.zeros((0, DIMS))
        self._ids = np.zeros(0, dtype=np.int64)  # the phase ID of each center
        self._reps: dict = {}  # phase -> mean footprint of its window members
        self._hits: dict = {}
        self._seen: set = set()  # IDs some interval has carried
        self.next_id = 0
        self.known: set = set()
        self.evictions = 0
        self.merges = 0
        self.reclusterings = 0
        self._sigma2 = 0.0
        self._far = 0
        self._last = 0  # the interval count at the last re-clustering

    # -- footprints ---------------------------------------------------------------------------
    def footprints(self, keys: Sequence[np.ndarray], counts: Sequence[np.ndarray]):
        """Full-precision hashed footprints and totals (:meth:`Tracker.footprints`)."""
        return self._hasher.footprints(keys, counts)

    def display(self, footprint: np.ndarray) -> np.ndarray:
        return footprint

    def project(self, footprints: np.ndarray) -> np.ndarray:
        return project(footprints, self._projection)

    # -- classification -----------------------------------------------------------------------
    def classify(self, footprint: np.ndarray, thread: int = 0) -> Match:
        return self.classify_many(np.asarray(footprint, dtype=np.float64)[None, :])[0]

    def classify_many(self, footprints: np.ndarray, samples=None, threads=None, units=None) -> List[Match]:
        """Label footprints in order (``samples``, ``threads`` and ``units`` play no part: one shared window)."""
        f = np.asarray(footprints, dtype=np.float64)
        xs = self.project(f)
        return [self._classify(fp, x) for fp, x in zip(f, xs)]

    def _classify(self, fp: np.ndarray, x: np.ndarray) -> Match:
        c = self.config
        slot = self._count % c.kmeans_window
        self._x[slot], self._fps[slot], self._window_ids[slot] = x, fp, -1
        self._count += 1
        if len(self._centers):  # its provisional ID, which a re-clustering carries over
            self._window_ids[slot] = self._ids[int(nearest(x[None, :], self._centers)[0])]
        if self._due():
            self._recluster()
        j = int(nearest(x[None, :], self._centers)[0])
        if ((x - self._centers[j]) ** 2).sum() > FAR * DIMS * self._sigma2:
            self._far += 1
            if self._far >= 2 and self._count - self._last >= GAP:
                self._recluster()
                j = int(nearest(x[None, :], self._centers)[0])
        phase = int(self._ids[j])
        self._window_ids[slot] = phase
        self._hits[phase] = self._hits.get(phase, 0) + 1
        rep = self._reps.get(phase)
        distance = None if rep is None else float(np.abs(fp - rep).sum() / self._hasher._scale)
        new = phase not in self._seen and phase not in self.known
        self._seen.add(phase)
        return Match(phase, distance, new)

    def _due(self) -> bool:
        """Re-clustering time (:func:`.kmeans.due`); after a preload, not before ``kmeans_every``
        intervals (a window of a few intervals would forget the preloaded phases)."""
        every = self.config.kmeans_every
        return due(self._count, every) and not (self.known and self._count < every)

    def _recluster(self) -> None:
        """k-means on the window; IDs carried over by overlap (module docstring)."""
        n = min(self._count, self.config.kmeans_window)
        warm = None
        if len(self._centers):
            warm = self._centers[np.argsort([-self._hits.get(int(p), 0) for p in self._ids], kind="stable")]
        labels, centers = choose_k(self._x[:n], self.config.table_size, self._rng, warm)
        self._sigma2 = float(((self._x[:n] - centers[labels]) ** 2).sum() / (n * DIMS))
        self._far, self._last = 0, self._count
        self._adopt(labels, centers)
        self.reclusterings += 1

    def _adopt(self, labels: np.ndarray, centers: np.ndarray) -> None:
        """Take ``centers`` (the window's first ``len(labels)`` members labelled ``labels``) as
        the phases: each cluster keeps the ID most of its members carried, largest cluster first."""
        n, k = len(labels), len(centers)
        old = self._window_ids[:n]
        sizes = np.bincount(labels, minlength=k)
        ids = np.full(k, -1, dtype=np.int64)
        taken: set = set()
        for j in np.argsort(-sizes, kind="stable"):
            carried = old[(labels == j) & (old >= 0)]
            if len(carried):
                values, counts = np.unique(carried, return_counts=True)
                for v in values[np.argsort(-counts, kind="stable")]:
                    if int(v) not in taken:
                        ids[j] = int(v)
                        break
            if ids[j] < 0:
                ids[j] = self.next_id
                self.next_id += 1
            taken.add(int(ids[j]))
        keep = sizes > 0
        self._reps = {int(ids[j]): self._fps[:n][labels == j].mean(axis=0) for j in np.nonzero(keep)[0]}
        self._centers, self._ids = centers[keep], ids[keep]

    def preload(self, representatives: Sequence[tuple], next_id: int) -> None:
        """Start from the representatives of earlier runs (a phase database): until the first
        re-clustering, intervals take the nearest of them; a later cluster of such intervals keeps
        its ID. New IDs start at ``next_id``."""
        reps = list(representatives)[: self.config.table_size]
        if reps:
            fps = np.array([np.asarray(fp, dtype=np.float64) for _, fp in reps])
            self._centers = self.project(fps)
            self._ids = np.array([int(p) for p, _ in reps], dtype=np.int64)
            self._reps = {int(p): fp for (p, _), fp in zip(reps, fps)}
            self.known.update(int(p) for p, _ in reps)
        self.next_id = max(self.next_id, int(next_id), max(self.known, default=-1) + 1)

    # -- read access --------------------------------------------------------------------------
    def table(self) -> List[dict]:
        """The current phases, one dict each (phase, hits, representative footprint)."""
        return [{"phase": int(p), "hits": int(self._hits.get(int(p), 0)), "last_used": 0,
                 "representative": self._reps[int(p)].tolist()} for p in self._ids if int(p) in self._reps]

    def representative(self, phase: int) -> Optional[np.ndarray]:
        rep = self._reps.get(phase)
        return None if rep is None else rep.copy()
