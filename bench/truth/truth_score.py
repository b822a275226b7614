"""Scores of a sampled phase stream against a workload's truth (bench/truth/run.py).

Windows are placed on the thread's CPU time axis by their sampled CPU time (``cpu_ns``, summed in
order), the clock the truth is written in, stretched to the truth's total (they differ by about 1%:
samples lost, and the shell's timer granularity). A window's true activity is the one running at its
midpoint; windows before the first activity (interpreter start-up) are left out. Scores:

- ``ari``, ``v_measure``: of the live phases against the true activities (scikit-learn);
- ``detected``: share of true activity changes with a live phase change at a window boundary no
  earlier than one window before it and no later than ``LATENCY_NS`` of CPU after it;
- ``false_per_10s``: live phase changes that are near no true change, per 10 s of CPU (start-up is
  left out: changes in it and out of it are not inside an activity, though not ones to detect);
- ``recur_same``: share of an activity's later occurrences whose main phase is its first
  occurrence's main phase;
- ``distinct``: share of activities whose main phase is no other activity's main phase;
- ``foretold`` (on the live phases, which the predictions were made for): share of the live phase
  changes near a true change that the prediction shown
  after the previous window named;
- ``shown_acc``, ``last_acc``: share of windows whose phase the prediction shown after the previous
  window named, and the same for last-phase ("no change");
- ``chg_prec``, ``chg_recall``: of the changes the shown prediction named (it differs from the
  current phase), the share that came; of the live changes, the share it named.
"""

import json
from collections import Counter
from typing import List, Optional

import numpy as np

LATENCY_NS = 300_000_000


def read_truth(path: str, own: bool = False) -> List[tuple]:
    """(activity, start, end) per line; ``own``: on the workload's own CPU reading where
    :func:`place_truth` replaced it."""
    start, end = ("own_start_ns", "own_end_ns") if own else ("start_ns", "end_ns")
    with open(path) as f:
        rows = [(r["activity"], r.get(start, r["start_ns"]), r.get(end, r["end_ns"])) for r in map(json.loads, f)]
    return [r for r in rows if r[2] > r[1]]


def wall_to_cpu(t_ns, start_ns, end_ns, cpu_ns) -> np.ndarray:
    """CPU position of each wall-clock time ``t_ns`` on one thread's own windows: the CPU of the
    windows that ended before it, plus the share of the window holding it (``start_ns`` < t <=
    ``end_ns``, the windows' first and last sample times, ``CLOCK_REALTIME``) that had passed,
    linear in wall time. No process can read its own user CPU time exactly (the kernel splits CPU
    time between user and system by ticks), so a workload stamps the wall clock and gets its truth
    on the windows' clock this way (:func:`place_truth`); times before the first window are 0 and
    after the last the total."""
    start, end = np.asarray(start_ns, np.float64), np.asarray(end_ns, np.float64)
    cpu = np.asarray(cpu_ns, np.float64)
    before = np.cumsum(cpu) - cpu
    t = np.asarray(t_ns, np.float64)
    i = np.minimum(np.searchsorted(end, t, side="left"), len(end) - 1)
    share = np.clip((t - start[i]) / np.maximum(end[i] - start[i], 1.0), 0.0, 1.0)
    return before[i] + share * cpu[i]


def main_thread(intervals):
    """The intervals of the thread with the most CPU time (the workloads run on one thread)."""
    cpu = Counter()
    for iv in intervals:
        cpu[iv.thread] += iv.weight
    main = cpu.most_common(1)[0][0]
    return [iv for iv in intervals if iv.thread == main]


def place_truth(truth_path: str, log_path: str) -> None:
    """Put a truth file on the clock of a sampled log's windows: each line's wall-clock stamps
    (``start_wall_ns``, ``end_wall_ns``) placed among the windows of the log's main thread
    (:func:`wall_to_cpu`) become its ``start_ns``/``end_ns``; the workload's own CPU readings stay as
    ``own_start_ns``/``own_end_ns``. An exact log (CPU time measured per interval) is left alone."""
    from phasescope.formats.log import read_log
    with open(truth_path) as f:
        rows = [json.loads(line) for line in f]
    ivs = main_thread(list(read_log(log_path)))
    if not ivs or ivs[0].mode != "sampled":
        return
    with open(truth_path, "w") as f:
        for r, (_, s, e) in zip(rows, placed(rows, ivs)):
            own = {"own_start_ns": r.get("own_start_ns", r["start_ns"]), "own_end_ns": r.get("own_end_ns", r["end_ns"])}
            f.write(json.dumps({**r, **own, "start_ns": int(s), "end_ns": int(e)}) + "\n")


