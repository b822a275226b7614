"""Phase tracker of Sherwood, Sair & Calder (ISCA 2003, section 4), vectorized with numpy.

Accumulator and footprint (hashed or projected): :mod:`phasescope.engine.footprint`; the table's
slots and eviction, and :class:`Match`: :mod:`phasescope.engine.phase_table`.

Classification: the Manhattan distance to every representative in a bounded table; the nearest
one strictly under ``threshold`` (a fraction of the interval) wins, else a new phase ID.
Update policy ``none`` (paper): a representative is never changed by a match. ``mean``: it
becomes the running mean of the footprints it matched (a centroid that follows slow drift).
Full table, policy ``evict`` (default): the least-recently-matched representative is dropped and
its slot holds the new phase, which gets a fresh ID (IDs are never reused, so statistics and
predictor tables never mix two phases; an evicted phase that comes back gets a new ID).
Policy ``nearest``: no new phase is created; the interval joins its nearest representative
although the distance is over the threshold (``new_phase`` is false, ``distance`` shows it).
Policy ``merge`` (online agglomeration, as k-means bounds SimPoint's k): if the interval is
nearer its nearest representative than the two closest representatives are to each other, it
joins that representative; otherwise those two are folded into one phase (the one matched by more
intervals keeps its ID, the representative becomes their hit-weighted mean) and the interval
starts a new phase in the freed slot. The table then holds the ``table_size`` most distinct
phases seen so far, and a phase split by early noise is folded back together.

Beyond the paper (issue 10; the ``coarse`` preset uses lfu and merge):

- ``evict_policy`` ``lfu``: a full table drops the phase matched by the fewest intervals (ties:
  the least recently matched) instead of the least recently matched one (``lru``), so the
  program's big phases keep their IDs while rare ones churn.
- ``transition`` (Lau, Schoenmackers & Calder, HPCA 2005): an interval that matches no stable
  phase gets the one transition ID (``TRANSITION``, 0; stable IDs then start at 1) and becomes a
  candidate in a small pool (``candidates`` entries, least recently matched dropped first). A
  candidate becomes a stable phase, with a new ID, when ``confirm`` intervals in all have matched
  it (stability rule; a segment counts its recorded units, which the segmenter found alike); the
  interval that confirms it is the first to carry that ID, and its ``Match.relabel`` gives the
  candidate's earlier intervals that ID too (the log settles them). A candidate's representative
  is the mean of its intervals. Candidates never evict stable phases. While the table holds no
  stable phase (a run's first interval) there is nothing to wait for or be near: the interval
  starts a stable phase at once. A phase database's phases are stable from the start.
- ``stay`` (hysteresis): an interval stays in its thread's current phase while it is within
  ``stay`` x threshold of that phase's representative, even when another representative is
  nearer (0: off, the nearest one wins). Intervals halfway between two neighbouring
  representatives then stop flipping between them.
- ``adaptive``: each stable phase's threshold is max(threshold, min(2 x threshold, mean + 2 sd
  of the distances of the intervals it matched)), so a phase whose intervals are noisy
  (shown by its own matches) accepts a little more.

Issue 28 (the ``stable`` preset):

- ``transition_label`` ``nearest``: with ``transition``, an interval that matches no stable phase
  carries its nearest phase's ID (``transition`` still set) instead of the shared ID 0, as
  k-means assigns every point to its nearest centroid; no interval carries ID 0 as the
  transition phase then, and stable IDs start at 0.
- ``recur`` (the ``confirmed`` preset, 40): with ``transition``, a candidate that no interval
  matches within ``recur`` intervals (of the whole stream) leaves the pool, as Lau et al. label
  intervals that do not recur soon as transitions: an interval that straddles two activities of a
  loop recurs once a round, and no longer becomes a phase of its own.
- ``apart`` with ``crowd`` (the ``confirmed`` preset, 2 and 18): once the table holds ``crowd``
  stable phases, a candidate is confirmed only when it is at least ``apart`` x the threshold from
  every one of them; else it leaves the pool and its intervals keep their nearest phase's ID. A
  loop whose body outlasts an interval shows each part of the body as a phase of its own, one
  fringe beside another (the truth workloads' libraries); a program's first phases stay as
  fine-grained as before (cc1's and the compressors' are 1-2 thresholds apart). A segment of
  several units (which needs no second interval) is held to the same rule.
- ``offshoot`` (the ``confirmed`` preset, 4; stop 46): with ``transition``, an interval that a
  stable phase matches beyond that phase's own spread (mean + 2 sd of its matches' distances,
  clipped to :data:`OFFSHOOT_FLOOR` x the threshold .. the threshold) still carries that phase,
  and is also offered to the candidate pool within :data:`OFFSHOOT_RADIUS` x the threshold;
  ``offshoot`` intervals that agree so closely confirm a new phase (``relabel`` as above). A noisy
  phase whose ``adaptive`` threshold widened over a tight neighbour (cc1), or a phase of identical
  intervals beside a step just under the threshold (tclsh), no longer swallows it.
- ``overlap`` (the ``confirmed`` preset, 0.45; stop 47): after a match, the phase and its nearest
  phase fold into one (``merged``; the one matched more often keeps its ID, and ``relabel`` gives it
  every earlier interval of the other) when their representatives are closer than ``overlap`` x
  the sum of their spreads (the mean distance of the intervals that carry each, transitions
  labelled with it included), each matched :data:`OVERLAP_LEAST` recorded units (a segment counts
  all of its): one noisy behaviour that the threshold cut into several phases (bzip2's) is one
  phase again; tight phases stay apart.
  A candidate within :data:`FOLDED_REACH` x the spread of a phase that has folded is not
  confirmed, so the folded behaviour's far intervals do not make new phases that fold again.
- ``retire`` (the ``confirmed`` preset, 10; stop 48): a phase matched fewer than ``retire`` units
  that no interval has matched for :data:`RETIRE_IDLE` intervals folds into the phase whose
  representative is nearest its own (``merged``, ``relabel``, as ``overlap``'s fold; that phase
  keeps its representative): the parts of a program's start and of the passages between its
  activities that recurred just enough to be confirmed no longer each keep an ID (truth-E's 43 IDs
  for SimPoint's 16). ``crowd`` counts the phases retired as still known.
- ``archive``: evicted phases (ID and representative) are kept, oldest dropped first; an interval
  that matches no phase in the table takes back the nearest archived one within the threshold.
- ``calibrate``: the threshold is ``calibrate`` x the median Manhattan distance between each
  thread's consecutive footprints (the last :data:`CALIBRATION_WINDOW`), clipped to
  [``threshold``, ``threshold_max``]: a program whose intervals all differ gets a wider one.
  ``calibrate_on`` ``nearest``: the distances are each interval's to the nearest of the last
  :data:`CALIBRATION_WINDOW` intervals, and ``calibrate_quantile`` picks the level (a program that
  jumps between tight phases, as cc1 does, has wide gaps but near neighbours; docs/quality.md).
  ``kmeans``: the distances are each interval's to its cluster's mean when SimPoint's k-means
  clusters the window; with ``drift_ratio`` (the ``drift`` preset), a window whose consecutive
  intervals are closer than that many times those distances drifts inside its clusters (bc),
  and its threshold is at least ``drift_floor``.

Sampled windows (issue 9; ``PRESETS["sampled"]``), whose footprints carry sampling noise:

- ``test`` ``manhattan`` with ``noise_z``: the threshold grows by ``noise_z`` times the Manhattan
  distance expected between two windows of the same representative (:meth:`Tracker.sampling_noise`).
- ``test`` ``multinomial`` (:mod:`phasescope.engine.multinomial`): a window's fit to each
  representative is the G statistic of its sample counts against the representative's smoothed
  distribution, scored as z = (G - mean) / sd of the G of windows drawn from that representative;
  the best-fitting representative matches when z is under ``noise_z``. ``threshold`` plays no
  part; ``distance`` is still reported as the Manhattan distance. Without sample counts (an
  exact stream) the Manhattan test applies.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from phasescope.engine.calibration import CALIBRATION_WINDOW, Calibration  # noqa: F401
from phasescope.engine.folds import FOLDED_REACH, OVERLAP_LEAST, RETIRE_IDLE, Folds  # noqa: F401
from phasescope.engine.footprint import footprints, manhattan
from phasescope.engine.multinomial import g_statistic, null_moments, smoothed
from phasescope.engine.phase_table import BoundedTable, Match
from phasescope.engine.config import (EVICT_POLICIES, FULL_POLICIES, MAX_INTERVAL, MAX_TABLE_CELLS,  # noqa: F401
                                      METHODS, MIN_INTERVAL, PRESETS, TESTS, TRANSITION_LABELS, UPDATE_POLICIES,
                                      TrackerConfig, preset)

TRANSITION = 0  # the transition phase's ID when ``transition`` is on
OFFSHOOT_FLOOR, OFFSHOOT_RADIUS = 0.75, 0.5  # ``offshoot``: x the threshold (docs/quality.md, stop 46)


class Tracker(Calibration, Folds, BoundedTable):
    """Accumulator, footprint and bounded phase table. Not thread-safe; one per process."""

    def __init__(self, config: Optional[TrackerConfig] = None):
        self.config = config or TrackerConfig()
        c = self.config
        self._scale = c.scale
        self._threshold_units = c.threshold * self._scale
        self._reps = np.zeros((c.table_size, c.buckets), dtype=np.float64)
        self._ids = np.full(c.table_size, -1, dtype=np.int64)
        self._hits = np.zeros(c.table_size, dtype=np.int64)
        self._units_in = np.zeros(c.table_size, dtype=np.int64)  # recorded units matched (a segment's all: ``overlap``, ``retire``)
        self._last_used = np.zeros(c.table_size, dtype=np.int64)
        self._dsum = np.zeros(c.table_size)  # distances of matched intervals (adaptive threshold)
        self._dsq = np.zeros(c.table_size)
        self._carried = np.zeros((c.table_size, 2))  # ``overlap``: distances of the intervals carrying each phase, and how many
        self._folded = np.zeros(c.table_size, dtype=bool)  # ``overlap``: the phase has taken another in
        self._prior = np.zeros(c.table_size)  # ``overlap``: a folded phase's spread as a phase database saved it
        self._used = 0
        self._clock = 0
        # ID 0 is the transition phase's only where an interval can carry it (``transition_label``)
        self.next_id = 1 if c.transition and c.transition_label == "transition" else 0
        self.evictions = 0
        self._cand_reps = np.zeros((c.candidates, c.buckets)) if c.transition else None
        self._cand_hits = np.zeros(c.candidates, dtype=np.int64)
        self._cand_last = np.zeros(c.candidates, dtype=np.int64)
        self._cand_seqs: List[List[int]] = [[] for _ in range(c.candidates)]  # each one's intervals (clock - 1)
        self._cand_used = 0
        self._samples: Optional[float] = None  # sample count of the footprint being classified
        self._units = 1  # recorded units merged into the footprint being classified
        self._null: dict = {}  # slot -> (samples, mean, sd) of its G null distribution (multinomial test)
        self.known: set = set()  # phase IDs preloaded from earlier runs (a phase database)
        self._current: dict = {}  # thread -> phase of its last interval (for ``stay``)
        self.merges = 0
        self.retired = 0  # ``retire``: short-lived phases folded into their nearest
        self.retired_reps: List[np.ndarray] = []  # ``retire``: their representatives, this run
        self._retired_before: List[np.ndarray] = []  # ``retire``: those a phase database saved
        self._archive_reps = np.zeros((c.archive, c.buckets))  # evicted phases, oldest dropped first
        self._archive_ids = np.full(c.archive, -1, dtype=np.int64)
        self._archive_next = 0
        self.restored = 0  # recurrences that got their archived ID back
        self._init_calibration()
        self._settled: Optional[List[int]] = [] if c.overlap or c.retire else None  # each interval's phase, relabels applied

    # -- accumulator and footprint ------------------------------------------------------------
    def footprints(self, keys: Sequence[np.ndarray], counts: Sequence[np.ndarray]):
        """:func:`phasescope.engine.footprint.footprints` with this tracker's configuration."""
        return footprints(self.config, keys, counts)

    # -- classification -----------------------------------------------------------------------
    def classify(self, footprint: np.ndarray) -> Match:
        """Classify one footprint (see the module docstring)."""
        return self.classify_many(np.asarray(footprint, dtype=np.float64)[None, :])[0]

    def classify_many(self, footprints: np.ndarray, samples: Optional[np.ndarray] = None,
                      threads: Optional[np.ndarray] = None, units: Optional[np.ndarray] = None) -> List[Match]:
        """Classify footprints in order; same result as calling :meth:`classify` on each.
        ``samples``: each footprint's sample count, for the noise term of ``noise_z``; ``threads``:
        each footprint's thread (for ``stay``; None: all one thread); ``units``: the recorded units
        each one merges (a segment, engine/segments.py; None: 1 each), which ``confirm`` counts."""
        f = np.asarray(footprints, dtype=np.float64)
        n, size = len(f), self.config.table_size
        dist = np.empty((n, min(size, self._used + n)), dtype=np.float64)  # n rows add <= n slots
        if self._used:
            dist[:, : self._used] = manhattan(f, self._reps[: self._used])
        out = []
        for i in range(n):
            self._clock += 1
            self._samples = None if samples is None else float(samples[i])
            self._units = 1 if units is None else int(units[i])
            thread = 0 if threads is None else int(threads[i])
            if self.config.calibrate:
                self._calibrate(f[i], thread)
            match, slots = self._classify_row(f[i], dist[i, : self._used], self._current.get(thread))
            if self.config.retire and match.relabel is None and match.merged is None:
                match, slots = self._retire(match, slots)
            self._current[thread] = match.phase
            if self._settled is not None:
                for seq in match.relabel_seqs or ():
                    self._settled[seq] = match.relabel
                self._settled.append(match.phase)
            out.append(match)
            if slots and i + 1 < n:
                dist[i + 1 :, slots] = manhattan(f[i + 1 :], self._reps[slots])
        return out

    def _spread(self, slots) -> np.ndarray:
        """Mean + 2 sd of the distances of the intervals each stable slot matched, in footprint units."""
        n = np.maximum(self._hits[slots] - 1, 1)  # the founding interval adds no distance
        mean = self._dsum[slots] / n
        return mean + 2 * np.sqrt(np.maximum(self._dsq[slots] / n - mean**2, 0))

    def _thresholds(self, slots) -> np.ndarray:
        """Match threshold of stable slots, in footprint units."""
        base = self._threshold_units
        if not self.config.adaptive:
            thr = np.full(len(slots), base)
        else:
            thr = np.clip(self._spread(slots), base, 2 * base)
        if self.config.noise_z and self._samples:
            thr = thr + self.config.noise_z * self.sampling_noise(self._reps[slots], self._samples)
        return thr

    def sampling_noise(self, reps: np.ndarray, samples: float) -> np.ndarray:
        """Expected Manhattan distance (footprint units) between two footprints of ``samples``
        samples each drawn from each representative's bucket fractions p: the sum over buckets of
        E|X - Y| for X - Y ~ Normal(0, 2 p (1 - p) / samples), i.e. sqrt(2/pi) times its sd."""
        p = np.clip(np.atleast_2d(reps) / self._scale, 0.0, 1.0)
        return self._scale * np.sqrt(2 / np.pi) * np.sqrt(2 * p * (1 - p) / samples).sum(axis=1)

    def fit_z(self, fp: np.ndarray, samples: float) -> np.ndarray:
        """Multinomial test: z of a footprint of ``samples`` samples against every representative
        in the table (see :mod:`phasescope.engine.multinomial`); lower fits better."""
        n = int(round(samples))
        q = smoothed(self._reps[: self._used] / self._scale, n)
        g = g_statistic(fp * (n / self._scale), q)
        z = np.empty(self._used)
        for slot in range(self._used):
            null = self._null.get(slot)
            if null is None or null[0] != n:
                null = self._null[slot] = (n, *null_moments(q[slot], n))
            z[slot] = (g[slot] - null[1]) / max(null[2], 1e-9)
        return z

    def _classify_row(self, fp: np.ndarray, row: np.ndarray, current: Optional[int]):
        """Match one footprint given its distances to the table and its thread's current phase;
        returns (Match, slots whose representative changed)."""
        c = self.config
        best, d, stay, fits = -1, None, None, False
        if len(row):
            if c.test == "multinomial" and self._samples:
                z = self.fit_z(fp, self._samples)
                best = int(z.argmin())
                fits = bool(z[best] < c.noise_z)
            else:
                if c.adaptive or (c.noise_z and self._samples):  # nearest among the phases whose own threshold it is under
                    under = row < self._thresholds(np.arange(len(row)))
                    best = int(np.where(under, row, np.inf).argmin()) if under.any() else int(row.argmin())
                else:
                    best = int(row.argmin())
                fits = bool(row[best] < self._thresholds([best])[0])
            d = float(row[best])
            stay = self._stay_slot(row, current)
        if stay is not None:
            best, d, fits = stay, float(row[stay]), True
        full = self._used == c.table_size
        pair = self._closest_pair() if full and c.full_policy == "merge" and best >= 0 and not fits else None
        base, offshoot = self._threshold_units, None
        waits = bool(c.offshoot and fits and d >= float(np.clip(self._spread([best])[0], OFFSHOOT_FLOOR * base, base)))
        if waits:  # also a candidate's: a later interval may relabel it (``revisable``)
            offshoot = self._match_candidate(fp, OFFSHOOT_RADIUS * base, c.offshoot)
        if offshoot is None and best >= 0 and (fits or (full and c.full_policy == "nearest") or (pair is not None and d <= pair[0])):
            self._hits[best] += 1
            self._units_in[best] += self._units
            self._last_used[best] = self._clock
            self._dsum[best] += d
            self._dsq[best] += d * d
            self._carried[best] += (d, 1)
            changed, gone = [], None
            if c.update_policy == "mean":
                self._reps[best] += (fp - self._reps[best]) / self._hits[best]
                self._null.pop(best, None)
                changed = [best]
            other = self._overlapping(best) if c.overlap else None
            if other is not None:
                gone, folded = self._fold(best, other)
                changed = sorted(set(changed) | set(folded))
                return Match(gone[1], d / self._scale, False, merged=gone, relabel=gone[1], relabel_seqs=self._seqs_of(gone[0]),
                             revisable=waits), changed
            return Match(int(self._ids[best]), d / self._scale, False, revisable=waits), changed
        dist = None if d is None else d / self._scale
        hits, phase, earlier = 1, None, ()
        back = self._restore(fp)
        if back is not None:
            phase, fp = back
        elif c.transition and self._used:  # an empty table has nothing to wait for: a phase at once
            cand = offshoot or self._match_candidate(fp)
            if cand is None:
                label = int(self._ids[best]) if c.transition_label == "nearest" else TRANSITION
                self._carried[best] += (d, c.transition_label == "nearest")
                return Match(label, dist, False, None, True), []
            fp, hits, earlier = cand
        merged, changed = None, []
        if pair is not None:
            merged, changed = self._fold(pair[1], pair[2])
        slot, evicted = self._take_slot()
        if evicted is not None and c.archive:
            self._archive_ids[self._archive_next % c.archive] = evicted
            self._archive_reps[self._archive_next % c.archive] = self._reps[slot]
            self._archive_next += 1
        new = phase is None
        if new:
            phase = self.next_id
            self.next_id += 1
        self._reps[slot] = fp
        self._null.pop(slot, None)
        self._ids[slot] = phase
        self._hits[slot] = hits
        self._units_in[slot] = max(hits, self._units)
        self._dsum[slot] = self._dsq[slot] = 0.0
        self._carried[slot], self._folded[slot], self._prior[slot] = 0.0, False, 0.0
        self._last_used[slot] = self._clock
        return (Match(phase, dist, new, evicted, merged=merged, relabel=phase if earlier else None,
                      relabel_seqs=earlier or None), sorted(set(changed) | {slot}))

    def _restore(self, fp: np.ndarray) -> Optional[Tuple[int, np.ndarray]]:
        """``archive``: (ID, representative) of the nearest evicted phase within the threshold of
        ``fp``, taken out of the archive; else None."""
        n = min(self._archive_next, self.config.archive)
        if not n:
            return None
        dist = np.abs(self._archive_reps[:n] - fp).sum(axis=1)
        dist[self._archive_ids[:n] < 0] = np.inf
        j = int(dist.argmin())
        if dist[j] >= self._threshold_units:
            return None
        self._archive_ids[j], phase = -1, int(self._archive_ids[j])
        self.restored += 1
        return phase, self._archive_reps[j].copy()

    def _stay_slot(self, row: np.ndarray, current: Optional[int]) -> Optional[int]:
        """``stay``: the slot of the thread's current phase when the interval is within ``stay`` x
        that phase's threshold of it, else None."""
        if not self.config.stay or current is None:
            return None
        hit = np.nonzero(self._ids[: self._used] == current)[0]
        if not len(hit):
            return None
        s = int(hit[0])
        return s if row[s] < self.config.stay * self._thresholds([s])[0] else None

    def _closest_pair(self):
        """(distance, slot, slot) of the two nearest representatives of a full table."""
        r = self._reps[: self._used]
        d = manhattan(r, r)
        d[np.diag_indices(len(r))] = np.inf
        i, j = np.unravel_index(int(d.argmin()), d.shape)
        return float(d[i, j]), int(i), int(j)

    def _match_candidate(self, fp: np.ndarray, radius: Optional[float] = None, need: Optional[int] = None):
        """Transition mode, no stable match (or an ``offshoot``: within ``radius`` units, ``need``
        intervals): match or add a candidate. Returns (representative, intervals, the earlier
        intervals' sequence numbers) of a candidate confirmed by this interval (removed from the
        pool), else None."""
        c = self.config
        radius, need = self._threshold_units if radius is None else radius, c.confirm if need is None else need
        if c.recur:
            self._expire(self._clock - c.recur)
        n = self._cand_used
        if n:
            dist = np.abs(self._cand_reps[:n] - fp).sum(axis=1)
            j = int(dist.argmin())
            if dist[j] < radius:
                self._cand_hits[j] += self._units
                self._cand_last[j] = self._clock
                self._cand_reps[j] += (fp - self._cand_reps[j]) * self._units / self._cand_hits[j]
                if self._cand_hits[j] < need:
                    self._cand_seqs[j].append(self._clock - 1)
                    return None
                rep, hits, earlier = self._cand_reps[j].copy(), int(self._cand_hits[j]), tuple(self._cand_seqs[j])
                last = n - 1  # remove j: move the last candidate into its place
                self._cand_reps[j], self._cand_hits[j], self._cand_last[j], self._cand_seqs[j] = \
                    self._cand_reps[last], self._cand_hits[last], self._cand_last[last], self._cand_seqs[last]
                self._cand_used -= 1
                return self._confirmed(rep, hits, earlier)
        if self._units >= need:  # a segment whose own units agree (segments.py cut none between them)
            return self._confirmed(fp, self._units, ())
        j = n if n < c.candidates else int(self._cand_last[:n].argmin())
        self._cand_used = max(n, j + 1)
        self._cand_reps[j] = fp
        self._cand_hits[j] = self._units
        self._cand_last[j] = self._clock
        self._cand_seqs[j] = [self._clock - 1]
        return None

    def _confirmed(self, rep: np.ndarray, hits: int, earlier: tuple):
        """A candidate with evidence enough: (representative, intervals, earlier sequence numbers)
        of the new phase, or None when ``apart`` finds it a fringe of a known phase in a table of
        ``crowd`` phases or more, or ``overlap`` finds it within :data:`FOLDED_REACH` x the spread
        of a phase that has folded another in, or ``retire`` within the threshold of a phase that a
        phase database saw retired (its intervals keep their nearest phase)."""
        c = self.config
        if c.apart and self._used + self.retired >= c.crowd:
            d = np.abs(self._reps[: self._used] - rep).sum(axis=1)
            if (d < c.apart * self._thresholds(np.arange(self._used))).any():
                return None
        if c.overlap and self._folded[: self._used].any():
            d = np.abs(self._reps[: self._used] - rep).sum(axis=1)
            if (d < FOLDED_REACH * self._reach() * self._folded[: self._used]).any():
                return None
        if c.retire and self._was_retired(rep):
            return None
        return rep, hits, earlier

    def _expire(self, since: int) -> None:
        """Drop the candidates last matched before clock ``since``."""
        n = self._cand_used
        keep = np.flatnonzero(self._cand_last[:n] >= since)
        if len(keep) < n:
            k = len(keep)
            self._cand_reps[:k], self._cand_hits[:k], self._cand_last[:k] = \
                self._cand_reps[keep], self._cand_hits[keep], self._cand_last[keep]
            self._cand_seqs[:k] = [self._cand_seqs[j] for j in keep]
            self._cand_used = k

    def preload(self, representatives: Sequence[tuple], next_id: int, folded: Optional[dict] = None,
                retired: Sequence = ()) -> None:
        """Start from the representatives of earlier runs (a phase database): ``(phase, footprint)``
        pairs, at most ``table_size`` (the first ones are kept), into an empty table. Phase IDs
        created from now on start at ``next_id``; the preloaded IDs are in :attr:`known`.
        ``folded``: phase -> spread of the phases that had folded another in (:meth:`folded_spreads`);
        ``retired``: the representatives of phases retired (:meth:`retired_representatives`)."""
        if self._used:
            raise ValueError("preload needs an empty phase table")
        for phase, fp in list(representatives)[: self.config.table_size]:
            slot = self._used
            self._reps[slot] = np.asarray(fp, dtype=np.float64)
            self._ids[slot] = int(phase)
            self._hits[slot] = self._units_in[slot] = 1  # the representative itself (update policy mean averages from it)
            self._last_used[slot] = 0
            if folded and int(phase) in folded:
                self._folded[slot], self._prior[slot] = True, float(folded[int(phase)])
            self._used += 1
            self.known.add(int(phase))
        self._retired_before = [np.asarray(r, dtype=np.float64) for r in retired]
        self.next_id = max(self.next_id, int(next_id), max(self.known, default=-1) + 1)

    # -- read access --------------------------------------------------------------------------
    def display(self, footprint: np.ndarray) -> np.ndarray:
        """The footprint as the dashboard and plots show it (this tracker's own)."""
        return footprint

    def table(self) -> List[dict]:
        """Current phase table, one dict per representative (phase, hits, representative)."""
        return [
            {"phase": int(self._ids[s]), "hits": int(self._hits[s]), "last_used": int(self._last_used[s]),
             "representative": self._reps[s].tolist()}
            for s in range(self._used)
        ]

    def representative(self, phase: int) -> Optional[np.ndarray]:
        """A copy of the representative footprint of ``phase``, None if not (or no longer) in the table."""
        hit = np.nonzero(self._ids[: self._used] == phase)[0]
        return self._reps[hit[0]].copy() if len(hit) else None
