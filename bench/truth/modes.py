#!/usr/bin/env python3
"""Exact mode against sampled mode on workloads whose activities are known (issue 32: the JVM).

Each workload (bench/truth/workloads.py, default the java ones) runs once under exact mode (10M
intervals, the live defaults) and once under sampled mode (bench/truth/run.py's recording); each
log's main thread is classified as live (exact: the ``default`` preset; sampled: ``sampled``) and
scored against its run's truth (bench/truth/truth_score.py): ARI of the phases (micro) and of
their macro phases (engine/macro.py's defaults: the activity time scale), and the share of
activities that have a main phase of their own. The two runs execute the same activities in the
same order for the same CPU budgets (the workload's seed), so their phases are also compared with
each other: ``exact vs sampled`` is the ARI between the two runs' phases (micro, and macro) read
at ten points of every activity (the same fractions of the same activity in each run); and exact's
macro phases against sampled's phases, both at the activity time scale (sampled mode's 100 ms
windows are already there; its macro phases span several activities).

    python3 bench/truth/modes.py [--dir DIR] [--reuse] [--only NAME,...] [--points]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
sys.path.insert(0, HERE)
from phasescope.commands.options import add_engine_options, engine_config_from_args  # noqa: E402
from phasescope.engine.macro import macro_phases  # noqa: E402
from phasescope.formats.log import read_log  # noqa: E402
from truth_score import lost_cpu, read_truth, score_stream, window_span  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

# bench/truth/run.py by its path: bench/quality/run.py is another module named run
_spec = importlib.util.spec_from_file_location("truth_run", os.path.join(HERE, "run.py"))
truth_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(truth_run)
classify, main_thread, record = truth_run.classify, truth_run.main_thread, truth_run.record

MODES = {"exact": "default", "sampled": "sampled"}  # mode -> its live tracker preset
POINTS = 10  # per activity, for exact vs sampled


def phases_of(log: str, preset: str):
    """(CPU ns per window, phases, macro phases, predictions, live phases, CPU lost before each window:
    truth_score.lost_cpu) of the log's main thread."""
    parser = argparse.ArgumentParser()
    add_engine_options(parser)
    config = engine_config_from_args(parser.parse_args([]), interval_default=None, preset_default=preset)
    intervals = [iv for iv in main_thread(list(read_log(log))) if iv.weight]
    phases, preds, live = classify(intervals, config)
    macros = np.array(macro_phases(np.zeros(len(phases)), phases)[1])  # as the log settles them
    cpu = np.array([iv.cpu_ns or 0 for iv in intervals], float)
    return cpu, phases, macros, preds, live, lost_cpu(np.array([iv.seq for iv in intervals]), cpu)


def at_points(cpu: np.ndarray, labels: np.ndarray, truth, count: int, lost=None) -> np.ndarray:
    """The label at POINTS fractions of each of the first ``count`` activities of the truth."""
    end = window_span(cpu, truth, lost)[1]
    where = [s + (e - s) * (k + 0.5) / POINTS for _, s, e in truth[:count] for k in range(POINTS)]
    return labels[np.minimum(np.searchsorted(end, where, side="right"), len(labels) - 1)]


def main() -> int:
    from sklearn.metrics import adjusted_rand_score
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", help="keep logs and truth here (default: a temporary folder)")
    ap.add_argument("--reuse", action="store_true", help="score the logs already in --dir")
    ap.add_argument("--only", default=",".join(w.name for w in WORKLOADS if w.kind == "java"))
    ap.add_argument("--points", action="store_true",
                    help="also print, per activity, exact's macro phase and sampled's phase at each point")
    args = ap.parse_args()
    out_dir = args.dir or tempfile.mkdtemp(prefix="phasescope-modes-")
    print(f"# logs in {out_dir}; ARI against the truth, micro (the mode's intervals) and macro (the activity "
          "time scale); own: activities with a main phase of their own; lost: "
          "seconds of CPU in intervals the agent dropped (placed, not scored: truth_score.lost_cpu)")
    print(f"{'workload':15s} {'mode':8s} {'windows':>7s} {'phases':>6s} {'micro':>6s} {'macro':>6s} {'own':>5s} {'lost':>5s}")
    for w in [w for w in WORKLOADS if w.name in args.only.split(",")]:
        got = {}
        for mode, preset in MODES.items():
            where = os.path.join(out_dir, mode)
            os.makedirs(where, exist_ok=True)
            log = os.path.join(where, w.name + ".jsonl")
            if not (args.reuse and os.path.exists(log)):
                try:
                    record(w, where, 1000, 100, mode=mode)
                except subprocess.CalledProcessError as e:
                    print(f"{w.name:15s} {mode:8s} the traced run failed (exit {e.returncode}; "
                          f"{os.path.join(where, w.name)}.phasescope.txt)", flush=True)
                    continue
            truth = read_truth(w.truth(where))
            cpu, phases, macros, preds, live, lost = phases_of(log, preset)
            micro = score_stream(cpu, phases, preds, truth, live, lost)
            macro = score_stream(cpu, macros, np.full(len(macros), -1), truth, lost=lost)
            got[mode] = (cpu, phases, macros, truth, lost)
            print(f"{w.name:15s} {mode:8s} {len(phases):7d} {micro['phases']:6d} {micro['ari']:6.2f} "
                  f"{macro['ari']:6.2f} {micro['distinct']:5.2f} {lost.sum() / 1e9:5.2f}", flush=True)
        if len(got) < 2:
            continue
        (ce, pe, me, te, le), (cs, ps, ms, ts, ls) = got["exact"], got["sampled"]
        count = 0
        while count < min(len(te), len(ts)) and te[count][0] == ts[count][0]:
            count += 1  # the same activities in the same order, up to where one run stopped
        if args.points:
            pairs = zip(at_points(ce, me, te, count, le).reshape(count, -1),
                        at_points(cs, ps, ts, count, ls).reshape(count, -1))
            for (name, _, _), (a, b) in zip(te, pairs):
                row = " ".join(f"{x:3d}" for x in a), " ".join(f"{x:3d}" for x in b)
                print(f"  {name:10s} exact macro {row[0]} | sampled {row[1]}")
        vs = [adjusted_rand_score(at_points(ce, a, te, count, le), at_points(cs, b, ts, count, ls))
              for a, b in ((pe, ps), (me, ms), (me, ps))]
        print(f"{w.name:15s} exact vs sampled over {count} activities: micro {vs[0]:.2f}, macro {vs[1]:.2f}, "
              f"exact macro vs sampled micro {vs[2]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
