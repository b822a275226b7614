"""The interval log: one JSON object per line, written by the live monitor and by replay.

Fields of each record (the reader needs only ``thread``, ``thread_seq``, ``instructions`` and
``blocks``; it ignores fields it does not know, so writers may add some):

- ``pid``, ``comm`` (int, str): system-wide runs (``-a``) only: the interval's process and its
  command name (each process has its own engine, so ``seq`` and ``phase`` are per process; a
  process retired to make room that comes back, or a reused pid, gets a new engine, from 0 again).
- ``seq`` (int): global arrival order of classified intervals, from 0 (per engine).
- ``thread`` (int): thread id.
- ``thread_seq`` (int): the interval's number within its thread, from 0.
- ``mode`` (str): ``exact`` (Stalker's counts) or ``sampled`` (kernel CPU-clock samples).
- ``instructions`` (int or null): instructions executed in the interval; null in sampled mode.
- ``samples`` (int or null): sampled mode, the samples in the interval (``blocks`` counts them).
- ``cpu_ns`` (int or null): CPU time of the interval (sampled: samples x period; exact: the OS's).
- ``partial`` (bool): cut short by thread exit, process exit or detach.
- ``phase`` (int): phase ID given by the tracker.
- ``distance`` (float or null): Manhattan (L1) distance from the interval's footprint to the
  nearest representative before classification, as a fraction of the interval (the default
  tracker's threshold is the paper's, 0.10; ``--tracker coarse``'s 0.30; the page tracker's are
  each phase's own, up to 0.9); null when the phase table was empty.
- ``new_phase`` (bool): the interval started a new phase ID.
- ``relabel`` (int) and ``relabel_seq`` (array of int), only when present: the intervals of those
  ``seq`` belong to phase ``relabel`` after all. The page tracker held the thread's previous
  interval in its current phase and this one confirmed where it went; or (``transition``) those
  intervals formed a candidate, labelled with their nearest phase meanwhile, that this one
  confirmed as the new phase ``relabel``; or this one folded a phase into ``relabel`` (``overlap``,
  or the page tracker's young phase), and those are that phase's earlier intervals. A log reader
  that wants settled labels applies them late (:func:`settled_phases`); the summary's statistics
  are settled the same way (:mod:`phasescope.engine.stats`; a folded phase keeps the intervals it
  had, ``merged_into`` naming the phase that counts them), while the live view's changes keep the
  labels given at the time.
- ``macro`` (int or null): the macro phase of the thread's window ending here (engine/macro.py,
  the activity time scale; null: ``--macro-window 0``), as the live view showed it.
- ``macro_relabel`` (int) and ``macro_relabel_seq`` (array of int), only when present: the
  intervals of those ``seq`` belong to macro phase ``macro_relabel`` after all (the change point
  saw the change of activity some intervals after it began). Settled like ``relabel``
  (:func:`settled_phases` with ``kind="macro_"``).
- ``predictions`` (object): each predictor's prediction of this thread's next phase, by name
  (:data:`phasescope.engine.predict.PREDICTORS`).
- ``prediction`` (int): the prediction shown (``--shown-prediction``'s);
  ``confidence`` (float, 0..1): its confidence; ``expected_remaining`` (int or null): further
  intervals expected in the current phase (0: a change is predicted next; null: unknown).
- ``start_ns``, ``end_ns`` (int): wall clock (CLOCK_REALTIME, ns) at the interval's start and
  end, 0 when unknown; ``wall_ns`` (int): their difference.
- ``os`` (object or null): OS counter deltas over the interval (``cpu_ns``, ``minflt``,
  ``majflt``, ``nvcsw``, ``nivcsw``), null when unknown.
- ``blocks`` (array): the sparse basic-block vector, ``[[stable_key, instructions], ...]``, so
  a log replays under any tracker setting. Stable keys are described in :mod:`phasescope.sources.modules`.
- ``stacks`` (array, sampled mode with stacks only): ``[[samples, leaf_key, caller_key, ...], ...]``,
  each distinct call stack of the interval innermost first; its samples add up to ``samples``.
- ``frames`` (array, with ``stacks``): ``[[stable_key, module, function], ...]``, the name of
  every key of ``stacks`` (module and function each null when unknown), so a log names its code
  without the binaries (``phasescope profile``).

One other record may follow the intervals (readers that do not ask for it skip it): ``{"names":
[[stable_key, module, function], ...]}``, exact mode's compiled Java method keys as the live run
named them from the JVM's tables before the target ended (``[jit]``, ``java Holder.name``), which
no file names afterwards (:meth:`phasescope.sinks.log.JsonlLog.before_end`; stop 47).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Iterator, Optional, Tuple

import numpy as np

from phasescope.errors import InputError
from phasescope.engine.interval import OS_FIELDS, Interval
from phasescope.engine.phase_table import Match, settled
from phasescope.formats.lines import numbered_lines

if TYPE_CHECKING:  # the engine loads after a live run's target has started (commands/monitor.py)
    from phasescope.engine.phase_engine import IntervalResult


def process_fields(iv: Interval) -> dict:
    """``pid`` and ``comm`` of an interval of a stream of several processes (``-a``), else nothing."""
    return {} if iv.pid is None else {"pid": iv.pid, "comm": iv.comm}


def to_record(iv: Interval, r: IntervalResult) -> dict:
    """The log record of a classified interval."""
    return {
        **process_fields(iv),
        "seq": r.seq,
        "thread": iv.thread,
        "thread_seq": iv.seq,
        "mode": iv.mode,
        "instructions": iv.instructions,
        "samples": iv.samples if iv.mode == "sampled" else None,
        "cpu_ns": iv.cpu_ns,
        "partial": iv.partial,
        "phase": r.phase,
        "distance": r.distance,
        "new_phase": r.new_phase,
        "predictions": r.predictions,
        "prediction": r.prediction,
        "confidence": r.confidence,
        "expected_remaining": r.expected_remaining,
        "start_ns": iv.start_ns,
        "end_ns": iv.end_ns,
        "wall_ns": iv.wall_ns,
        "os": iv.os,
        "blocks": np.column_stack((iv.keys, iv.counts)).tolist(),
        **stack_fields(iv),
        **relabel_fields(r),
        "macro": r.macro,
        **relabel_fields(r, "macro_"),
    }


def relabel_fields(r: IntervalResult, kind: str = "") -> dict:
    """``relabel`` and ``relabel_seq`` of a result that relabels earlier intervals, else nothing
    (the log's records and the event stream's ``interval`` events); ``kind="macro_"``: the same of
    its macro phases (``macro_relabel``, ``macro_relabel_seq``)."""
    phase = getattr(r, kind + "relabel")
    return {} if phase is None else {kind + "relabel": phase, kind + "relabel_seq": list(getattr(r, kind + "relabel_seqs"))}


def settled_phases(records, path: str = "", kind: str = "") -> list:
    """The ``phase`` of a log's records (in file order, from the run's start; each engine's
    ``seq`` from 0: ``-a`` logs several processes, and a process again from 0 where it got a new
    engine, retired and back or a reused pid) with every ``relabel`` applied
    (:func:`phasescope.engine.phase_table.settled`); ``kind="macro_"``: their ``macro`` with every
    ``macro_relabel`` applied. A record without the label (a log written before macro phases were
    logged has no ``macro``) or a relabel that names no earlier interval of its engine is an
    InputError (``path`` names the log)."""
    label, relabel, field = ("macro" if kind else "phase"), kind + "relabel", kind + "relabel_seq"
    missing = next((i for i, r in enumerate(records) if label not in r), None)
    if missing is not None:
        raise InputError(f"{path}: record {missing + 1}: no field {label!r}")
    phases = [r[label] for r in records]
    runs: dict = {}  # pid -> the rows of its engine's records so far
    by_engine: list = []
    for i, r in enumerate(records):
        rows = runs.get(r.get("pid"))
        if rows is None or r.get("seq") == 0:  # a new engine numbers its seq from 0 again
            rows = runs[r.get("pid")] = []
            by_engine.append(rows)
        rows.append(i)
    for rows in by_engine:
        matches = []
        for n, i in enumerate(rows):
            r = records[i]
            seqs = r.get(field) if r.get(relabel) is not None else None
            if seqs is not None and not (isinstance(seqs, list) and all(type(s) is int and 0 <= s < n for s in seqs)):
                raise InputError(f"{path}: record {i + 1}: field {field!r} must list earlier intervals' seq")
            matches.append(Match(r[label], None, False, relabel=r.get(relabel) if seqs else None, relabel_seqs=seqs))
        for i, p in zip(rows, settled(matches)):
            phases[i] = p
    return phases


def stack_fields(iv: Interval) -> dict:
    """``stacks`` and ``frames`` of an interval that has stacks, else nothing."""
    if iv.stacks is None:
        return {}
    return {"stacks": iv.stacks, "frames": [[k, m, f] for k, (m, f) in iv.frames.items()]}


def dumps(record: dict) -> str:
    """One log line (no newline)."""
    return json.dumps(record, separators=(",", ":"))


def _int(rec: dict, name: str, where: str, default: Optional[int] = None) -> int:
    v = rec.get(name, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InputError(f"{where}: field {name!r} must be a non-negative integer (got {v!r})")
    return v


def _blocks(value, where: str):
    if not isinstance(value, list):
        raise InputError(f"{where}: field 'blocks' must be a list of [key, instructions] pairs")
    if not value:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    try:
        arr = np.array(value)
        if arr.dtype.kind not in "iu":
            # Keys of 2**63 and above (half of all module keys) make numpy infer float64 or object:
            # convert those exactly, after checking that every item really is an integer.
            if not all(type(x) is int for pair in value for x in (pair if isinstance(pair, list) else (pair,))):
                raise ValueError("not integers")
            arr = np.array(value, dtype=np.uint64)
    except (ValueError, OverflowError, TypeError):
        arr = None
    if arr is None or arr.ndim != 2 or arr.shape[1] != 2 or arr.dtype.kind not in "iu" or (
            arr.dtype.kind == "i" and arr.min() < 0):
        raise InputError(f"{where}: field 'blocks' must be a list of [key, instructions] pairs "
                         "of non-negative integers below 2**64")
    arr = arr.astype(np.uint64)
    return np.ascontiguousarray(arr[:, 0]), np.ascontiguousarray(arr[:, 1])


def _is_key(x) -> bool:
    return type(x) is int and 0 <= x < 2**64


def _stacks(rec: dict, where: str, samples: Optional[int]):
    """``(stacks, frames)`` of a record (None, None when it has none; logs before stacks)."""
    stacks, frames = rec.get("stacks"), rec.get("frames")
    if stacks is None and frames is None:
        return None, None
    if not (isinstance(stacks, list) and all(
            isinstance(s, list) and len(s) >= 2 and all(_is_key(x) for x in s) for s in stacks)):
        raise InputError(f"{where}: field 'stacks' must be a list of [samples, key, ...] lists of integers")
    if samples is not None and sum(s[0] for s in stacks) != samples:
        raise InputError(f"{where}: the samples of 'stacks' must add up to 'samples'")
    return stacks, _frames(frames, where, "frames")


def load_record(line: str, where: str) -> dict:
    """The JSON object of one log line; ``where`` (``FILE:LINE``) prefixes any error."""
    try:
        rec = json.loads(line)
    except ValueError as e:
        raise InputError(f"{where}: not a JSON record ({e.msg} at column {e.colno})") from None
    if not isinstance(rec, dict):
        raise InputError(f"{where}: not a JSON object")
    return rec


#: the cut-short last lines already said (``FILE:LINE``)
_CUT_SAID: set = set()


def log_records(path: str, names: Optional[dict] = None) -> Iterator[Tuple[str, dict]]:
    """``(FILE:LINE, record)`` of every interval record of a log; a ``names`` record's frames go into
    ``names`` (key -> (module, function)) when given. A last line cut short (no newline and not
    JSON: the run was killed while writing it) is left out with a warning on stderr; a bad line
    anywhere else is an InputError."""
    n = 0
    for lineno, line in numbered_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            rec = load_record(line, where)
        except InputError:
            if line.endswith("\n"):
                raise
            if where not in _CUT_SAID:  # plot and score read a log twice: said once
                _CUT_SAID.add(where)
                print(f"phasescope: {where}: the last line is cut short (the run ended while writing it); "
                      f"reading the {n} records before it", file=sys.stderr)
            return
        if "names" in rec and "thread" not in rec:
            (names if names is not None else {}).update(_frames(rec["names"], where, "names"))
            continue
        n += 1
        yield where, rec


def _frames(frames, where: str, field: str) -> dict:
    """key -> (module, function) of a ``[[key, module, function], ...]`` field (InputError if malformed)."""
    if not (isinstance(frames, list) and all(
            isinstance(f, list) and len(f) == 3 and _is_key(f[0]) and all(x is None or isinstance(x, str) for x in f[1:])
            for f in frames)):
        raise InputError(f"{where}: field '{field}' must be a list of [key, module, function] "
                         "(module and function strings or null)")
    return {f[0]: (f[1], f[2]) for f in frames}


def parse_record(line: str, where: str) -> Interval:
    """The interval of one log line; ``where`` (``FILE:LINE``) prefixes any error."""
    return interval_of(load_record(line, where), where)


def interval_of(rec: dict, where: str) -> Interval:
    """The interval of one log record; ``where`` (``FILE:LINE``) prefixes any error."""
    for name in ("thread", "thread_seq", "instructions", "blocks"):
        if name not in rec:
            raise InputError(f"{where}: missing field {name!r}")
    os_ = rec.get("os")
    if os_ is not None and not (isinstance(os_, dict) and all(
            isinstance(os_.get(f, 0), int) and not isinstance(os_.get(f, 0), bool) for f in OS_FIELDS)):
        raise InputError(f"{where}: field 'os' must be null or an object of integer counters")
    partial = rec.get("partial", False)
    if not isinstance(partial, bool):
        raise InputError(f"{where}: field 'partial' must be true or false")
    keys, counts = _blocks(rec["blocks"], where)
    sampled = rec.get("mode") == "sampled"
    if sampled:
        samples, cpu_ns = _int(rec, "samples", where), _int(rec, "cpu_ns", where)
        if rec["instructions"] is not None or samples != int(counts.sum()):
            raise InputError(f"{where}: a sampled record has null 'instructions' and 'samples' equal to its blocks' sum")
    stacks, frames = _stacks(rec, where, samples if sampled else None)
    return Interval(
        stacks=stacks,
        frames=frames,
        thread=_int(rec, "thread", where),
        seq=_int(rec, "thread_seq", where),
        instructions=None if sampled else _int(rec, "instructions", where),
        mode="sampled" if sampled else "exact",
        samples=samples if sampled else 0,
        period_ns=cpu_ns // samples if sampled and samples else 0,
        keys=keys,
        counts=counts,
        start_ns=_int(rec, "start_ns", where, 0),
        end_ns=_int(rec, "end_ns", where, 0),
        partial=partial,
        os=os_,
    )


def read_log(path: str, names: Optional[dict] = None) -> Iterator[Interval]:
    """Intervals of a phasescope log, in file order (see :func:`log_records`; ``names`` as there)."""
    for where, rec in log_records(path, names):
        yield interval_of(rec, where)
