"""Per-phase and whole-run statistics (ISCA 2003, section 4.6 and Figure 7).

Per phase: intervals, instructions and share, runs (occurrences: a thread entering the phase),
run lengths (mean = intervals / runs, max), transitions to each next phase, first and last seen,
mean and coefficient of variation (population standard deviation / mean) per interval of wall
time, ns per instruction and the OS metrics, and its top code. The whole run gets the same
metrics, so a user can check that phases are more homogeneous than the program (lower CV).

Per-interval metrics skip partial intervals (cut short, so not comparable) and intervals whose
clock or OS counters are unknown. Top code is estimated from a sample of each phase's intervals
(its first 16, then every 16th): the top 8 blocks of each sampled interval, merged into a table
bounded to 64 blocks per phase.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from phasescope.engine.interval import OS_FIELDS, Interval
from phasescope.engine.locality import PhaseLocality

METRICS = ("wall_ns", "ns_per_instruction") + OS_FIELDS
TOP_PER_INTERVAL = 8
TOP_KEEP = 64
SAMPLE_FIRST = 16
SAMPLE_EVERY = 16


class Running:
    """Welford mean and variance of a stream of numbers."""

    __slots__ = ("n", "mean", "_m2")

    def __init__(self):
        self.n = 0
        self.mean = 0.0
        self._m2 = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        d = x - self.mean
        self.mean += d / self.n
        self._m2 += d * (x - self.mean)

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

    def add(self, iv: Interval) -> None:
        if iv.partial:
            return
        wall = iv.wall_ns
        if wall > 0 and iv.weight > 0:
            self.values["wall_ns"].add(wall)
            if iv.instructions:  # unknown in sampled mode
                self.values["ns_per_instruction"].add(wall / iv.instructions)
        if iv.os:
            for f in OS_FIELDS:
                v = iv.os.get(f)
                if v is not None:
                    self.values[f].add(v)

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

    def __init__(self, phase: int, seq: int, ns: int):
        self.phase = phase
        self.intervals = 0
        self.weight = 0
        self.runs = 0
        self.max_run = 0
        self.transitions: Dict[int, int] = {}
        self.metrics = Metrics()
        self.first_seq, self.first_ns = seq, ns
        self.last_seq, self.last_ns = seq, ns
        self.top: Dict[int, List[int]] = {}  # key -> [instructions, raw pc or -1]
        self.merged_into: Optional[int] = None  # the phase the tracker folded this one into
        self.burst: Optional[dict] = None  # sampled mode: one exact interval of it (engine/bursts.py)

    @property
    def mean_run(self) -> float:
        return self.intervals / self.runs if self.runs else 0.0

    def sample_top(self, iv: Interval) -> None:
        counts = iv.counts
        k = min(TOP_PER_INTERVAL, len(counts))
        idx = np.argpartition(counts, len(counts) - k)[len(counts) - k:] if k < len(counts) else np.arange(k)
        keys, cnts = iv.keys[idx].tolist(), counts[idx].tolist()
        pcs = iv.pcs[idx].tolist() if iv.pcs is not None else [-1] * k
        for key, c, pc in zip(keys, cnts, pcs):
            entry = self.top.get(key)
            if entry is None:
                self.top[key] = [c, pc]
            else:
                entry[0] += c
        if len(self.top) > TOP_KEEP:
            keep = sorted(self.top.items(), key=lambda kv: -kv[1][0])[: TOP_KEEP // 2]
            self.top = dict(keep)

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
            "first_seen": {"seq": self.first_seq, "ns": self.first_ns},
            "last_seen": {"seq": self.last_seq, "ns": self.last_ns},
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

    def add(self, iv: Interval, phase: int, seq: int) -> Optional[int]:
        """Account one classified interval; returns the thread's previous phase (None if first)."""
        ps = self.phases.get(phase)
        if ps is None:
            ps = self.phases[phase] = PhaseStats(phase, seq, iv.start_ns)
        ts = self.threads.get(iv.thread)
        if ts is None:
            ts = self.threads[iv.thread] = ThreadState(iv.thread)
        previous = ts.phase if ts.intervals else None
        if previous == phase:
            ts.run_length += 1
        else:
            if previous is not None:
                self.phases[previous].transitions[phase] = self.phases[previous].transitions.get(phase, 0) + 1
                self.phase_changes += 1
            ts.phase, ts.run_length = phase, 1
            ps.runs += 1
            self.runs += 1
        ts.intervals += 1
        ts.weight += iv.weight
        ts.thread_seq = iv.seq
        ps.intervals += 1
        ps.weight += iv.weight
        ps.max_run = max(ps.max_run, ts.run_length)
        ps.last_seq, ps.last_ns = seq, iv.end_ns
        ps.metrics.add(iv)
        if ps.intervals <= SAMPLE_FIRST or ps.intervals % SAMPLE_EVERY == 0:
            ps.sample_top(iv)
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
        self.metrics.add(iv)
        return previous

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
