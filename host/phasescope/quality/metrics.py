"""Scores of a live phase stream against a reference (Sherwood, Sair & Calder, ISCA 2003, 4.5).

Pairs are consecutive intervals of one thread (file order within a thread).

- ``changes_detected``: the paper's "Different Phases" line of Figure 6. Of the pairs the
  reference puts in different phases (a reference phase change), the share the live tracker also
  puts in different phases (a live phase change at the same interval).
- ``same_agreed``: the paper's "Same Phases" line. Of the pairs the reference puts in the same
  phase, the share the live tracker also puts in the same phase.
- ``misclassified``: the paper's misclassification: pairs where live and reference disagree on
  same/different, as a share of all pairs.
- ``ari``: adjusted Rand index of the live and reference labels of all intervals (Hubert & Arabie;
  1 = identical partitions up to renaming, about 0 = chance).
- ``phases``: distinct live phase IDs; ``reference_phases``: distinct reference labels.
- ``top20_coverage``: share of intervals in the 20 live phases with the most intervals.
- predictions: a prediction made after interval i of a thread is scored against that thread's
  interval i+1 live phase; ``overall`` over all such pairs, ``changes`` over those where the live
  phase changed (the paper's accuracy at phase changes).

Alignment: when the reference has as many intervals as the live stream, interval i matches
reference interval i. Otherwise each live interval takes the label of the reference interval that
holds its midpoint, measured as a fraction of all instructions (live intervals weighted by their
``instructions``, reference intervals by theirs or, for a SimPoint labels file, equally).
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from .labels import LabelStream

TOP = 20


def comb2(x):
    x = np.asarray(x, dtype=np.float64)
    return x * (x - 1) / 2


def contingency(a, b) -> np.ndarray:
    """Contingency table of two labelings (rows: distinct values of a, columns: of b)."""
    _, ia = np.unique(np.asarray(a), return_inverse=True)
    _, ib = np.unique(np.asarray(b), return_inverse=True)
    table = np.zeros((ia.max() + 1 if len(ia) else 0, ib.max() + 1 if len(ib) else 0), dtype=np.int64)
    np.add.at(table, (ia, ib), 1)
    return table


def adjusted_rand_index(a, b) -> float:
    """Adjusted Rand index (Hubert & Arabie 1985), numpy only; 1.0 for two trivial partitions."""
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    if len(a) != len(b):
        raise ValueError("labelings differ in length")
    n = len(a)
    if n < 2:
        return 1.0
    t = contingency(a, b)
    index = comb2(t).sum()
    sa, sb = comb2(t.sum(axis=1)).sum(), comb2(t.sum(axis=0)).sum()
    expected = sa * sb / comb2(n)
    maximum = (sa + sb) / 2
    if maximum == expected:  # both partitions trivial (all one cluster or all singletons)
        return 1.0
    return float((index - expected) / (maximum - expected))


def align(live: LabelStream, ref: LabelStream) -> np.ndarray:
    """Reference label of each live interval (see the module docstring)."""
    if len(ref) == len(live):
        return ref.labels.copy()
    li = live.instructions if live.instructions is not None else np.ones(len(live))
    ri = ref.instructions if ref.instructions is not None else np.ones(len(ref))
    lc, rc = np.cumsum(li), np.cumsum(ri)
    mid = (lc - li / 2) / lc[-1]
    edges = rc / rc[-1]
    idx = np.minimum(np.searchsorted(edges, mid, side="right"), len(ref) - 1)
    return ref.labels[idx]


def _pairs(threads: np.ndarray):
    """(prev, next) index arrays of consecutive intervals of the same thread, in file order."""
    n = len(threads)
    order = np.lexsort((np.arange(n), threads))  # stable: by thread, then file order
    same = threads[order[1:]] == threads[order[:-1]]
    return order[:-1][same], order[1:][same]


def _ratio(num, den) -> Optional[float]:
    return float(num) / float(den) if den else None


def top_coverage(labels, top: int = TOP) -> float:
    _, counts = np.unique(np.asarray(labels), return_counts=True)
    return float(np.sort(counts)[::-1][:top].sum() / counts.sum()) if len(counts) else 0.0


def prediction_scores(labels: np.ndarray, predictions: Dict[str, np.ndarray], threads: np.ndarray) -> dict:
    """Accuracy of each predictor, overall and at live phase changes (see the module docstring)."""
    prev, nxt = _pairs(threads)
    change = labels[nxt] != labels[prev]
    out = {}
    for name, pred in predictions.items():
        right = pred[prev] == labels[nxt]
        out[name] = {"n": int(len(prev)), "overall": _ratio(right.sum(), len(prev)),
                     "changes_n": int(change.sum()), "changes": _ratio((right & change).sum(), change.sum())}
    return out


def recurring_changes(labels: np.ndarray, threads: np.ndarray) -> Optional[float]:
    """Share of a thread's phase changes (A -> B) whose pair A -> B the thread showed before: the
    most a predictor that learns from history can foresee, even with perfect timing. Last-phase
    mispredicts exactly the changes, so this is also the largest cut in its mispredictions any
    such predictor can make (None without changes)."""
    prev, nxt = _pairs(threads)
    seen, changes, recurring = set(), 0, 0
    for t, a, b in zip(threads[prev].tolist(), labels[prev].tolist(), labels[nxt].tolist()):
        if a != b:
            changes += 1
            recurring += (t, a, b) in seen
            seen.add((t, a, b))
    return _ratio(recurring, changes)


def score(live: LabelStream, ref: LabelStream) -> dict:
    """All scores of ``live`` against ``ref`` (a JSON-serialisable dict)."""
    ref_labels = align(live, ref)
    threads = live.threads if live.threads is not None else np.zeros(len(live), np.int64)
    prev, nxt = _pairs(threads)
    ref_change = ref_labels[nxt] != ref_labels[prev]
    live_change = live.labels[nxt] != live.labels[prev]
    preds = dict(live.predictions)
    if "last_phase" not in preds:
        preds["last_phase"] = live.labels.copy()
    out = {
        "intervals": int(len(live)),
        "reference_intervals": int(len(ref)),
        "pairs": int(len(prev)),
        "reference_changes": int(ref_change.sum()),
        "live_changes": int(live_change.sum()),
        "changes_detected": _ratio((ref_change & live_change).sum(), ref_change.sum()),
        "same_agreed": _ratio((~ref_change & ~live_change).sum(), (~ref_change).sum()),
        "misclassified": _ratio((ref_change != live_change).sum(), len(prev)),
        "ari": adjusted_rand_index(live.labels, ref_labels),
        "phases": int(len(np.unique(live.labels))),
        "reference_phases": int(len(np.unique(ref_labels))),
        "top20_coverage": top_coverage(live.labels),
        "predictors": prediction_scores(live.labels, preds, threads),
        "recurring_changes": recurring_changes(live.labels, threads),
    }
    if live.confidence is not None and "shown" in preds:
        conf = live.confidence[prev]
        right = preds["shown"][prev] == live.labels[nxt]
        ok = ~np.isnan(conf)
        hi = ok & (conf >= 0.5)
        out["confidence"] = {"mean": float(conf[ok].mean()) if ok.any() else None,
                             "accuracy_when_confident": _ratio((right & hi).sum(), hi.sum()),
                             "accuracy_when_not": _ratio((right & ok & ~hi).sum(), (ok & ~hi).sum()),
                             "confident_share": _ratio(hi.sum(), ok.sum())}
    return out