def placed(rows: List[dict], ivs) -> List[tuple]:
    """(activity, start, end) of truth lines (their ``start_wall_ns``, ``end_wall_ns``) on the clock
    of one thread's windows ``ivs`` (:func:`wall_to_cpu`)."""
    times = [t for r in rows for t in (r["start_wall_ns"], r["end_wall_ns"])]
    cpu = wall_to_cpu(times, [iv.start_ns for iv in ivs], [iv.end_ns for iv in ivs], [iv.cpu_ns or 0 for iv in ivs])
    return [(r["activity"], float(s), float(e)) for r, s, e in zip(rows, cpu[0::2], cpu[1::2])]


def exact_truth(truth_path: str, ivs) -> tuple:
    """(truth, placed) of an exact log's thread ``ivs``: the truth's wall-clock stamps placed among its
    intervals when it has them (``placed`` true), else the workload's own CPU reading. That reading
    is user time (pylibs.py), while an exact interval's CPU is user and system time (the agent's
    thread clock), and exact mode's system time comes in bursts (Stalker compiling new code): on one
    truth-A recording every later change was placed 5-20 intervals early (docs/quality.md, stop 43)."""
    with open(truth_path) as f:
        rows = [json.loads(line) for line in f]
    if rows and all("start_wall_ns" in r for r in rows):
        return [t for t in placed(rows, ivs) if t[2] > t[1]], True
    return read_truth(truth_path), False


def window_span(cpu_ns: np.ndarray, truth: List[tuple], lost: Optional[np.ndarray] = None,
                stretch: bool = True) -> tuple:
    """(start, end) of each window of one thread on the truth's CPU clock; ``lost``: CPU of the
    thread not in the log just before each window (see :func:`lost_cpu`), which moves it and all
    after it. ``stretch``: the windows' total is stretched onto the truth's end (a truth on the
    workload's own clock); false for a truth placed on the windows' clock already (:func:`exact_truth`),
    where the run's tail after its last activity would shift every window."""
    cpu = np.asarray(cpu_ns, dtype=np.float64)
    end = np.cumsum(cpu if lost is None else cpu + lost)
    scale = truth[-1][2] / end[-1] if stretch and len(end) and end[-1] > 0 else 1.0
    if not 0.9 < scale < 1.1:
        scale = 1.0  # within 10%: samples lost or rounded, stretch onto the truth's clock
    return (end - cpu) * scale, end * scale


def lost_cpu(seqs: np.ndarray, cpu_ns: np.ndarray, around: int = 8) -> np.ndarray:
    """Per window of one thread (its ``seq`` numbers, in order), the CPU estimated for the intervals
    missing just before it: those the agent dropped (its buffer full, "dropped N" in the status
    line), each taken as the mean of the ``around`` windows on either side. Without it one dropped
    interval shifts every later window of an exact log against the truth by its CPU time."""
    missing = np.diff(np.asarray(seqs, dtype=np.int64), prepend=-1) - 1
    local = np.array([cpu_ns[max(0, i - around):i + around].mean() for i in range(len(cpu_ns))])
    return np.maximum(missing, 0) * local


def true_bounds(truth: List[tuple]) -> np.ndarray:
    """The truth's activity changes: the start of each segment whose activity differs from the one before."""
    return np.array([truth[i][1] for i in range(1, len(truth)) if truth[i][0] != truth[i - 1][0]], np.float64)


def changes_near_truth(cpu_ns: np.ndarray, stream: np.ndarray, truth: List[tuple],
                       lost: Optional[np.ndarray] = None, stretch: bool = True) -> List[int]:
    """Indices ``i`` of one thread's windows where ``stream`` changes (``stream[i] != stream[i - 1]``)
    near a true change: from a window before it to ``LATENCY_NS`` after (the changes ``foretold``
    is scored on)."""
    start, end = window_span(cpu_ns, truth, lost, stretch)
    bounds, window = true_bounds(truth), float(np.median(end - start)) if len(cpu_ns) else 0.0
    to = np.nonzero(stream[1:] != stream[:-1])[0] + 1
    return [int(i) for i in to if np.any((start[i] >= bounds - window) & (start[i] <= bounds + LATENCY_NS))]


