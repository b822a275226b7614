"""Macro phases: a second, coarser time scale over the micro phases (Lau, Perelman & Calder,
ISPASS 2005, hierarchical phase behaviour).

A thread's window is its last ``window`` micro phases (10M-instruction intervals by default); its
signature is the histogram of their IDs, as fractions. Distances are Manhattan between histograms
(0: the same mix, 2: no phase in common). The window's macro phase: the thread's current macro
phase while the window stays within ``threshold`` of its representative (hysteresis), else the
nearest representative under ``threshold``, else a new macro ID. A representative is the running
mean of the windows it matched; a full table drops its least recently matched one. A thread's first
windows are partial (fewer intervals than ``window``), so every interval has a macro phase.

Change point (issue 28): a window changes its macro phase only once about half of it is the new
activity, some ``window`` / 2 intervals late. When the thread's last ``recent`` micro phases are
``change`` or more from its current macro phase's representative (1.8: at most a tenth of them in
common), the window drops everything older than them, and the new activity decides alone. A macro
phase made in the thread's last ``window`` intervals (from a part-filled window, as after a change point)
yields to an older one once the window is under ``threshold`` of the older one and nearer it: a
recurrence whose first intervals run other code (set-up) gets its macro ID back.

The log places each change where it began (issue 28, stop 44): the live view learns of a change
only when the change point fires, but the intervals since its split (the recent part) belong to
the new macro phase, and a young phase that yields was the recurrence all along. :meth:`observe`
returns a :class:`~phasescope.engine.phase_table.Match` whose ``relabel``/``relabel_seqs`` say so,
the micro phases' contract (the log's ``macro_relabel``, applied by :func:`phase_table.settled`).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional

import numpy as np

from phasescope.engine.phase_table import Match, settled
from phasescope.errors import InputError


@dataclass(frozen=True)
class MacroConfig:
    """``window``: micro intervals per window (0: no macro phases); ``threshold``: Manhattan
    distance between two histograms under which they are one macro phase (0 to 2)."""

    window: int = 32  # chosen on truth-A (bench/quality/generalize.py, macro truth ARI)
    threshold: float = 1.2
    table_size: int = 32
    #: change point: intervals of the recent part (0: off) and its distance from the current macro
    #: phase that restarts the window from it. Chosen on a truth-A recording placed by its wall-clock
    #: stamps (stop 43, docs/quality.md): 12 and 1.6 lagged each change by 9-10 intervals; 7 and 1.8
    #: lag it by 4-7, with no more macro changes on the other tuning programs (a threshold under 1.2
    #: let the paper's churning phases restart the window inside an activity)
    recent: int = 7
    change: float = 1.8
    #: exact mode: micro phases whose footprints are within ``group`` (Manhattan, a fraction of an
    #: interval) count as one in the windows (:class:`MicroGroups`; 0: off). Chosen on truth-A, -E
    #: and -F (stop 47, docs/quality.md): bzip2's coding got a new macro ID each call
    group: float = 0.4

    def __post_init__(self):
        if not (isinstance(self.window, int) and 0 <= self.window <= 4096):
            raise InputError(f"macro window must be from 0 (off) to 4096 intervals (got {self.window!r})")
        if not (isinstance(self.threshold, (int, float)) and 0 < self.threshold <= 2):
            raise InputError(f"macro threshold must be a distance from 0 to 2 (got {self.threshold!r})")
        if not (isinstance(self.table_size, int) and 1 <= self.table_size <= 4096):
            raise InputError(f"macro table size must be from 1 to 4096 (got {self.table_size!r})")
        if not (isinstance(self.recent, int) and 0 <= self.recent <= 4096):
            raise InputError(f"macro recent part must be from 0 (off) to 4096 intervals (got {self.recent!r})")
        if not (isinstance(self.change, (int, float)) and 0 < self.change <= 2):
            raise InputError(f"macro change distance must be from 0 to 2 (got {self.change!r})")
        if not (isinstance(self.group, (int, float)) and 0 <= self.group <= 2):
            raise InputError(f"macro group distance must be from 0 (off) to 2 (got {self.group!r})")

    def to_dict(self) -> dict:
        return asdict(self)


def histogram_distance(a: Dict[int, float], b: Dict[int, float]) -> float:
    """Manhattan distance between two histograms (phase -> fraction)."""
    ag, bg = a.get, b.get
    return sum([abs(ag(k, 0.0) - bg(k, 0.0)) for k in a.keys() | b.keys()])  # a list: the same sum, sooner


def fractions(counts: Counter) -> Dict[int, float]:
    """A histogram (phase -> fraction) from counts."""
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()}


class MicroGroups:
    """Micro phases that the windows count as one (``MacroConfig.group``): a micro phase seen for
    the first time joins the group of the known micro phase whose mean footprint is nearest its
    footprint, when within ``reach``; else it founds a group, named by its own ID. A micro phase
    never changes group. One activity whose code the micro tracker cuts into many nearby phases
    (bzip2's Huffman coding over 7-9 IDs 0.23-0.3 apart) is then one mix in its windows."""

    def __init__(self, reach: float):
        self.reach = reach
        self.of: Dict[int, int] = {}  # micro phase -> its group
        self._rows: Dict[int, int] = {}  # micro phase -> its row of the footprint sums
        self._groups: List[int] = []  # row -> its micro phase's group
        self._sums: List[np.ndarray] = []
        self._n: List[int] = []

    def group(self, micro: int, footprint: np.ndarray) -> int:
        """The group of ``micro``, whose interval has ``footprint`` (fractions of the interval)."""
        row = self._rows.get(micro)
        if row is None:
            g = micro
            if self._sums:
                d = np.abs(np.array(self._sums) / np.array(self._n)[:, None] - footprint).sum(axis=1)
                j = int(d.argmin())
                g = self._groups[j] if d[j] < self.reach else micro
            self.of[micro], row = g, len(self._sums)
            self._rows[micro] = row
            self._groups.append(g)
            self._sums.append(np.zeros(len(footprint)))
            self._n.append(0)
        self._sums[row] += footprint
        self._n[row] += 1
        return self.of[micro]


class MacroTracker:
    """Macro phase of each thread's latest window of micro phases (see the module docstring)."""

    def __init__(self, config: Optional[MacroConfig] = None):
        self.config = config or MacroConfig()
        self.groups = MicroGroups(self.config.group) if self.config.group else None
        self._windows: Dict[int, deque] = {}
        self._counts: Dict[int, Counter] = {}
        self._current: Dict[int, int] = {}
        self._reps: Dict[int, Dict[int, float]] = {}  # macro ID -> mean histogram
        self._hits: Dict[int, int] = {}
        self._last: Dict[int, int] = {}
        self._born: Dict[int, int] = {}  # macro ID -> the clock it was made at
        self._stamps: Dict[int, deque] = {}  # thread -> the clock at its last window + 1 intervals
        #: thread -> [seq, macro phase as settled so far, micro phase as settled so far] of its last
        #: window intervals before this one (its window is the tail of it)
        self._given: Dict[int, deque] = {}
        self._plain: Dict[int, Match] = {}
        self._clock = 0
        self.next_id = 0

    def observe(self, thread: int, micro: int, relabel: Optional[int] = None, relabel_seqs=(),
                footprint: Optional[np.ndarray] = None) -> Match:
        """Add one interval's micro phase to its thread's window: the window's macro phase, and
        the thread's earlier intervals that belong to it after all (``relabel_seqs``: numbered
        from 0 in the order observed, the engine's ``seq``). ``relabel``, ``relabel_seqs``: the
        micro tracker's relabel of earlier intervals (its ``Match``), which the windows follow.
        ``footprint``: the interval's (fractions), for :class:`MicroGroups` (None: ungrouped)."""
        c = self.config
        if self.groups is not None and footprint is not None:
            micro = self.groups.group(micro, footprint)
            relabel = None if relabel is None else self.groups.of.get(relabel, relabel)
        if relabel is not None and relabel_seqs:
            self._resettle(relabel, set(relabel_seqs))
        self._clock += 1
        win = self._windows.setdefault(thread, deque())
        counts = self._counts.setdefault(thread, Counter())
        win.append(micro)
        counts[micro] += 1
        stamps = self._stamps.setdefault(thread, deque(maxlen=c.window + 1))
        stamps.append(self._clock)
        given = self._given.setdefault(thread, deque(maxlen=max(c.window, 1)))
        current, split = self._current.get(thread), 0
        if c.recent and len(win) > 2 * c.recent and current in self._reps:
            recent = list(win)[-c.recent:]
            if histogram_distance(fractions(Counter(recent)), self._reps[current]) >= c.change:
                win.clear()
                win.extend(recent)
                counts.clear()
                counts.update(recent)
                split = c.recent - 1  # the thread's earlier intervals the new activity began with
        if len(win) > c.window:
            old = win.popleft()
            counts[old] -= 1
            if not counts[old]:
                del counts[old]
        hist = fractions(counts)
        new = False
        if current in self._reps and histogram_distance(hist, self._reps[current]) < c.threshold:
            phase = current
        else:
            dists = {p: histogram_distance(hist, r) for p, r in self._reps.items()}
            phase = min(dists, key=dists.get, default=None)
            if phase is None or dists[phase] >= c.threshold:
                phase, new = self._new(hist), True
        young = None
        if self._born[phase] >= stamps[0]:  # made in this thread's last window intervals
            young, phase = phase, self._elder(phase, hist)
            young = young if young != phase else None
        self._match(phase, hist)
        self._current[thread] = phase
        seqs = self._relabel(given, phase, split, young) if split or young is not None else None
        given.append([self._clock - 1, phase, micro])
        if seqs or new:
            return Match(phase, None, new and young is None, relabel=phase if seqs else None, relabel_seqs=seqs)
        plain = self._plain.get(phase)  # the common case: a Match is immutable, so one per phase will do
        if plain is None:
            plain = self._plain[phase] = Match(phase, None, False)
        return plain

    def _resettle(self, micro: int, seqs: set) -> None:
        """The intervals ``seqs`` are micro phase ``micro`` after all: so are they in the windows
        that still hold them (a window is the tail of its thread's ``_given``)."""
        low, high = min(seqs), max(seqs)
        for thread, given in self._given.items():
            if not given or given[-1][0] < low or given[0][0] > high:
                continue  # none of this thread's intervals (a thread's seqs increase)
            win, counts = self._windows[thread], self._counts[thread]
            start = len(given) - len(win)
            for i, g in enumerate(given):
                if g[0] in seqs and g[2] != micro:
                    if i >= start:
                        win[i - start] = micro
                        counts[g[2]] -= 1
                        if not counts[g[2]]:
                            del counts[g[2]]
                        counts[micro] += 1
                    g[2] = micro

    @staticmethod
    def _relabel(given: deque, phase: int, split: int, young: Optional[int]) -> Optional[tuple]:
        """Seqs of the thread's earlier intervals that are ``phase`` after all: the last ``split``
        (where a change point cut the window), and those given the ``young`` phase that yielded to
        ``phase``; None when none of them was labelled otherwise. ``given`` follows the relabels."""
        moved = []
        for i, g in enumerate(given):
            if g[1] != phase and (i >= len(given) - split or g[1] == young):
                g[1] = phase
                moved.append(g[0])
        return tuple(moved) or None

    def _new(self, hist: Dict[int, float]) -> int:
        if len(self._reps) >= self.config.table_size:
            victim = min(self._last, key=self._last.get)
            for d in (self._reps, self._hits, self._last, self._born):
                del d[victim]
            self._plain.pop(victim, None)
        phase, self.next_id = self.next_id, self.next_id + 1
        self._reps[phase], self._hits[phase], self._born[phase] = dict(hist), 0, self._clock
        return phase

    def _elder(self, phase: int, hist: Dict[int, float]) -> int:
        """``phase``, made in the last ``window`` intervals, or the nearest older macro phase when the
        window is under the threshold of that one and nearer it than ``phase``'s own representative."""
        near = histogram_distance(hist, self._reps[phase])
        older = [(histogram_distance(hist, r), p) for p, r in self._reps.items() if self._born[p] < self._born[phase]]
        best = min(older, default=None)
        return best[1] if best is not None and best[0] < min(self.config.threshold, near) else phase

    def _match(self, phase: int, hist: Dict[int, float]) -> None:
        """Fold ``hist`` into ``phase``'s mean representative."""
        self._hits[phase] += 1
        self._last[phase] = self._clock
        rep, w = self._reps[phase], 1.0 / self._hits[phase]
        for k in rep.keys() | hist.keys():
            v = rep.get(k, 0.0) + (hist.get(k, 0.0) - rep.get(k, 0.0)) * w
            if v > 1e-9:
                rep[k] = v
            else:
                rep.pop(k, None)

    def table(self) -> List[dict]:
        """Macro representatives: ID, windows matched, and the histogram's largest micro phases."""
        return [{"macro": p, "hits": self._hits[p],
                 "mix": sorted(r.items(), key=lambda kv: -kv[1])[:4]} for p, r in self._reps.items()]


def macro_phases(threads, micro, config: Optional[MacroConfig] = None, footprints=None):
    """(live, settled) macro phases of a stream of (thread, micro phase) or (thread, the micro
    tracker's Match, whose relabels the windows follow, as the engine feeds them): what the live
    view showed at each interval, and what the log settles them to (every relabel applied).
    ``footprints``: each interval's (fractions), for ``group`` (None: ungrouped)."""
    tracker = MacroTracker(config)
    fps = [None] * len(threads) if footprints is None else footprints
    matches = [tracker.observe(int(t), int(p), footprint=f) if not isinstance(p, Match) else
               tracker.observe(int(t), p.phase, p.relabel, p.relabel_seqs, f) for t, p, f in zip(threads, micro, fps)]
    return [m.phase for m in matches], settled(matches)
