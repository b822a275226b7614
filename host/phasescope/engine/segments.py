"""What the tracker classifies: fixed intervals, variable-length segments, or Q-phase-refined intervals.

A pure stream transform between the source of intervals (a live session, a replayed log) and the
:class:`~phasescope.engine.phase_engine.PhaseEngine`: each thread's stream of fine *units* (short
recorded intervals, e.g. ``--interval 100000`` live) is re-cut into the pieces the tracker
classifies, one piece = one merged :class:`Interval` (its ``units`` field says how many units).

- ``fixed``: units pass through unchanged (the paper's fixed intervals).
- ``variable`` (Akamatsu, Goshima & Sakai, "A Phase Detection Technique Not Using Fixed-Length
  Intervals", seed 001): a segment ends where the Manhattan distance between two consecutive units'
  normalised footprints (fractions, 0..2) is over ``threshold`` and the segment holds at least
  ``min_units``; it never grows past ``max_units``. The tracker normalises by the segment's
  instructions, i.e. by its length, as the paper does.
- ``qphase`` (Q-phase boundary detection, IP.com IPCOM000130552D, seed 003): units are grouped into
  nominal intervals of ``max_units``; when a nominal interval's first and last units differ by
  more than ``threshold``, it mixes two phases and is cut once, at the unit where the locus of
  execution changes most: the locus is, per module, the share of instructions in the module and
  their mean code offset normalised by the module's span of offsets in the interval (raw addresses
  jump between modules, so each module is normalised on its own), and the change at unit k is the
  L1 distance between the mean locus of the units before k and after k. Each part (at least
  ``min_units``) is then classified as its own interval.

Streams are per thread: a thread's pending units are flushed by its partial (last) unit, and by
:meth:`Segmenter.flush` at the end of the stream.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, Iterator, List, Optional

import numpy as np

from phasescope.engine.interval import OS_FIELDS, Interval
from phasescope.engine.config import MODES, SegmentConfig  # noqa: F401
from phasescope.errors import InputError
from phasescope.engine.footprint import bucket_index

BUCKETS = 32  # dimensions of the unit footprints compared by the segmenter

#: why ``--interval`` cannot merge a sampled log (said before any output opens, commands/replay.py)
NO_INSTRUCTIONS = "--interval merges intervals by instructions, and a sampled log has none"


def unit_vector(iv: Interval, buckets: int = BUCKETS) -> np.ndarray:
    """A unit's footprint as fractions of its weight (sums to 1; all zeros when empty)."""
    acc = np.bincount(bucket_index(iv.keys, buckets), weights=iv.counts.astype(np.float64), minlength=buckets)
    total = acc.sum()
    return acc / total if total > 0 else acc


def merge(group: List[Interval], seq: int) -> Interval:
    """One interval made of a thread's consecutive units."""
    if len(group) == 1 and group[0].seq == seq:
        return group[0]
    first, last = group[0], group[-1]
    instructions = None if any(g.instructions is None for g in group) else sum(g.instructions for g in group)
    os_ = None
    if all(g.os for g in group):
        os_ = {f: sum(g.os.get(f, 0) for g in group) for f in OS_FIELDS}
    stacked = all(g.stacks is not None for g in group)  # sampled stacks: the pieces' own, side by side
    window = next((i for i in reversed(range(len(group))) if group[i].locality is not None), None)
    return Interval(
        stacks=[s for g in group for s in g.stacks] if stacked else None,
        frames={k: v for g in group for k, v in g.frames.items()} if stacked else None,
        thread=first.thread, seq=seq, instructions=instructions,
        keys=np.concatenate([g.keys for g in group]), counts=np.concatenate([g.counts for g in group]),
        pcs=np.concatenate([g.pcs for g in group]) if all(g.pcs is not None for g in group) else None,
        start_ns=first.start_ns, end_ns=last.end_ns, partial=last.partial, os=os_, mode=first.mode,
        samples=sum(g.samples for g in group), period_ns=first.period_ns,
        # --locality: one window per piece (the latest); windows are not concatenated (no false reuses)
        locality=None if window is None else group[window].locality,
        locality_reach=0 if window is None else max(0, group[window].locality_reach - window),
        locality_skipped=sum(g.locality_skipped for g in group), units=sum(g.units for g in group),
    )


def merge_intervals(intervals: Iterable[Interval], size: int) -> Iterator[Interval]:
    """Re-cut each thread's stream into intervals of at least ``size`` instructions by merging
    consecutive recorded ones (:func:`merge`); a thread's last, shorter piece is marked partial.
    A sampled stream has no instructions to merge by: InputError."""
    pending: Dict[int, List[Interval]] = {}
    pending_instructions: Dict[int, int] = {}
    counts: Dict[int, int] = {}

    def emit(group: List[Interval]) -> Interval:
        thread = group[0].thread
        counts[thread] = counts.get(thread, -1) + 1
        iv = merge(group, counts[thread])
        if iv is group[0]:  # merge() hands a lone interval back as it is: never change the caller's
            iv = dataclasses.replace(iv)
        iv.partial = iv.partial or iv.instructions < size
        return iv

    for iv in intervals:
        if iv.instructions is None:
            raise InputError(NO_INSTRUCTIONS)
        group = pending.setdefault(iv.thread, [])
        group.append(iv)
        pending_instructions[iv.thread] = pending_instructions.get(iv.thread, 0) + iv.instructions
        if pending_instructions[iv.thread] >= size or iv.partial:
            yield emit(group)
            pending[iv.thread] = []
            pending_instructions[iv.thread] = 0
    for group in pending.values():
        if group:
            yield emit(group)


