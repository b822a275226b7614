"""Phase label streams: the live log's, and the reference's.

- A phasescope interval log (JSON Lines, :mod:`phasescope.records`): one label per record, its
  ``phase``, with the record's ``thread``, ``instructions`` and predictions (``predictions``,
  and ``prediction``/``confidence``/``expected_remaining`` when the log has them).
- A SimPoint labels file (``simpoint -saveLabels``): one line per interval, ``label distance``
  (the distance is optional here); intervals are taken as equally long.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from phasescope.errors import InputError
from phasescope.formats.lines import numbered_lines, refuse_pipe
from phasescope.formats.log import log_records, settled_phases
from phasescope.sinks.base import write_whole


@dataclass
class LabelStream:
    """Labels of a sequence of intervals in file order."""

    labels: np.ndarray  # int64
    instructions: Optional[np.ndarray] = None  # float64 per interval; None: equal intervals
    threads: Optional[np.ndarray] = None  # int64 per interval; None: one thread
    predictions: Dict[str, np.ndarray] = field(default_factory=dict)  # name -> prediction per interval
    confidence: Optional[np.ndarray] = None
    path: str = ""

    def __len__(self) -> int:
        return len(self.labels)


def _int_field(rec: dict, name: str, where: str) -> int:
    v = rec.get(name)
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"{where}: field {name!r} must be an integer (got {v!r})")
    return v


def read_log_labels(path: str) -> LabelStream:
    """Labels (as the log settles them: every ``relabel`` applied), threads, instructions and
    predictions of a phasescope interval log."""
    labels, instr, threads = [], [], []
    relabels = []  # what the log settles the labels with (formats/log.settled_phases)
    preds: Dict[str, List[int]] = {}
    shown: List[Optional[int]] = []
    conf: List[Optional[float]] = []
    n = 0
    for where, rec in log_records(path):
        if "phase" not in rec:
            raise InputError(f"{where}: missing field 'phase' (not a classified interval log)")
        labels.append(_int_field(rec, "phase", where))
        relabels.append({k: rec.get(k) for k in ("phase", "pid", "seq", "relabel", "relabel_seq")})
        threads.append(_int_field(rec, "thread", where) if "thread" in rec else 0)
        # the interval's weight: its instructions, or in sampled mode its CPU time (alignment by fraction)
        weight = "cpu_ns" if rec.get("instructions", 1) is None else "instructions"
        instr.append(_int_field(rec, weight, where) if weight in rec else 1)
        p = rec.get("predictions") or {}
        if not isinstance(p, dict):
            raise InputError(f"{where}: field 'predictions' must be an object")
        for name, v in p.items():
            preds.setdefault(name, [-1] * n).append(v if isinstance(v, int) and not isinstance(v, bool) else -1)
        for name, lst in preds.items():
            if len(lst) == n:  # a predictor missing from this record
                lst.append(-1)
        v = rec.get("prediction")
        shown.append(v if isinstance(v, int) and not isinstance(v, bool) else None)
        c = rec.get("confidence")
        conf.append(float(c) if isinstance(c, (int, float)) and not isinstance(c, bool) else None)
        n += 1
    if n == 0:
        raise InputError(f"{path}: no intervals")
    labels = settled_phases(relabels, path)
    out = LabelStream(np.array(labels, np.int64), np.array(instr, np.float64), np.array(threads, np.int64),
                      {k: np.array(v, np.int64) for k, v in preds.items()}, path=path)
    if any(s is not None for s in shown):
        out.predictions["shown"] = np.array([-1 if s is None else s for s in shown], np.int64)
    if any(c is not None for c in conf):
        out.confidence = np.array([math.nan if c is None else c for c in conf])
    return out


def read_simpoint_labels(path: str) -> LabelStream:
    """A SimPoint ``-saveLabels`` file: ``label [distance]`` per line."""
    labels = []
    for lineno, line in numbered_lines(path):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split()
        try:
            if len(parts) > 2:
                raise ValueError
            label = int(parts[0])
            if label < 0:
                raise ValueError
            if len(parts) == 2:
                float(parts[1])
        except ValueError:
            raise InputError(f"{path}:{lineno}: malformed label line: expected 'label distance' "
                             f"(SimPoint -saveLabels), got {text[:40]!r}") from None
        labels.append(label)
    if not labels:
        raise InputError(f"{path}: no labels")
    return LabelStream(np.array(labels, np.int64), path=path)


def read_labels(path: str) -> LabelStream:
    """A reference: a phasescope log (first non-blank line starts with ``{``) or a SimPoint labels file.
    Not a pipe (``--reference -`` of a pipeline): its first line is read, then the whole again."""
    refuse_pipe(path, "its format is read from its first line before the whole is read: give a file")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            first = next((ln for ln in f if ln.strip()), "")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    if not first:
        raise InputError(f"{path}: empty input")
    return read_log_labels(path) if first.lstrip().startswith("{") else read_simpoint_labels(path)


def write_simpoint_labels(path: str, labels, distances=None) -> None:
    """Write ``label distance`` lines (SimPoint's -saveLabels format), whole
    (:func:`~phasescope.sinks.base.write_whole`: a stop signal midway leaves the old file)."""
    d = np.zeros(len(labels)) if distances is None else np.asarray(distances, dtype=np.float64)
    text = "".join(f"{lab} {dist:.6g}\n" for lab, dist in zip(np.asarray(labels).tolist(), d.tolist()))

    def write(p: str) -> None:
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)

    write_whole(path, write, ".phasescope-labels-")
