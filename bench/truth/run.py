#!/usr/bin/env python3
"""Sampled mode against constructed truth: long workloads whose activities are known (issue 15).

Each workload (bench/truth/workloads.py) drives real code: python3 calling this system's libraries
(SQLite, liblzma, libbz2, zlib, OpenSSL, expat, libmpdec, ...) or the parts of the interpreter, and
the sqlite3 shell running statements of several kinds, node (a JIT runtime), a PostgreSQL backend and
openssl speed (a real tool's own phases) attached with -p, for 0.6-3 s of CPU per activity, in a random
order or a fixed cycle, logging which activity ran when in the thread's user CPU time. Each is run
once under ``phasescope --mode sampled --log``; the log is then classified again, offline, by the
phase engine with the sampled defaults (or the tracker options given after ``--``), and by the
20-line page leader-follower of issue 15 (``baseline``: 4 KiB pages, first window kept as the
representative, L1 under 1.0), and by SimPoint's clustering of the same windows (``simpoint``:
phasescope.quality.simpoint, -maxK 30), and all are scored against the truth
(bench/truth/truth_score.py).

    python3 bench/truth/run.py [--dir DIR] [--reuse] [--split tune|held-out|all] [--only NAME,...]
                               [--window N] [--rate HZ] [--own-clock] [--no-short-builtin-calls]
                               [-- REPLAY OPTIONS]

``tune`` workloads chose the defaults; ``held-out`` ones are reported only (marked * in the table).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
sys.path.insert(0, HERE)
from phasescope.commands.options import add_engine_options, engine_config_from_args  # noqa: E402
from phasescope.engine import PhaseEngine  # noqa: E402
from phasescope.engine.phase_table import settled  # noqa: E402
from phasescope.engine.segments import merge  # noqa: E402
from phasescope.formats.log import read_log  # noqa: E402
from phasescope.quality.simpoint import reference_of  # noqa: E402
from truth_score import main_thread, read_truth, score_stream  # noqa: E402
from workloads import NODE_FLAGS, WORKLOADS  # noqa: E402

COLUMNS = ("ari", "v_measure", "detected", "false_per_10s", "recur_same", "distinct", "foretold", "shown_acc",
           "last_acc", "chg_prec", "chg_recall")


def record(w, out_dir: str, rate: int, window: int, mode: str = "sampled") -> str:
    """Run the workload under sampled mode (launched, or attached by its driver), or exact mode (10M
    intervals; rate and window unused); returns its log path."""
    log = os.path.join(out_dir, w.name + ".jsonl")
    stdout = os.path.join(out_dir, w.name + ".stdout")
    sampling = ["--rate", str(rate), "--window", str(window)] if mode == "sampled" else []
    phasescope = [sys.executable, "-m", "phasescope.cli", "--mode", mode, "--no-dashboard", *sampling,
                  "--log", log, "-o", os.path.join(out_dir, w.name + ".phasescope.txt")]
    for stale in (log, phasescope[-1]):
        if os.path.exists(stale):
            os.remove(stale)
    if w.attached:
        cmd = w.driver(out_dir, phasescope)
    else:
        argv = w.prepare(out_dir)
        cmd = [*phasescope, "-f", argv[0], "--", *argv[1:]]
    with open(stdout, "w") as f:
        subprocess.run(cmd, stdout=f, check=True)
    w.finish(out_dir, stdout)
    return log


def classify(intervals, config):
    """Phases as the log settles them (every ``relabel`` applied), the shown predictions and the
    live phases they were made for."""
    engine = PhaseEngine(config)
    results = engine.feed_many(intervals)
    live = np.array([r.phase for r in results])
    phases = np.array(settled(results))
    return phases, np.array([-1 if r.prediction is None else r.prediction for r in results]), live


def classify_every(every, busiest, config):
    """:func:`classify` with every thread's windows fed in order, as a live run feeds them to one
    engine; the busiest thread's (``busiest``, from :func:`main_thread`) kept."""
    phases, predictions, live = classify(every, config)
    keep = np.array([iv.thread == busiest[0].thread for iv in every])
    return phases[keep], predictions[keep], live[keep]


def baseline(intervals, threshold: float = 1.0):
    """Issue 15's 20-line page leader-follower: the floor to beat."""
    reps, phases = [], []
    for iv in intervals:
        pages = Counter()
        for k, c in zip(iv.keys.tolist(), iv.counts.tolist()):
            pages[k >> 12] += c
        total = sum(pages.values())
        v = {p: c / total for p, c in pages.items()}
        best, dist = -1, 3.0
        for i, r in enumerate(reps):
            d = sum(abs(x - r.get(p, 0.0)) for p, x in v.items()) + sum(x for p, x in r.items() if p not in v)
            if d < dist:
                best, dist = i, d
        if dist >= threshold:
            reps.append(v)
            best = len(reps) - 1
        phases.append(best)
    return np.array(phases), np.full(len(phases), -1), None


def simpoint(intervals, max_k: int = 30):
    """SimPoint 3's clustering of the same windows (offline, k by BIC among 1..max_k)."""
    return reference_of(intervals, max_k=max_k).labels, np.full(len(intervals), -1), None


