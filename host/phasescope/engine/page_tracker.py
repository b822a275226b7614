"""The page tracker: phases of sampled windows (``--tracker pages``, the sampled-mode default).

The paper's tracker (:mod:`phasescope.engine.tracker`) compares one interval with a representative
under one fixed threshold. A window of 100 CPU-clock samples is too noisy for that: two windows of
one activity spread over many code pages differ by 0.5-1.0 of L1, the threshold that covers this
covers neighbouring activities too, and a representative that averages in every match drifts
until one phase holds the whole run (issue 15). This tracker keeps the paper's shape (a bounded
table of representatives shared by a process's threads, a leader-follower that is online and
O(table) per window) and changes five things:

- **Vector.** Samples per 4 KiB code page (``key >> 12``: the stable keys of
  :mod:`phasescope.sources.modules` keep a module's pages apart across runs), hashed into
  ``buckets`` (1024) and normalised to sum 1. Distances are L1, 0..2, as fractions of the window.
  A small program, whose first window falls in at most ``SMALL_PAGES`` pages, is measured in
  64-byte lines instead (its phases may be functions that share a page); the choice is made once
  per tracker (:attr:`PageTracker.shift`) and kept in the phase database.
- **Hysteresis per thread.** A window stays in its thread's current phase while it is within that
  phase's *stay* threshold (unless another phase is nearer by ``SWITCH_MARGIN`` and within its
  match threshold); it moves to another phase only when it is within that phase's *match*
  threshold. Each phase calibrates both from the distances of its own first ``CALIBRATION``
  matches (mean + ``Z`` sd), clamped to [``STAY_FLOOR``, ``STAY_CAP``] and [``MATCH_FLOOR``,
  ``threshold``], then freezes them: an allowance never grows past its cap, whatever the phase
  absorbs later.
- **Evidence for new phases.** A window that fits no phase is held (it keeps the current phase) and
  a new phase is made only when the next window agrees with it (L1 under ``AGREE``: two windows of
  one activity spread over many pages differ by up to 1.0), from the mean of the two: a window that
  straddles two activities makes no phase of its own. A window
  further than ``JUMP`` from every phase (it shares under 20% of its samples with any) is new
  code beyond doubt and starts its phase at once. When the next window leaves the current phase
  too, agreeing with the held one or matching another phase that the held one is nearer to than
  to the current one, the held one is relabelled with the phase the next one goes to
  (``Match.relabel``: the log corrects it one window late; the live view showed the change once
  it was sure). Likewise a run of one window between two runs of one phase (an odd window that
  matched another phase) is relabelled with that phase when the next window returns to it.
- **A young phase folds into an older one its centre comes onto.** A phase calibrated tight on
  its first windows can leave later windows of its own activity outside it; two of them then make
  a new phase whose centre converges on the first's. While it has at most ``YOUNG`` windows, every
  ``FOLD_EVERY`` matches, a phase whose centre is within ``FOLD`` x the smaller of the two match
  thresholds of an older phase folds into it (``Match.merged``): the older takes its windows (the
  log relabels them), its spread (its threshold widens) and the threads in it. A window of the
  young phase that a later look-back moved elsewhere goes with it (rare).
- **One activity, two mixtures of the same pages: one phase, two centres.** An activity can come
  back running the same code pages in other shares (liblzma's two hottest pages 0.6 / 0.3 in one
  occurrence, 0.3 / 0.5 in a later one: 0.6-0.8 apart, beyond its match threshold). A window pair
  that would make a new phase instead becomes a second centre of the nearest phase (same ID) when
  it is within ``AGREE`` of it and each puts at least ``SAME_PAGES`` of its samples on pages the
  other uses (the other's buckets over ``SUPPORT``): two activities on one engine still differ in
  some of their pages (10-20% on the tuning half). Only while a slot is free (no eviction for it).
- **A phase that holds two activities splits** (``--tracker split``, off by default). Two activities on one engine (point queries and
  updates of SQLite) can be nearer each other than a window is to its own centre, and share one
  phase. Each phase clusters its recent windows in two now and then, and splits when the two
  groups take turns in runs (:mod:`phasescope.engine.phase_split`). A thread then moves between
  the two (siblings) when ``LEAN`` windows in a row are nearer the other, whatever the margin.
- **Representatives that do not blur.** A match moves the representative by 1/min(n, ``MEMORY``)
  (the running mean of its first ``MEMORY`` windows, then an exponential average that follows slow
  drift): a run of windows of another activity cannot match in the first place.

Full table: the least often (``lfu``) or least recently (``lru``) matched phase is dropped; IDs are
never reused. Chosen on bench/truth/run.py's tuning half (see docs/sampled-mode.md and docs/quality.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from phasescope.engine.arrays import unique
from phasescope.engine.footprint import bucket_index
from phasescope.engine.phase_split import Splitter
from phasescope.engine.phase_table import BoundedTable, Match

PAGE_SHIFT = 12
LINE_SHIFT = 6
SMALL_PAGES = 8
STAY_FLOOR, STAY_CAP = 0.4, 0.8
MATCH_FLOOR = 0.5
SWITCH_MARGIN = 0.2
Z = 2.0
CALIBRATION = 50
JUMP = 1.6
MEMORY = 40
AGREE = 1.0
LEAN = 2  # windows in a row nearer a sibling phase that move a thread there
_SETTLED = 5  # matches before a phase's own thresholds replace the caps
YOUNG = 32  # windows of a phase during which it folds into an older phase its centre comes near
FOLD = 0.4  # ... nearer than this fraction of the smaller of the two match thresholds
FOLD_EVERY = 8  # matches between two looks (the first at 8)
DISPLAY_BUCKETS = 32
SAME_PAGES = 0.95  # a new window pair this much on the nearest phase's pages, and it on theirs: that phase
SUPPORT = 0.01  # a centre's pages: its buckets over this share


class PageTracker(BoundedTable):
    """Sparse code-page vectors, per-thread hysteresis and self-calibrated thresholds (module
    docstring). The same interface as :class:`~phasescope.engine.tracker.Tracker`; one per process."""

    def __init__(self, config):
        self.config = config
        c = config
        self._reps = np.zeros((c.table_size, c.buckets))
        self._ids = np.full(c.table_size, -1, dtype=np.int64)
        self._hits = np.zeros(c.table_size, dtype=np.int64)
        self._last_used = np.zeros(c.table_size, dtype=np.int64)
        self._cal = np.zeros((c.table_size, 3))  # calibration: matches, sum, sum of squares of distances
        self._spreads: Optional[np.ndarray] = None  # :meth:`_spread`'s, None when stale
        self._used = 0
        self._clock = 0
        self._current: Dict[int, int] = {}  # thread -> slot of its current phase
        self._held: Dict[int, Tuple[np.ndarray, int]] = {}  # thread -> the window that fitted no phase, its seq
        #: thread -> (the phase before its current run, that run's phase, the run's seq while it is one
        #: window long and that window relabelled nothing, else None): :meth:`_settle`'s look-back
        self._runs: Dict[int, Tuple[Optional[int], Optional[int], Optional[int]]] = {}
        self._split = Splitter(c.buckets) if c.split else None  # --tracker split
        self._ticks: Dict[int, int] = {}  # thread -> its windows classified
        self._siblings: Dict[int, set] = {}  # slot -> the slots split from it or it from them
        #: thread -> (the sibling slot its last windows were nearer, their seqs)
        self._leaning: Dict[int, Tuple[int, Tuple[int, ...]]] = {}
        self._unannounced: set = set()  # phases a split made that no window has shown yet
        self._young: Dict[int, Tuple[int, List[int]]] = {}  # slot -> (its phase, the seqs of its windows) while young
        self.next_id = 0
        self.evictions = 0
        self.merges = 0
        self.splits = 0
        self.known: set = set()
        #: code granularity, log2 bytes: PAGE_SHIFT, or LINE_SHIFT for a small program (None: not
        #: chosen yet; the first window chooses)
        self.shift: Optional[int] = None

    # -- vectors ------------------------------------------------------------------------------
    def footprints(self, keys: Sequence[np.ndarray], counts: Sequence[np.ndarray]):
        """Page vectors of many windows: shape (n, buckets), rows summing to 1, and each total."""
        n, nb = len(keys), self.config.buckets
        if self.shift is None:
            first = next((np.asarray(k, dtype=np.uint64) for k in keys if len(k)), None)
            if first is not None:
                pages = len(unique(np.right_shift(first, np.uint64(PAGE_SHIFT))))
                self.shift = LINE_SHIFT if pages <= SMALL_PAGES else PAGE_SHIFT
        if n == 1:  # a live window: no rows to offset (seven numpy calls fewer, the same vector)
            flat, weights = np.asarray(keys[0]), np.asarray(counts[0])
        else:
            flat = np.concatenate(keys) if n else np.zeros(0, np.uint64)
            weights = np.concatenate(counts) if n else np.zeros(0)
        idx = bucket_index(np.right_shift(flat.astype(np.uint64), np.uint64(self.shift or PAGE_SHIFT)), nb)
        if n > 1:
            idx += np.repeat(np.arange(n, dtype=np.int64) * nb, np.fromiter((len(k) for k in keys), np.int64, n))
        acc = np.bincount(idx, weights=weights, minlength=n * nb).reshape(n, nb)
        total = acc.sum(axis=1)
        np.divide(acc, total[:, None], out=acc, where=total[:, None] > 0)
        return acc, total

    def display(self, footprint: np.ndarray) -> np.ndarray:
        """A footprint folded to 32 buckets summing to 32 (the dashboard's Figure 3 units)."""
        nb = self.config.buckets
        fold = footprint.reshape(DISPLAY_BUCKETS, nb // DISPLAY_BUCKETS) if nb % DISPLAY_BUCKETS == 0 else None
        return DISPLAY_BUCKETS * (fold.sum(axis=1) if fold is not None else footprint[:DISPLAY_BUCKETS])

    # -- classification -----------------------------------------------------------------------
    def classify_many(self, footprints: np.ndarray, samples=None, threads=None, units=None) -> List[Match]:
        """Classify page vectors in order; ``threads``: each one's thread (None: all one thread;
        ``samples`` and ``units`` play no part)."""
        out = []
        for i, v in enumerate(np.asarray(footprints, dtype=np.float64)):
            self._clock += 1
            t = 0 if threads is None else int(threads[i])
            self._ticks[t] = self._ticks.get(t, 0) + 1
            out.append(self._settle(self._fold(self._classify(v, t), t), t))
        return out

    def classify(self, footprint: np.ndarray, thread: int = 0) -> Match:
        """Classify one page vector of ``thread``."""
        self._clock += 1
        self._ticks[thread] = self._ticks.get(thread, 0) + 1
        return self._settle(self._fold(self._classify(np.asarray(footprint, dtype=np.float64), thread), thread),
                            thread)

    def _distances(self, v: np.ndarray) -> np.ndarray:
        """L1 distance (0..2) of a normalised vector to every representative: 2 - 2 x overlap."""
        nz = np.flatnonzero(v)
        overlap = np.minimum(self._reps[: self._used][:, nz], v[nz]).sum(axis=1)
        return np.maximum(2.0 - 2.0 * overlap, 0.0)

    def _spread(self) -> np.ndarray:
        """Each used slot's own threshold, mean + Z sd of its calibration distances (NaN until
        settled): kept until a calibration changes, since most windows change none."""
        if self._spreads is None or len(self._spreads) != self._used:
            n, s, sq = self._cal[: self._used].T
            nn = np.maximum(n, 1)
            mean = s / nn
            sd = np.sqrt(np.maximum(sq / nn - mean**2, 0.0))
            self._spreads = np.where(n >= _SETTLED, mean + Z * sd, np.nan)
        return self._spreads

    def _threshold(self, floor: float, cap: float) -> np.ndarray:
        """Every used slot's threshold: its own spread within [floor, cap], ``cap`` until settled."""
        spread = self._spread()
        return np.where(np.isnan(spread), cap, np.clip(spread, floor, cap))

    def _stay(self, slot: int) -> float:
        """The distance under which a thread stays in its current phase's ``slot``."""
        spread = float(self._spread()[slot])
        return STAY_CAP if spread != spread else min(max(spread, STAY_FLOOR), STAY_CAP)

    def _settle(self, m: Match, thread: int) -> Match:
        """Two-window look-back: a run of one window between two runs of one phase (an odd window that
        matched another phase, or a straddling one) is that phase after all (``relabel``)."""
        seq = self._clock - 1
        before, phase, single = self._runs.get(thread, (None, None, None))
        if m.phase == phase:
            self._runs[thread] = before, phase, None
        elif single is not None and m.phase == before and m.relabel is None:
            self._runs[thread] = None, m.phase, None
            m = replace(m, relabel=m.phase, relabel_seqs=(single,))
        else:
            single = seq if m.relabel is None else None
            self._runs[thread] = phase, m.phase, single
            if single is not None:
                m = replace(m, revisable=True)
        return m

    def _fold(self, m: Match, thread: int) -> Match:
        """A young phase whose centre has come within ``FOLD`` of an older phase's match threshold is
        that phase after all (one activity whose first windows happened to calibrate it tight): it
        folds into the older one, which takes its windows (``relabel``, ``merged``) and their spread."""
        slot = self._current.get(thread)
        if slot is None or self._split is not None:
            return m
        phase = int(self._ids[slot])
        if self._hits[slot] > YOUNG:
            self._young.pop(slot, None)
            return m
        young = self._young.get(slot)
        if young is None or young[0] != phase:  # a new phase in this slot
            young = self._young[slot] = phase, []
        if m.relabel == phase:
            young[1].extend(m.relabel_seqs)
        if m.phase == phase:
            young[1].append(self._clock - 1)
        if self._hits[slot] % FOLD_EVERY or m.phase != phase or (m.relabel is not None and m.relabel != phase):
            return m
        older = np.flatnonzero((self._ids[: self._used] >= 0) & (self._ids[: self._used] < phase))
        thresholds = self._threshold(MATCH_FLOOR, self.config.threshold)
        d = self._distances(self._reps[slot])[older]
        near = d < FOLD * np.minimum(thresholds[older], thresholds[slot])
        if not near.any():
            return m
        into = int(older[np.argmin(np.where(near, d, np.inf))])
        n, k = self._hits[into], self._hits[slot]
        self._reps[into] = (n * self._reps[into] + k * self._reps[slot]) / (n + k)
        self._hits[into] += k
        self._cal[into] += self._cal[slot]  # its threshold now holds the windows that fell outside it
        self._last_used[into] = self._clock
        for t, s in self._current.items():
            if s == slot:
                self._current[t] = into
        self._ids[slot], self._hits[slot], self._last_used[slot] = -1, 0, 0
        self._reps[slot] = 0.0  # 2.0 from every window: matched by none, the first slot reused
        self._cal[slot] = 0.0
        self._spreads = None
        self._unannounced.discard(phase)
        self.merges += 1
        kept = int(self._ids[into])
        seqs = tuple(self._young.pop(slot)[1])
        return replace(m, phase=kept, new_phase=False, merged=(phase, kept), relabel=kept, relabel_seqs=seqs)

    def _classify(self, v: np.ndarray, thread: int) -> Match:
        leaning = self._leaning.pop(thread, None)
        d = self._distances(v)
        cur = self._current.get(thread)
        nearest = float(d.min()) if len(d) else None
        if cur is not None and self._ids[cur] < 0:
            cur = None  # its phase was evicted
        if not len(d) or nearest > JUMP:
            return self._new(v, thread, nearest)
        rel = d / self._threshold(MATCH_FLOOR, self.config.threshold)
        best = int(rel.argmin())
        if cur is not None and d[cur] < self._stay(cur) and not (
                best != cur and rel[best] < 1 and d[best] < d[cur] - SWITCH_MARGIN):
            self._held.pop(thread, None)
            return self._sibling_or_stay(cur, v, d, thread, leaning)
        if rel[best] < 1 and best != cur:
            held, seq = self._held.pop(thread, (None, None))
            m = self._match(best, v, d[best], thread)
            if held is not None and cur is not None:
                dh = self._distances(held)
                if dh[best] < dh[cur]:  # the held window was more of the phase this one went to
                    m = replace(m, relabel=m.phase, relabel_seqs=(seq,))
            return m
        held, seq = self._held.pop(thread, (None, None))
        if held is not None and float(np.abs(held - v).sum()) < AGREE:
            both = (held + v) / 2
            d2 = self._distances(both)
            rel2 = d2 / self._threshold(MATCH_FLOOR, self.config.threshold)
            best = int(rel2.argmin())
            if rel2[best] < 1:
                m = self._match(best, both, d2[best], thread, distance=nearest)
            else:
                m = self._new(both, thread, nearest)
            return replace(m, relabel=m.phase, relabel_seqs=(seq,))
        self._held[thread] = v, self._clock - 1
        if cur is None:  # nothing to keep: start a phase now
            return self._new(v, thread, nearest)
        self._hits[cur] += 1
        self._last_used[cur] = self._clock
        return Match(int(self._ids[cur]), nearest, False, held=True)

    def _sibling_or_stay(self, cur: int, v: np.ndarray, d: np.ndarray, thread: int,
                         before: Optional[Tuple[int, Tuple[int, ...]]]) -> Match:
        """A window that stays in its thread's phase ``cur``, unless it and the ``LEAN`` - 1 windows
        before are all nearer a phase split from ``cur`` (:mod:`.phase_split`; two activities on one
        engine are nearer their own centres by less than any margin, window by window): then they
        all go there (the earlier ones relabelled). ``before``: (the sibling slot, the seqs) that the
        windows before leaned to."""
        sibs = [s for s in self._siblings.get(cur, ()) if self._ids[s] >= 0 and d[s] < d[cur]]
        if not sibs:
            return self._match(cur, v, d[cur], thread)
        sib = min(sibs, key=lambda s: d[s])
        seqs = (before[1] if before is not None and before[0] == sib else ()) + (self._clock - 1,)
        if len(seqs) >= LEAN:
            m = self._match(sib, v, d[sib], thread)
            return replace(m, relabel=m.phase, relabel_seqs=seqs[:-1])
        self._leaning[thread] = sib, seqs
        return replace(self._match(cur, v, d[cur], thread), revisable=True)

    def _match(self, slot: int, v: np.ndarray, dist: float, thread: int, distance=None) -> Match:
        self._hits[slot] += 1
        self._last_used[slot] = self._clock
        if self._hits[slot] > _SETTLED and self._cal[slot, 0] < CALIBRATION:  # against a settled centre
            self._cal[slot] += (1.0, dist, dist * dist)
            self._spreads = None
        self._reps[slot] += (v - self._reps[slot]) / min(self._hits[slot], MEMORY)
        self._current[thread] = slot
        evicted = self._split_phase(slot) if self._split is not None and \
            self._split.add(slot, thread, self._ticks.get(thread, 0), v) else None
        phase = int(self._ids[self._current[thread]])
        new = phase in self._unannounced
        self._unannounced.discard(phase)
        return Match(phase, float(dist if distance is None else distance), new, evicted)

    def _split_phase(self, slot: int) -> Optional[int]:
        """Split ``slot`` in two when its recent windows are two activities (:class:`Splitter`): it
        keeps its ID with the older group's centre; the newer group becomes a new phase, a sibling,
        and the threads whose last window was of that group are in it now. The phase ID evicted to
        make room, if any."""
        if self._used == self.config.table_size and self._victim() == slot:
            return None  # a full table would drop the phase being split
        found = self._split.split(slot)
        if found is None:
            return None
        older, newer, n_older, n_newer, last = found
        other, evicted = self._fresh_slot()
        phase = self.next_id
        self.next_id += 1
        self._place(other, phase, newer)
        self._reps[slot] = older
        self._hits[slot], self._hits[other] = n_older, n_newer
        self._cal[other] = self._cal[slot]
        self._siblings.setdefault(slot, set()).add(other)
        self._siblings.setdefault(other, set()).add(slot)
        self._unannounced.add(phase)
        self.splits += 1
        for t, group in last.items():
            if group == 1 and self._current.get(t) == slot:
                self._current[t] = other
        return evicted

    def _fresh_slot(self) -> Tuple[int, Optional[int]]:
        """A slot for a new phase: one a young phase folded out of, else :meth:`_take_slot`'s,
        forgotten by threads and siblings if its phase was evicted."""
        free = np.flatnonzero(self._ids[: self._used] < 0)
        if len(free):
            return int(free[0]), None
        slot, evicted = self._take_slot()
        if evicted is not None:  # threads in the evicted phase have no current phase now
            for t, s in list(self._current.items()):
                if s == slot:
                    del self._current[t]
            for s in self._siblings.pop(slot, ()):
                self._siblings.get(s, set()).discard(slot)
            if (self._ids[: self._used] == evicted).sum() > 1:  # one of its two centres: the phase lives on
                evicted = None
        return slot, evicted

    def _new(self, v: np.ndarray, thread: int, nearest: Optional[float]) -> Match:
        same = self._same_pages(v)
        slot, evicted = self._fresh_slot()
        phase = self.next_id if same is None else same
        self._place(slot, phase, v)
        self._current[thread] = slot
        self._held.pop(thread, None)
        if same is not None:  # a second centre of a known phase (module docstring)
            return Match(phase, nearest, False, None)
        self.next_id += 1
        return Match(phase, nearest, True, evicted)

    def _same_pages(self, v: np.ndarray) -> Optional[int]:
        """The phase whose centre ``v`` is the same pages of, in other shares (module docstring), if
        a slot is free for a second centre; else None."""
        if not self._used or (self._used == self.config.table_size and not (self._ids[: self._used] < 0).any()):
            return None
        d = np.where(self._ids[: self._used] >= 0, self._distances(v), np.inf)
        j = int(d.argmin())
        rep = self._reps[j]
        if d[j] < AGREE and v[rep > SUPPORT].sum() >= SAME_PAGES and rep[v > 0].sum() >= SAME_PAGES:
            return int(self._ids[j])
        return None

    def _place(self, slot: int, phase: int, v: np.ndarray) -> None:
        self._reps[slot] = v
        self._ids[slot] = phase
        self._hits[slot] = 1
        self._cal[slot] = 0.0
        if self._split is not None:
            self._split.forget(slot)
        self._spreads = None
        self._last_used[slot] = self._clock

    # -- the phase database and read access ---------------------------------------------------
    def preload(self, representatives: Sequence[tuple], next_id: int, shift: Optional[int] = None) -> None:
        """Start from earlier runs' ``(phase, representative)`` pairs, the representative sparse
        (``[[bucket, weight], ...]``, as :meth:`table` gives it), measured at granularity ``shift``
        (None: choose on the first window); see Tracker.preload."""
        if self._used:
            raise ValueError("preload needs an empty phase table")
        self.shift = shift
        for phase, rep in list(representatives)[: self.config.table_size]:
            v = np.zeros(self.config.buckets)
            for b, w in rep:
                v[int(b)] = float(w)
            self._place(self._used, int(phase), v)
            self._used += 1
            self.known.add(int(phase))
        self.next_id = max(self.next_id, int(next_id), max(self.known, default=-1) + 1)

    def _sparse(self, slot: int) -> list:
        nz = np.flatnonzero(self._reps[slot] > 1e-6)
        return [[int(b), round(float(self._reps[slot, b]), 6)] for b in nz]

    def table(self) -> List[dict]:
        """Current phase table; each representative sparse, ``[[bucket, weight], ...]``; none for a
        slot a young phase folded out of; a phase of two centres by its most matched one."""
        best: Dict[int, int] = {}
        for s in range(self._used):
            p = int(self._ids[s])
            if p >= 0 and (p not in best or self._hits[s] > self._hits[best[p]]):
                best[p] = s
        return [{"phase": p, "hits": int(self._hits[s]), "last_used": int(self._last_used[s]),
                 "representative": self._sparse(s)} for p, s in sorted(best.items(), key=lambda kv: kv[1])]

    def representative(self, phase: int) -> Optional[list]:
        """The sparse representative of ``phase``, None if not (or no longer) in the table."""
        hit = np.nonzero(self._ids[: self._used] == phase)[0]
        return self._sparse(int(hit[0])) if len(hit) else None
