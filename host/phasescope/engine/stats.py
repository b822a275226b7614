"""Per-phase and whole-run statistics (ISCA 2003, section 4.6 and Figure 7).

Per phase: intervals, instructions and share, runs (occurrences: a thread entering the phase),
run lengths (mean = intervals / runs, max), transitions to each next phase, first and last seen,
mean and coefficient of variation (population standard deviation / mean) per interval of wall
time, ns per instruction and the OS metrics, and its top code. The whole run gets the same
metrics, so a user can check that phases are more homogeneous than the program (lower CV).

The statistics are the settled labels' (:func:`phasescope.engine.phase_table.settled`, as the log
settles them): an interval the tracker may relabel later (it matched no stable phase and carries
its nearest phase for now, an ``offshoot`` that also waits in a candidate, or the page tracker held
it) is kept in a bounded ledger, and a relabel moves it to its phase for good (:meth:`Stats.relabel`),
runs and transitions recounted from each thread's label sequence (8 bytes per interval). A phase
the tracker folded into another keeps the intervals it had (``merged_into``; :func:`final_ids`
counts them as the phase they ended up in). First and last seen are the earliest and latest of a
phase's intervals, its pending ones kept apart (:attr:`PhaseStats.pending`) so that any order of
relabels leaves them right. Its locality windows stay with the phase it was first classified in.

Per-interval metrics skip partial intervals (cut short, so not comparable) and intervals whose
clock or OS counters are unknown. Top code is estimated from a sample of each phase's intervals
(its first 16, then every 16th): the top 8 blocks of each sampled interval, merged into a table
bounded to 64 blocks per phase.
"""

from __future__ import annotations

import copy
import math
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from phasescope.engine.interval import OS_FIELDS, Interval
from phasescope.engine.locality import PhaseLocality

METRICS = ("wall_ns", "ns_per_instruction") + OS_FIELDS
TOP_PER_INTERVAL = 8
TOP_KEEP = 64
SAMPLE_FIRST = 16
SAMPLE_EVERY = 16
LEDGER = 4096  # unsettled intervals kept for a relabel (the tracker's candidates hold far fewer)


class Running:
    """Welford mean and variance of a stream of numbers."""

    __slots__ = ("n", "mean", "_m2", "_nonzero")

    def __init__(self):
        self.n = 0
        self.mean = 0.0
        self._m2 = 0.0
        self._nonzero = 0  # values that are not 0: with none left a removal leaves no rounding

    def add(self, x: float) -> None:
        self.n += 1
        self._nonzero += x != 0
        d = x - self.mean
        self.mean += d / self.n
        self._m2 += d * (x - self.mean)

    def remove(self, x: float) -> None:
        """Undo ``add(x)`` of a value added before. When only zeros remain (an OS counter such as
        majflt often is), the mean and variance are exactly 0: the rounding left by undoing would
        otherwise make a CV of about 1e8 out of 1e-15 / 1e-16. One value left has no variance."""
        self._nonzero -= x != 0
        if self.n <= 1 or not self._nonzero:
            self.n, self.mean, self._m2 = max(self.n - 1, 0), 0.0, 0.0
            return
        mean = (self.n * self.mean - x) / (self.n - 1)
        self._m2 = 0.0 if self.n == 2 else self._m2 - (x - mean) * (x - self.mean)
        self.n, self.mean = self.n - 1, mean

    @property
    def cv(self) -> Optional[float]:
        """Coefficient of variation, None without data or with a zero mean."""
        if not self.n or self.mean == 0:
            return None
        return math.sqrt(max(self._m2, 0.0) / self.n) / abs(self.mean)

    def to_dict(self) -> dict:
        return {"n": self.n, "mean": self.mean if self.n else None, "cv": self.cv}


