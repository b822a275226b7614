#!/usr/bin/env python3
"""Why exact mode's Java phases differ from sampled mode's (issue 32): the JVM's threads in the
exact log, and the worker's phases at several interval sizes and tracker settings.

Reads the logs of ``bench/truth/modes.py --dir DIR --only NAME`` (a Java workload), or records the
exact one first (``--record``: modes.py's recording, with the JVM's thread names read from /proc
while it runs, kept in DIR/exact/NAME.names.json). Prints

- each thread of the exact log: its name, its share of the instructions and of the CPU time, its
  intervals and their median CPU time;
- for the thread modes.py scores (the one with the most instructions), ARI against the truth
  (micro: the tracker's phases; macro: engine/macro.py's, the activity time scale) and against
  sampled mode's phases at the same ten points of each activity (modes.py), for each tracker preset
  at each interval size (the recorded 10M, and 10 or 100 recorded intervals merged: 100M, 1000M).
Intervals the agent dropped (its buffer full) are placed by their estimated CPU (truth_score.lost_cpu).

    python3 bench/truth/java_threads.py --dir DIR [--record] [--only java-random-B]
        [--trackers default,paper,...] [--sizes 10,100,1000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import modes  # noqa: E402  (sets up the host's path)
from phasescope.commands.options import add_engine_options, engine_config_from_args  # noqa: E402
from phasescope.engine.macro import macro_phases  # noqa: E402
from phasescope.engine.segments import merge  # noqa: E402
from phasescope.formats.log import read_log  # noqa: E402
from truth_score import lost_cpu, read_truth, score_stream  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


def poll_names(marker: bytes, names: dict, stop: threading.Event) -> None:
    """Thread id -> its last name, of every process whose command line holds ``marker``, until stop."""
    while not stop.wait(0.2):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if marker not in open(f"/proc/{pid}/cmdline", "rb").read():
                    continue
                for tid in os.listdir(f"/proc/{pid}/task"):
                    names[int(tid)] = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            except OSError:
                continue


def record_exact(w, out_dir: str) -> None:
    where = os.path.join(out_dir, "exact")
    os.makedirs(where, exist_ok=True)
    names, stop = {}, threading.Event()
    poller = threading.Thread(target=poll_names, args=(b"JavaWork", names, stop))
    poller.start()
    try:
        modes.record(w, where, 1000, 100, mode="exact")
    finally:
        stop.set()
        poller.join()
    json.dump(names, open(os.path.join(where, w.name + ".names.json"), "w"))


def threads_table(intervals, names: dict) -> None:
    """Each thread's share of the instructions and CPU time. A delta past 2**62 ns is left out: a
    thread's last interval shipped by another thread (its close at the process's exit) carries the
    closer's getrusage(RUSAGE_THREAD) less its own, which wraps (agent/intervals.c, ps_os_sample)."""
    ins, cpu, count, per, wrapped = Counter(), Counter(), Counter(), {}, 0
    for iv in intervals:
        c = iv.cpu_ns or 0
        wrapped += c >= 1 << 62
        c = 0 if c >= 1 << 62 else c
        ins[iv.thread] += iv.instructions or 0
        cpu[iv.thread] += c
        count[iv.thread] += 1
        per.setdefault(iv.thread, []).append(c)
    total_ins, total_cpu = sum(ins.values()), sum(cpu.values())
    print(f"{'thread':>8s} {'name':16s} {'instr':>6s} {'cpu':>6s} {'cpu s':>6s} {'intervals':>9s} {'ms/interval':>11s}")
    for tid, n in ins.most_common():
        print(f"{tid:8d} {names.get(str(tid), '?'):16s} {n / total_ins:6.1%} {cpu[tid] / total_cpu:6.1%} "
              f"{cpu[tid] / 1e9:6.2f} {count[tid]:9d} {np.median(per[tid]) / 1e6:11.2f}")
    print(f"total: {total_ins / 1e9:.1f}G instructions, {total_cpu / 1e9:.1f} s CPU "
          f"({wrapped} wrapped CPU deltas left out)")


