"""Miss rates for input sizes never run: seed 004's locality model, per phase.

Zhong, Dropsho, Shen, Studer and Ding, *Miss Rate Prediction Across Program Inputs and Cache
Configurations* (IEEE TC 2007). Pure numpy; no I/O.

Input: for one phase, two or more runs, each a reuse signature (``[[cache blocks, miss rate], ...]``,
:meth:`phasescope.engine.locality.PhaseLocality.signature`: the fraction of the phase's accesses
whose reuse distance is at least C blocks, as far as its windows reach) and the run's input size s
(bytes).

Reference groups (the paper's 2.1.1). Each run's distribution is cut into G = 1000 groups of 0.1%
of the accesses each, from the shortest distance to the longest; a group's distance is the
distribution's quantile at the group's middle (geometric interpolation between the signature's
points, which are 16 per octave). The i-th groups of all runs are paired.

Patterns (2.1.2-2.1.3). Each group's distance follows d = c + e * f(s) with f one of s^0 (constant),
s^1/3 (cube root), s^1/2 (square root), s^2/3 and s (linear): the largest reuse distance cannot
exceed the data size, so nothing grows faster. The pattern is the one whose growth ratio best
matches the group's (for two runs exactly the paper's rule, "p(s2)/p(s1) closest to d2/d1", in
log measure; for more runs the least-squares fit of log(d+1) against k log s); then c and e are
least squares over all runs (e < 0 falls back to constant). A group whose distance moves by less
than 10% over the runs is constant: measurement noise is not growth.

Beyond the windows. A window of N accesses cannot see a reuse whose distance exceeds what it
touched; the signature stops where the windows cannot tell (its ``reach``). The groups past it
are placed at the larger of the reach and the data the phase's windows touched together (S blocks:
at S - 1): no reuse distance exceeds the data size (the paper's bound), and such accesses miss in every cache smaller
than that data. (The input size only places runs on the size axis: its unit does not matter.)

Prediction (Fig. 5). A fully associative LRU cache of C blocks misses exactly the accesses of
distance >= C: the miss rate at (s, C) is the fraction of groups with c + e f(s) >= C.

Critical input sizes (Fig. 6, generalised). For a cache of C blocks the miss rate never falls as
s grows (non-constant groups only grow); it jumps where a working set (many groups) crosses C.
Each jump of at least ``JUMP`` within one octave of s is reported at the size where the rate is
half-way through it (``input_size``), where it has done a tenth of it (``begins``), and the rates
before and after.

Confidence (section 3's verification). With three or more runs, each run is left out in turn,
the model fitted on the others predicts its curve, and the error against what that run measured
(cache sizes 32 KiB - 8 MiB where it could tell) is the model's check. Two runs give no check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np

from phasescope.engine.locality import BLOCK_BYTES, CACHE_BYTES

GROUPS = 1000
#: (name, exponent k of f(s) = s^k)
PATTERNS = (("constant", 0.0), ("cube root", 1 / 3), ("square root", 1 / 2), ("2/3 power", 2 / 3),
            ("linear", 1.0))
_K = np.array([k for _, k in PATTERNS])
NOISE = 0.10  # a group whose distance moves less than this over the runs is constant
MIN_SPAN = 1.5  # the largest training input must be at least this times the smallest
JUMP = 0.05  # a rise of the miss rate within one octave of input size that makes a critical size
CHECK_BYTES = tuple(b for b in CACHE_BYTES if 32 << 10 <= b <= 8 << 20)  # where the confidence check compares


@dataclass
class Run:
    """One run of a phase: its input size (bytes) and reuse signature [[cache blocks, miss rate], ...]."""
    input_size: int
    signature: List[list]
    touched_bytes: int = 0  # the data the phase's windows touched together
    run: Optional[int] = None


def group_distances(signature: Sequence, touched_bytes: float, groups: int = GROUPS) -> np.ndarray:
    """The distance (blocks) of each of ``groups`` equal reference groups, shortest first (see module doc)."""
    sig = np.asarray(signature, np.float64).reshape(-1, 2)
    if len(sig) == 0:
        raise ValueError("an empty signature")
    c = sig[:, 0]
    m = np.minimum.accumulate(np.clip(sig[:, 1], 0.0, 1.0))  # P(d >= C) never grows with C
    f = 1.0 - m  # P(d < C)
    q = (np.arange(groups) + 0.5) / groups
    k = np.searchsorted(f, q, side="left")  # first grid point with P(d < C_k) >= q
    d = np.empty(groups)
    first = k == 0
    d[first] = c[0] * q[first] / max(f[0], 1e-12) if c[0] > 1 else 0.0
    inside = (k > 0) & (k < len(c))
    ki = k[inside]
    lo, hi = f[ki - 1], f[ki]
    t = (q[inside] - lo) / np.maximum(hi - lo, 1e-12)
    d[inside] = c[ki - 1] * (c[ki] / c[ki - 1]) ** t
    beyond = k >= len(c)
    reach = c[-1]
    d[beyond] = max(reach, touched_bytes / BLOCK_BYTES - 1)  # S blocks: the longest distance is S - 1
    return d


@dataclass
class Model:
    """Per-group patterns of one phase: d_i(s) = c_i + e_i * s^k_i (blocks; s in bytes)."""
    c: np.ndarray
    e: np.ndarray
    k: np.ndarray
    sizes: List[int]  # the training runs' input sizes
    runs: List[Run] = field(default_factory=list)

    def distances(self, input_size: float) -> np.ndarray:
        return np.maximum(self.c + self.e * float(input_size) ** self.k, 0.0)

    def miss_rates(self, input_size: float, cache_bytes=CACHE_BYTES) -> np.ndarray:
        """Predicted LRU miss rate at each cache size (bytes) for an input of ``input_size`` bytes."""
        d = np.sort(self.distances(input_size))
        blocks = np.asarray(cache_bytes, np.float64) / BLOCK_BYTES
        return (len(d) - np.searchsorted(d, blocks, side="left")) / len(d)

    def patterns(self) -> dict:
        """Share of the accesses (groups) following each pattern."""
        n = len(self.k)
        return {name: float(np.sum(np.isclose(self.k, k) & ((self.e > 0) | (k == 0)))) / n for name, k in PATTERNS}

    def critical_sizes(self, cache_bytes: int, lo: float, hi: float) -> List[dict]:
        """Input sizes in [lo, hi] bytes where the miss rate at ``cache_bytes`` jumps (see module doc)."""
        steps = 8  # per octave
        s = 2.0 ** (np.arange(np.floor(np.log2(lo) * steps), np.ceil(np.log2(hi) * steps) + 1) / steps)
        r = np.array([self.miss_rates(x, [cache_bytes])[0] for x in s])
        if len(r) <= steps:
            return []
        rise = r[steps:] - r[:-steps]
        marked = rise >= JUMP
        out = []
        j = 0
        while j < len(marked):
            if not marked[j]:
                j += 1
                continue
            a = j
            while j + 1 < len(marked) and marked[j + 1]:
                j += 1
            b = j + steps
            before, after = r[a], r[b]
            mid = np.flatnonzero(r[a:b + 1] >= (before + after) / 2)[0] + a
            begins = np.flatnonzero(r[a:b + 1] >= before + (after - before) / 10)[0] + a
            out.append({"cache_bytes": int(cache_bytes), "input_size": int(round(s[mid])),
                        "begins": int(round(s[begins])), "from": round(float(before), 4), "to": round(float(after), 4)})
            j += 1
        return out


def fit(runs: Sequence[Run], groups: int = GROUPS) -> Model:
    """The model of one phase from two or more runs of different input sizes."""
    sizes = np.array([r.input_size for r in runs], np.float64)
    if len(runs) < 2 or len(np.unique(sizes)) < 2:
        raise ValueError("the model needs two or more runs of different input sizes")
    d = np.array([group_distances(r.signature, r.touched_bytes, groups) for r in runs])  # runs x groups
    x = np.log(sizes)
    y = np.log1p(d)
    # pattern choice: least squares of log(d+1) against k log s with a free intercept, per k
    resid = []
    for k in _K:
        z = y - k * x[:, None]
        resid.append(np.sum((z - z.mean(axis=0)) ** 2, axis=0))
    choice = np.argmin(np.array(resid), axis=0)
    still = (np.max(d, axis=0) + 1) / (np.min(d, axis=0) + 1) < 1 + NOISE
    choice[still] = 0
    k = _K[choice]
    f = sizes[:, None] ** k[None, :]  # runs x groups
    fm, dm = f.mean(axis=0), d.mean(axis=0)
    var = np.sum((f - fm) ** 2, axis=0)
    e = np.where(var > 0, np.sum((f - fm) * (d - dm), axis=0) / np.where(var > 0, var, 1), 0.0)
    shrink = (e <= 0) | (k == 0)
    k = np.where(shrink, 0.0, k)
    e = np.where(shrink, 0.0, e)
    c = np.where(shrink, dm, dm - e * fm)
    return Model(c=c, e=e, k=k, sizes=[int(s) for s in sizes], runs=list(runs))


def measured_curve(run: Run, cache_bytes=CACHE_BYTES) -> List[Optional[float]]:
    """A run's measured miss rate at each cache size (bytes), None where its windows could not tell."""
    sig = {int(b): float(r) for b, r in run.signature}
    return [sig.get(int(b) // BLOCK_BYTES) for b in cache_bytes]


def leave_one_out(runs: Sequence[Run], cache_bytes=CHECK_BYTES) -> List[dict]:
    """Each run predicted by the model of the others: [{"input_size", "error" (max abs, None: nothing
    to compare)}, ...]; empty when fewer than three runs (or the others are one size)."""
    out = []
    if len(runs) < 3:
        return out
    for i, held in enumerate(runs):
        rest = [r for j, r in enumerate(runs) if j != i]
        if len({r.input_size for r in rest}) < 2:
            continue
        pred = fit(rest).miss_rates(held.input_size, cache_bytes)
        meas = measured_curve(held, cache_bytes)
        errs = [abs(p - m) for p, m in zip(pred, meas) if m is not None]
        out.append({"input_size": held.input_size, "error": max(errs) if errs else None})
    return out


def confidence(runs: Sequence[Run], predict: Optional[float] = None) -> dict:
    """How sure the model of these runs is: the runs, their span, the leave-one-out check, how far
    ``predict`` lies beyond the largest run, and a one-word verdict (high, medium, low)."""
    sizes = [r.input_size for r in runs]
    span = max(sizes) / min(sizes)
    check = leave_one_out(runs)
    errors = [c["error"] for c in check if c["error"] is not None]
    worst = max(errors) if errors else None
    beyond = None if predict is None else predict / max(sizes)
    if worst is None:
        level = "low"
    elif worst <= 0.03:
        level = "high"
    elif worst <= 0.10:
        level = "medium"
    else:
        level = "low"
    if level == "high" and beyond is not None and beyond > 64:
        level = "medium"
    return {"runs": len(runs), "span": span, "leave_one_out": check, "max_error": worst,
            "extrapolation": beyond, "level": level}