def score_stream(cpu_ns: np.ndarray, phases: np.ndarray, predictions: np.ndarray, truth: List[tuple],
                 live: Optional[np.ndarray] = None, lost: Optional[np.ndarray] = None, stretch: bool = True) -> dict:
    """``cpu_ns``, ``phases`` (as the log settles them), ``predictions``: per window of one thread,
    in order; ``live``: the phases as shown live, which the predictions are scored against
    (default: ``phases``); ``lost``, ``stretch``: as in :func:`window_span`."""
    from sklearn.metrics import adjusted_rand_score, v_measure_score
    start, end = window_span(cpu_ns, truth, lost, stretch)
    mid = (start + end) / 2
    starts = np.array([s for _, s, _ in truth], dtype=np.float64)
    seg = np.searchsorted(starts, mid, side="right") - 1
    keep = (seg >= 0) & (mid <= truth[-1][2])
    names = np.array([truth[i][0] if i >= 0 else "" for i in seg])
    labels, ph = names[keep], phases[keep]
    out = {"windows": int(keep.sum()), "activities": len(set(labels)), "segments": len(truth),
           "phases": len(set(ph.tolist())),
           "ari": float(adjusted_rand_score(labels, ph)), "v_measure": float(v_measure_score(labels, ph))}
    # changes: true boundaries (activity differs) vs live changes at window boundaries
    bounds = true_bounds(truth)
    window = float(np.median(end - start)) if len(cpu_ns) else 0.0
    near = lambda t: np.any((t >= bounds - window) & (t <= bounds + LATENCY_NS))
    inside = lambda t: t > truth[0][1] + LATENCY_NS  # changes in and out of start-up are in no activity

    live = phases if live is None else live
    change_at = start[1:][phases[1:] != phases[:-1]]
    detected = sum(1 for b in bounds if np.any((change_at >= b - window) & (change_at <= b + LATENCY_NS)))
    false = sum(1 for t in change_at if inside(t) and not near(t))
    span = truth[-1][2] - truth[0][1]
    out.update(detected=detected / len(bounds) if len(bounds) else None, true_changes=len(bounds),
               false_per_10s=false / (span / 1e10), live_changes=len(change_at))
    live_true = changes_near_truth(cpu_ns, live, truth, lost, stretch)
    out["foretold"] = (sum(1 for i in live_true if predictions[i - 1] == live[i]) / len(live_true)
                       if live_true else None)
    out.update(prediction_scores(live, predictions))
    # occurrences
    occ_main = []  # (activity, main phase) per truth segment, in order
    for k, (name, s, e) in enumerate(truth):
        inside = (mid >= s) & (mid < e)
        if inside.any():
            vals, cnt = np.unique(phases[inside], return_counts=True)
            occ_main.append((name, int(vals[cnt.argmax()])))
    first = {}
    later, same = 0, 0
    for name, p in occ_main:
        if name in first:
            later += 1
            same += p == first[name]
        else:
            first[name] = p
    out["recur_same"] = same / later if later else None
    overall = {}
    for name in set(labels):
        vals, cnt = np.unique(ph[labels == name], return_counts=True)
        overall[name] = int(vals[cnt.argmax()])
    mains = list(overall.values())
    out["distinct"] = sum(1 for p in mains if mains.count(p) == 1) / len(mains) if mains else None
    return out


def prediction_scores(phases: np.ndarray, predictions: np.ndarray) -> dict:
    """Accuracy of the shown prediction and of last-phase, and precision and recall of the shown
    prediction's changes (see the module docstring)."""
    now, nxt, pred = phases[:-1], phases[1:], predictions[:-1]
    said = pred != now
    came = nxt != now
    return {"shown_acc": float(np.mean(pred == nxt)) if len(nxt) else None,
            "last_acc": float(np.mean(now == nxt)) if len(nxt) else None,
            "chg_prec": float(np.mean(pred[said] == nxt[said])) if said.any() else None,
            "chg_recall": float(np.mean(pred[came] == nxt[came])) if came.any() else None}