class Metrics:
    """Running mean and CV of every per-interval metric."""

    def __init__(self):
        self.values = {m: Running() for m in METRICS}

    @staticmethod
    def of(iv: Interval) -> Dict[str, float]:
        """The interval's value of each metric it has."""
        out: Dict[str, float] = {}
        if iv.partial:
            return out
        wall = iv.wall_ns
        if wall > 0 and iv.weight > 0:
            out["wall_ns"] = wall
            if iv.instructions:  # unknown in sampled mode
                out["ns_per_instruction"] = wall / iv.instructions
        for f in OS_FIELDS if iv.os else ():
            v = iv.os.get(f)
            if v is not None:
                out[f] = v
        return out

    def add(self, values: Dict[str, float]) -> None:
        for m, v in values.items():
            self.values[m].add(v)

    def remove(self, values: Dict[str, float]) -> None:
        for m, v in values.items():
            self.values[m].remove(v)

    def to_dict(self) -> dict:
        return {m: r.to_dict() for m, r in self.values.items()}


@dataclass
class ThreadState:
    """What one thread is doing now."""

    thread: int
    phase: int = -1
    run_length: int = 0
    intervals: int = 0
    weight: int = 0  # instructions (exact mode) or CPU ns (sampled mode)
    thread_seq: int = -1
    predictions: Dict[str, int] = field(default_factory=dict)  # of this thread's next phase

    def to_dict(self, unit: str) -> dict:
        return {"phase": self.phase, "run_length": self.run_length, "intervals": self.intervals,
                **weighed(unit, self.weight), "thread_seq": self.thread_seq,
                "predictions": dict(self.predictions)}


