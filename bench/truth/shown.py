#!/usr/bin/env python3
"""The shown prediction of several predictors on recorded truth logs (bench/truth/run.py's): for
each workload, last-phase's next-window accuracy, and each predictor's changes foretold and
accuracy when it is the one shown (``--shown-prediction NAME``), scored as run.py scores them.
Changes foretold are scored on the live phases (as run.py scores them: the prediction shown after
the window before a live change names its phase) and, in brackets, on the phases as the log settles
them (every relabel applied: a held window at a change joins the new phase, so the change comes a
window earlier and a claim made at the held window is late; stricter, issue 27, stop 46).
Then the bound on the changes foretold (issue 27, stop 42): of the live changes near a true change,
the share into a phase never seen before, and the share whose next phase had followed the current
phase before, which bounds what any predictor that names a known successor foretells
(bench/foresight.py).

    python3 bench/truth/shown.py --dir DIR --only NAME,... [--shown measured,order_length]
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402  (puts the host package on the path)
from truth_score import changes_near_truth  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

sys.path.insert(0, os.path.join(HERE, ".."))
from foresight import stream_figures  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="the logs and truth files of bench/truth/run.py --dir")
    ap.add_argument("--only", required=True, help="comma-separated workload names")
    ap.add_argument("--shown", default="measured,order_length", help="comma-separated predictor names")
    args = ap.parse_args()
    for w in WORKLOADS:
        if w.name not in args.only.split(","):
            continue
        intervals = run.main_thread(list(run.read_log(os.path.join(args.dir, w.name + ".jsonl"))))
        truth = run.read_truth(w.truth(args.dir))
        cpu = np.array([iv.cpu_ns for iv in intervals], dtype=np.float64)
        cells = []
        for name in args.shown.split(","):
            rp = argparse.ArgumentParser()
            run.add_engine_options(rp)
            config = run.engine_config_from_args(rp.parse_args(["--shown-prediction", name]), interval_default=None,
                                                 preset_default="sampled")
            phases, predictions, live = run.classify(intervals, config)
            s = run.score_stream(cpu, phases, predictions, truth, live)
            foretold = "-" if s["foretold"] is None else f"{s['foretold']:.2f}"
            settled = changes_near_truth(cpu, phases, truth)  # the log's phases, every relabel applied
            late = sum(predictions[i - 1] == phases[i] for i in settled)
            cells.append(f"{name}: foretold {foretold} (settled {late}/{len(settled)}), accuracy {s['shown_acc']:.3f}")
        near = changes_near_truth(cpu, live, truth)
        f = stream_figures(live.tolist(), set(near))
        bound = (f"; of {f['changes']} changes near a true change, {f['new']} into new phases, "
                 f"{f['seen_phase']} to a known successor" if f["changes"] else "")
        print(f"{w.name}: last-phase {s['last_acc']:.3f}; " + "; ".join(cells) + bound, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