def main() -> int:
    argv = sys.argv[1:]
    replay = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", help="keep logs and truth here (default: a temporary folder)")
    ap.add_argument("--reuse", action="store_true", help="score the logs already in --dir")
    ap.add_argument("--split", choices=("tune", "held-out", "all"), default="all")
    ap.add_argument("--only", help="comma-separated workload names")
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--markdown", action="store_true", help="print the table as docs/quality.md has it")
    ap.add_argument("--merge", type=int, default=1, metavar="K",
                    help="score windows of K recorded windows (a log recorded with small windows stands for larger ones)")
    ap.add_argument("--own-clock", action="store_true",
                    help="score against each workload's own CPU reading, not its wall-clock stamps placed among the "
                         "windows (truth_score.place_truth)")
    ap.add_argument("--every-thread", action="store_true",
                    help="replay every thread's windows together, as a live run feeds them (default: the busiest "
                         "thread's alone); scored on the busiest thread's")
    ap.add_argument("--no-short-builtin-calls", action="store_true",
                    help="run node with that flag (its builtins not copied next to its JIT code)")
    args = ap.parse_args(argv)
    if args.every_thread and args.merge != 1:
        ap.error("--every-thread replays the windows as recorded: no --merge")
    if args.no_short_builtin_calls:
        NODE_FLAGS.append("--no-short-builtin-calls")
    rp = argparse.ArgumentParser(prog="replay options")
    add_engine_options(rp)
    config = engine_config_from_args(rp.parse_args(replay), interval_default=None, preset_default="sampled")
    out_dir = args.dir or tempfile.mkdtemp(prefix="phasescope-truth-")
    os.makedirs(out_dir, exist_ok=True)
    chosen = [w for w in WORKLOADS if (args.split == "all" or w.split == args.split)
              and (not args.only or w.name in args.only.split(","))]
    print(f"# {len(chosen)} workloads, logs in {out_dir}; sampled mode at {args.rate} Hz, {args.window}-sample "
          f"windows; * = held out (defaults not tuned on it)")
    if args.markdown:
        print("| workload | activities | phases | " + " | ".join(COLUMNS)
              + " | baseline: phases, ARI, false/10s | SimPoint: k, ARI |\n" + "| --- " * (len(COLUMNS) + 5) + "|")
    else:
        print(f"{'workload':14s} {'who':9s} {'act':>3s} {'ph':>3s} " + " ".join(f"{c[:8]:>8s}" for c in COLUMNS))
    rows = {"phasescope": [], "baseline": [], "simpoint": []}
    for w in chosen:
        log = os.path.join(out_dir, w.name + ".jsonl")
        if not (args.reuse and os.path.exists(log) and os.path.exists(w.truth(out_dir))):
            record(w, out_dir, args.rate, args.window)
        every = list(read_log(log))
        intervals = main_thread(every)
        intervals = [merge(intervals[i:i + args.merge], i // args.merge) for i in range(0, len(intervals), args.merge)]
        cpu = np.array([iv.cpu_ns for iv in intervals], dtype=np.float64)
        truth = read_truth(w.truth(out_dir), own=args.own_clock)
        name = w.name + ("*" if w.split == "held-out" else "")
        for who, run in (("phasescope", classify), ("baseline", baseline), ("simpoint", simpoint)):
            if who != "phasescope":
                phases, preds, live = run(intervals)
            else:
                phases, preds, live = classify_every(every, intervals, config) if args.every_thread else \
                    run(intervals, config)
            s = score_stream(cpu, phases, preds, truth, live)
            rows[who].append(s)
            if not args.markdown:
                print(f"{name:14s} {who:9s} {s['activities']:3d} {s['phases']:3d} "
                      + " ".join("       -" if s[c] is None else f"{s[c]:8.2f}" for c in COLUMNS), flush=True)
        if args.markdown:
            p, b, k = rows["phasescope"][-1], rows["baseline"][-1], rows["simpoint"][-1]
            print(f"| {name} | {p['activities']} | {p['phases']} | " + " | ".join(
                "-" if p[c] is None else f"{p[c]:.2f}" for c in COLUMNS)
                + f" | {b['phases']}, {b['ari']:.2f}, {b['false_per_10s']:.2f} | {k['phases']}, {k['ari']:.2f} |",
                flush=True)
    mean = lambda sel, c: (f"{np.mean([s[c] for s in sel if s[c] is not None]):.2f}"
                           if any(s[c] is not None for s in sel) else "-")
    for split in ("tune", "held-out"):
        sel = {who: [s for s, w in zip(ss, chosen) if w.split == split] for who, ss in rows.items()}
        if not sel["phasescope"]:
            continue
        if args.markdown:
            p, b, k = sel["phasescope"], sel["baseline"], sel["simpoint"]
            print(f"| mean, {split} | | | " + " | ".join(mean(p, c) for c in COLUMNS)
                  + f" | {mean(b, 'ari')}, {mean(b, 'false_per_10s')} | {mean(k, 'ari')} |")
        else:
            for who, ss in sel.items():
                print(f"{'mean ' + split:14s} {who:9s}         " + " ".join(f"{mean(ss, c):>8s}" for c in COLUMNS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