class PhaseStats:
    """Statistics of one phase ID."""

    def __init__(self, phase: int):
        self.phase = phase
        self.intervals = 0
        self.weight = 0
        self.runs = 0
        self.max_run = 0
        self.transitions: Dict[int, int] = {}
        self.metrics = Metrics()
        self._first: Optional[Tuple[int, int]] = None  # (seq, start ns) of its earliest settled interval
        self._last: Optional[Tuple[int, int]] = None  # (seq, end ns) of its latest settled interval
        #: seq -> (start ns, end ns) of its intervals that a relabel may still move away, in seq order
        self.pending: Dict[int, Tuple[int, int]] = {}
        self.top: Dict[int, List[int]] = {}  # key -> [instructions, raw pc or -1]
        self.merged_into: Optional[int] = None  # the phase the tracker folded this one into
        self.burst: Optional[dict] = None  # sampled mode: one exact interval of it (engine/bursts.py)

    def see(self, seq: int, start_ns: int, end_ns: int, pending: bool = False) -> None:
        """Count interval ``seq`` toward first and last seen; ``pending``: it may still move away
        (:meth:`unsee`), else it stays in this phase for good."""
        if pending:
            self.pending[seq] = (start_ns, end_ns)
            return
        if self._first is None or seq < self._first[0]:
            self._first = (seq, start_ns)
        if self._last is None or seq > self._last[0]:
            self._last = (seq, end_ns)

    def unsee(self, seq: int) -> Tuple[int, int]:
        """Take pending interval ``seq`` out of first and last seen; returns its (start, end) ns."""
        return self.pending.pop(seq)

    @property
    def first_seen(self) -> Tuple[int, int]:
        """(seq, start ns) of the phase's earliest interval."""
        held = next(iter(self.pending.items()), None)
        return min(x for x in (self._first, held and (held[0], held[1][0])) if x is not None)

    @property
    def last_seen(self) -> Tuple[int, int]:
        """(seq, end ns) of the phase's latest interval."""
        held = next(reversed(self.pending.items()), None)
        return max(x for x in (self._last, held and (held[0], held[1][1])) if x is not None)

    @property
    def mean_run(self) -> float:
        return self.intervals / self.runs if self.runs else 0.0

    def sample_top(self, iv: Interval) -> list:
        """Add the interval's top blocks to the sample; returns them, (key, instructions, pc) each."""
        counts = iv.counts
        k = min(TOP_PER_INTERVAL, len(counts))
        idx = np.argpartition(counts, len(counts) - k)[len(counts) - k:] if k < len(counts) else np.arange(k)
        keys, cnts = iv.keys[idx].tolist(), counts[idx].tolist()
        pcs = iv.pcs[idx].tolist() if iv.pcs is not None else [-1] * k
        top = list(zip(keys, cnts, pcs))
        self.add_top(top)
        return top

    def add_top(self, top: list) -> None:
        for key, c, pc in top:
            entry = self.top.get(key)
            if entry is None:
                self.top[key] = [c, pc]
            else:
                entry[0] += c
        if len(self.top) > TOP_KEEP:
            keep = sorted(self.top.items(), key=lambda kv: -kv[1][0])[: TOP_KEEP // 2]
            self.top = dict(keep)

    def remove_top(self, top: list) -> None:
        """Take an interval's sampled blocks out again (those the bounded table still holds)."""
        for key, c, _ in top:
            entry = self.top.get(key)
            if entry is not None:
                entry[0] -= c
                if entry[0] <= 0:
                    del self.top[key]

    def top_code(self, n: int = 8) -> List[dict]:
        """The ``n`` blocks with most sampled instructions: key, raw pc (None unknown), share of sample."""
        total = sum(v[0] for v in self.top.values()) or 1
        best = sorted(self.top.items(), key=lambda kv: -kv[1][0])[:n]
        return [{"key": k, "pc": None if v[1] < 0 else v[1], "share": v[0] / total} for k, v in best]

    def to_dict(self, unit: str, total: int) -> dict:
        return {
            "phase": self.phase,
            "intervals": self.intervals,
            **weighed(unit, self.weight),
            "share": self.weight / total if total else 0.0,
            "runs": self.runs,
            "run_length": {"mean": self.mean_run, "max": self.max_run},
            "transitions": [{"phase": p, "count": c}
                            for p, c in sorted(self.transitions.items(), key=lambda pc: (-pc[1], pc[0]))],
            "metrics": self.metrics.to_dict(),
            "first_seen": dict(zip(("seq", "ns"), self.first_seen)),
            "last_seen": dict(zip(("seq", "ns"), self.last_seen)),
            "top_code": self.top_code(),
            "merged_into": self.merged_into,
            "burst": copy.deepcopy(self.burst),  # the live run names its blocks in the copy
        }


def final_ids(into: Dict[int, int]) -> Dict[int, int]:
    """Each folded phase's final phase: ``into`` maps a phase folded away to the phase it was folded
    into, which may itself have been folded later."""
    out = {}
    for gone in into:
        p = gone
        while p in into:
            p = into[p]
        out[gone] = p
    return out


def weighed(unit: str, weight: int) -> dict:
    """The weight of a thread, phase or run under its unit's name; ``instructions`` is null when
    the unit is CPU time (sampled mode), never invented."""
    return {unit: weight} if unit == "instructions" else {"instructions": None, unit: weight}


class Stats:
    """Statistics of every phase, every thread and the whole run. Shares and orders weigh each
    interval by its instructions (exact mode) or its sampled CPU time (sampled mode): ``unit``."""

    def __init__(self):
        self.phases: Dict[int, PhaseStats] = {}
        self.threads: Dict[int, ThreadState] = {}
        self.intervals = 0
        self.weight = 0
        self.unit = "instructions"
        self.runs = 0
        self.phase_changes = 0
        self.metrics = Metrics()
        #: per-phase reuse distances and miss-rate curves, from the intervals' locality windows
        #: (created by the first window: None when the run has none, i.e. without --locality)
        self.locality: Optional[PhaseLocality] = None
        self.locality_skipped = 0
        self.locality_straddled = 0  # windows left out: they span a phase change
        self._labels: Dict[int, array] = {}  # thread -> its intervals' phases (settled so far), in order
        #: seq -> what a relabel moves: thread, position in it, weight, metrics, start/end ns, top
        #: code sampled, its phase's last seen before it; the latest LEDGER pending intervals
        self._ledger: "OrderedDict[int, tuple]" = OrderedDict()

    def add(self, iv: Interval, phase: int, seq: int, pending: bool = False) -> Optional[int]:
        """Account one classified interval; returns the thread's previous phase (None if first).
        ``pending``: the tracker may still relabel it (:meth:`relabel`)."""
        ps = self.phases.get(phase)
        if ps is None:
            ps = self.phases[phase] = PhaseStats(phase)
        ts = self.threads.get(iv.thread)
        if ts is None:
            ts = self.threads[iv.thread] = ThreadState(iv.thread)
            self._labels[iv.thread] = array("q")
        previous = ts.phase if ts.intervals else None
        if previous == phase:
            ts.run_length += 1
        else:
            if previous is not None:
                self._transition(previous, phase, 1)
            ts.phase, ts.run_length = phase, 1
            ps.runs += 1
            self.runs += 1
        ts.intervals += 1
        ts.weight += iv.weight
        ts.thread_seq = iv.seq
        values = Metrics.of(iv)
        top = ps.sample_top(iv) if ps.intervals < SAMPLE_FIRST or (ps.intervals + 1) % SAMPLE_EVERY == 0 else []
        if pending:
            self._ledger[seq] = (iv.thread, len(self._labels[iv.thread]), iv.weight, values, top)
            if len(self._ledger) > LEDGER:  # the oldest stays where it is for good
                old, (thread, pos, *_) = self._ledger.popitem(last=False)
                self._settle(old, self.phases[self._labels[thread][pos]])
        self._labels[iv.thread].append(phase)
        ps.intervals += 1
        ps.weight += iv.weight
        ps.max_run = max(ps.max_run, ts.run_length)
        ps.see(seq, iv.start_ns, iv.end_ns, pending)
        ps.metrics.add(values)
        if iv.locality is not None:
            if self.locality is None:
                self.locality = PhaseLocality()
            if iv.locality_reach < ts.run_length:
                self.locality.add_window(phase, iv.locality)
            else:  # it began before the thread's phase changed: part of it is another phase's
                self.locality_straddled += 1
            self.locality_skipped += iv.locality_skipped
        if not self.intervals:
            self.unit = iv.unit
        self.intervals += 1
        self.weight += iv.weight
        self.metrics.add(values)
        return previous

    def _transition(self, a: int, b: int, n: int) -> None:
        """Count ``n`` (1 or -1) changes from phase ``a`` to ``b``."""
        t = self.phases[a].transitions
        t[b] = t.get(b, 0) + n
        if not t[b]:
            del t[b]
        self.phase_changes += n

    @staticmethod
    def _settle(seq: int, ps: PhaseStats) -> None:
        """Pending interval ``seq`` of phase ``ps`` stays there: no relabel can move it now."""
        ps.see(seq, *ps.unsee(seq))

    def relabel(self, phase: int, seqs) -> None:
        """The intervals ``seqs`` (added ``pending``) belong to ``phase`` after all: move their
        counts, metrics, top code, first and last seen, runs and transitions there, as if they had
        been added so. Each interval moves once at most (the tracker relabels it once), save for a
        fold's relabel (``overlap``): an interval of a phase folded into ``phase`` stays where it
        is, pending, with the history of the phase folded away (``merged_into``, which counts it
        as ``phase``), so that a candidate it waits in can still move it when confirmed."""
        for seq in seqs:
            entry = self._ledger.get(seq)
            if entry is None:
                continue
            thread, pos, weight, values, top = entry
            labels = self._labels[thread]
            old = labels[pos]
            if self._folded_into(old, phase):
                continue
            del self._ledger[seq]
            gone, ps = self.phases[old], self.phases.get(phase)
            if old == phase:
                self._settle(seq, gone)
                continue
            if ps is None:
                ps = self.phases[phase] = PhaseStats(phase)
            longest = gone.max_run == self._run_at(labels, pos)
            prev = labels[pos - 1] if pos else None
            nxt = labels[pos + 1] if pos + 1 < len(labels) else None
            for a, b, n in ((prev, old, -1), (prev, phase, 1), (old, nxt, -1), (phase, nxt, 1)):
                if a is not None and b is not None and a != b:
                    self._transition(a, b, n)
            gone.runs -= prev != old
            ps.runs += prev != phase
            if nxt is not None:
                self.phases[nxt].runs += (nxt != phase) - (nxt != old)
            self.runs += (prev != phase) - (prev != old) + (0 if nxt is None else (nxt != phase) - (nxt != old))
            labels[pos] = phase
            gone.intervals -= 1
            gone.weight -= weight
            gone.metrics.remove(values)
            gone.remove_top(top)
            ps.intervals += 1
            ps.weight += weight
            ps.metrics.add(values)
            ps.add_top(top)
            ps.max_run = max(ps.max_run, self._run_at(labels, pos))
            ps.see(seq, *gone.unsee(seq))
            if not gone.intervals:
                del self.phases[old]
            elif longest:
                gone.max_run = max(self._runs_of(old), default=0)
            ts = self.threads[thread]
            ts.phase, ts.run_length = labels[-1], self._run_at(labels, len(labels) - 1)

    def _folded_into(self, old: int, phase: int) -> bool:
        """Phase ``old`` was folded into ``phase``, at once or through other folds."""
        seen = set()
        while old not in seen and old in self.phases and self.phases[old].merged_into is not None:
            seen.add(old)
            old = self.phases[old].merged_into
            if old == phase:
                return True
        return False

    @staticmethod
    def _run_at(labels, pos: int) -> int:
        """The length of the run of ``labels`` that holds position ``pos``."""
        lo = hi = pos
        while lo and labels[lo - 1] == labels[pos]:
            lo -= 1
        while hi + 1 < len(labels) and labels[hi + 1] == labels[pos]:
            hi += 1
        return hi - lo + 1

    def _runs_of(self, phase: int) -> List[int]:
        """The lengths of every run of ``phase``, in every thread."""
        out = []
        for labels in self._labels.values():
            a = np.frombuffer(labels, dtype=np.int64)
            edges = np.flatnonzero(np.diff(np.concatenate(([0], a == phase, [0])).astype(np.int8)))
            out.extend((edges[1::2] - edges[::2]).tolist())
        return out

    def merged(self, gone: int, kept: int) -> None:
        """Note that the tracker folded phase ``gone`` into ``kept`` (its history stays its own)."""
        if gone in self.phases:  # not a phase preloaded from a database and never seen in this run
            self.phases[gone].merged_into = kept

    def by_share(self) -> List[PhaseStats]:
        """Phases, heaviest first."""
        return sorted(self.phases.values(), key=lambda p: (-p.weight, p.phase))

    def whole_run(self) -> dict:
        """Whole-run metrics, and per metric the instruction-weighted mean of per-phase CVs."""
        homogeneity = {}
        for m in METRICS:
            num = den = 0.0
            for p in self.phases.values():
                cv = p.metrics.values[m].cv
                if cv is not None:
                    num += cv * p.weight
                    den += p.weight
            homogeneity[m] = {"whole_cv": self.metrics.values[m].cv, "phase_cv": num / den if den else None}
        return {
            "intervals": self.intervals,
            **weighed(self.unit, self.weight),
            "unit": self.unit,
            "threads": len(self.threads),
            "phases": len(self.phases),
            "runs": self.runs,
            "run_length": {"mean": self.intervals / self.runs if self.runs else 0.0,
                           "max": max((p.max_run for p in self.phases.values()), default=0)},
            "phase_changes": self.phase_changes,
            "change_rate": self.phase_changes / (self.intervals - len(self.threads)) if self.intervals > len(self.threads) else 0.0,
            "metrics": self.metrics.to_dict(),
            "homogeneity": homogeneity,
            **({} if self.locality is None else {"locality_skipped": self.locality_skipped,
                                                 "locality_straddled": self.locality_straddled,
                                                 "locality_touched_bytes": self.locality.touched_bytes()}),
        }

    def locality_of(self, phase: int) -> Optional[dict]:
        """The phase's windows, accesses, reuse-distance histogram and miss-rate curve; None when
        the run has no locality windows, zero windows when the phase got none."""
        if self.locality is None:
            return None
        if phase not in self.locality.phases():
            return {"windows": 0, "accesses": 0, "histogram": {"log2": [], "cold": 0},
                    "miss_rate_curve": [[b, None] for b in self.locality.cache_bytes], "signature": [],
                    "touched_bytes": 0}
        return self.locality.to_dict(phase)

    def miss_rate(self, phase: int, cache_bytes: int) -> Optional[float]:
        """The phase's estimated LRU miss rate at ``cache_bytes`` (None: no windows, or unknown)."""
        return None if self.locality is None else self.locality.miss_rate(phase, cache_bytes)

    def _phase_dict(self, p: "PhaseStats") -> dict:
        d = p.to_dict(self.unit, self.weight)
        if self.locality is not None:
            d["locality"] = self.locality_of(p.phase)
        return d

    def to_dict(self) -> dict:
        return {
            "whole": self.whole_run(),
            "phases": [self._phase_dict(p) for p in self.by_share()],
            "threads": {str(t): s.to_dict(self.unit) for t, s in sorted(self.threads.items())},
        }