def locus(units: List[Interval]) -> np.ndarray:
    """Per unit, the locus of execution: for each module (the key's high 32 bits), the share of the
    unit's weight in it and the share times its mean code offset normalised to the module's span
    of offsets over ``units``. Shape (len(units), 2 x modules)."""
    keys = np.concatenate([u.keys for u in units]).astype(np.uint64)
    counts = np.concatenate([u.counts for u in units]).astype(np.float64)
    row = np.repeat(np.arange(len(units)), [len(u.keys) for u in units])
    mods, mod = np.unique(keys >> np.uint64(32), return_inverse=True)
    off = (keys & np.uint64(0xFFFFFFFF)).astype(np.float64)
    lo = np.full(len(mods), np.inf)
    hi = np.full(len(mods), -np.inf)
    np.minimum.at(lo, mod, off)
    np.maximum.at(hi, mod, off)
    norm = (off - lo[mod]) / np.maximum(hi[mod] - lo[mod], 1.0)
    n, m = len(units), len(mods)
    share = np.zeros((n, m))
    center = np.zeros((n, m))
    np.add.at(share, (row, mod), counts)
    np.add.at(center, (row, mod), counts * norm)
    total = share.sum(axis=1, keepdims=True)
    np.divide(share, total, out=share, where=total > 0)
    np.divide(center, total, out=center, where=total > 0)  # share x mean normalised offset
    return np.hstack([share, center])


def qphase_cut(units: List[Interval], min_units: int) -> int:
    """The unit k (min_units <= k <= len - min_units) where the mean locus before k and after k
    differ most; 0 when no cut leaves both parts ``min_units`` long."""
    n = len(units)
    if n < 2 * min_units:
        return 0
    loc = locus(units)
    csum = np.vstack([np.zeros(loc.shape[1]), np.cumsum(loc, axis=0)])
    ks = np.arange(min_units, n - min_units + 1)
    before = csum[ks] / ks[:, None]
    after = (csum[n] - csum[ks]) / (n - ks)[:, None]
    change = np.abs(before - after).sum(axis=1)
    return int(ks[int(np.argmax(change))])


class Segmenter:
    """Per-thread re-cutting of a unit stream (see the module docstring). ``push`` a unit, get the
    pieces it completes; ``flush`` at the end of the stream."""

    def __init__(self, config: Optional[SegmentConfig] = None):
        self.config = config or SegmentConfig()
        self._pending: Dict[int, List[Interval]] = {}
        self._last: Dict[int, np.ndarray] = {}  # variable: the previous unit's vector
        self._seq: Dict[int, int] = {}
        self.cuts = 0  # boundaries found by distance (variable) or by the locus (qphase)

    def _emit(self, group: List[Interval]) -> Interval:
        t = group[0].thread
        seq = self._seq[t] = self._seq.get(t, -1) + 1
        return merge(group, seq)

    def push(self, iv: Interval) -> List[Interval]:
        c = self.config
        if c.mode == "fixed":
            return [iv]
        out: List[Interval] = []
        group = self._pending.setdefault(iv.thread, [])
        if c.mode == "variable":
            v = unit_vector(iv)
            prev = self._last.get(iv.thread)
            self._last[iv.thread] = v
            if group:
                cut = prev is not None and len(group) >= c.min_units and np.abs(v - prev).sum() > c.threshold
                if cut or len(group) >= c.max_units:
                    self.cuts += bool(cut)
                    out.append(self._emit(group))
                    group = self._pending[iv.thread] = []
            group.append(iv)
            if iv.partial:
                out.append(self._emit(group))
                self._pending[iv.thread] = []
                self._last.pop(iv.thread, None)
            return out
        group.append(iv)  # qphase
        if len(group) >= c.max_units or iv.partial:
            out.extend(self._refine(group))
            self._pending[iv.thread] = []
        return out

    def _refine(self, group: List[Interval]) -> List[Interval]:
        c = self.config
        if len(group) >= 2 and np.abs(unit_vector(group[0]) - unit_vector(group[-1])).sum() > c.threshold:
            k = qphase_cut(group, c.min_units)
            if k:
                self.cuts += 1
                return [self._emit(group[:k]), self._emit(group[k:])]
        return [self._emit(group)]

    def flush(self) -> List[Interval]:
        """The pieces still pending (threads whose stream ended without a partial unit)."""
        out: List[Interval] = []
        for t, group in list(self._pending.items()):
            if group:
                out.extend(self._refine(group) if self.config.mode == "qphase" else [self._emit(group)])
            self._pending[t] = []
        self._last.clear()
        return out


def segment_stream(intervals: Iterable[Interval], config: SegmentConfig) -> Iterator[Interval]:
    """``intervals`` re-cut by a :class:`Segmenter` (a generator, for replay)."""
    seg = Segmenter(config)
    for iv in intervals:
        yield from seg.push(iv)
    yield from seg.flush()