def scores(intervals, lost, tracker: str, truth, sampled):
    """(phases, micro ARI, macro ARI, vs sampled micro, vs sampled macro, vs sampled micro against exact macro)."""
    from sklearn.metrics import adjusted_rand_score
    parser = argparse.ArgumentParser()
    add_engine_options(parser)
    config = engine_config_from_args(parser.parse_args(["--tracker", tracker]), interval_default=None,
                                     preset_default=tracker)
    phases, preds, live = modes.classify(intervals, config)
    macros = np.array(macro_phases(np.zeros(len(phases)), phases)[1])  # as the log settles them
    cpu = np.array([iv.cpu_ns or 0 for iv in intervals], float)
    micro = score_stream(cpu, phases, preds, truth, live, lost)
    coarse = score_stream(cpu, macros, np.full(len(macros), -1), truth, lost=lost)
    vs = [None, None, None]
    if sampled is not None:
        cs, ps, ms, ts, ls = sampled
        count = 0
        while count < min(len(truth), len(ts)) and truth[count][0] == ts[count][0]:
            count += 1
        vs = [adjusted_rand_score(modes.at_points(cpu, a, truth, count, lost), modes.at_points(cs, b, ts, count, ls))
              for a, b in ((phases, ps), (macros, ms), (macros, ps))]
    return micro["phases"], micro["ari"], coarse["ari"], *vs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="modes.py's --dir")
    ap.add_argument("--record", action="store_true", help="record the exact run first, with thread names")
    ap.add_argument("--only", default="java-random-B")
    ap.add_argument("--trackers", default="default,paper,stable,clustered,drift")
    ap.add_argument("--sizes", default="10,100,1000", help="interval sizes in millions of instructions")
    args = ap.parse_args()
    w = next(w for w in WORKLOADS if w.name == args.only)
    if args.record:
        record_exact(w, args.dir)
    log = os.path.join(args.dir, "exact", w.name + ".jsonl")
    names_path = os.path.join(args.dir, "exact", w.name + ".names.json")
    names = json.load(open(names_path)) if os.path.exists(names_path) else {}
    every = [iv for iv in read_log(log) if iv.weight]
    threads_table(every, names)
    worker = modes.main_thread(every)
    print(f"scored thread: {worker[0].thread} ({names.get(str(worker[0].thread), '?')})")
    truth = read_truth(w.truth(os.path.join(args.dir, "exact")))
    sampled = None
    s_log = os.path.join(args.dir, "sampled", w.name + ".jsonl")
    if os.path.exists(s_log):
        cs, ps, ms, _, _, ls = modes.phases_of(s_log, "sampled")
        sampled = (cs, ps, ms, read_truth(w.truth(os.path.join(args.dir, "sampled"))), ls)
    print(f"{'size':>5s} {'tracker':10s} {'windows':>7s} {'ms':>6s} {'phases':>6s} {'micro':>6s} {'macro':>6s} "
          f"{'vs s.micro':>10s} {'vs s.macro':>10s} {'macro vs s.micro':>16s}")
    lost = lost_cpu(np.array([iv.seq for iv in worker]), np.array([iv.cpu_ns or 0 for iv in worker], float))
    print(f"dropped by the agent: {worker[-1].seq + 1 - len(worker)} of the thread's intervals, "
          f"{lost.sum() / 1e9:.2f} s of its CPU (placed, not scored)")
    for size in (int(s) for s in args.sizes.split(",")):
        k = size // 10  # recorded intervals (10M) per window
        ivs = [merge(worker[i:i + k], i // k) for i in range(0, len(worker), k)]
        lost_k = np.array([lost[i:i + k].sum() for i in range(0, len(worker), k)])
        ms = np.median([iv.cpu_ns or 0 for iv in ivs]) / 1e6
        for tracker in args.trackers.split(","):
            got = scores(ivs, lost_k, tracker, truth, sampled)
            print(f"{size:4d}M {tracker:10s} {len(ivs):7d} {ms:6.1f} {got[0]:6d} {got[1]:6.2f} {got[2]:6.2f} "
                  + " ".join("-" if v is None else f"{v:{width}.2f}" for v, width in zip(got[3:], (10, 10, 16))),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
