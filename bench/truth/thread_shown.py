#!/usr/bin/env python3
"""The shown prediction against last-phase on every thread, with every thread's windows replayed
together as a live run feeds them (issue 27, stop 45).

For each recorded log of bench/truth/run.py (``DIR/NAME.jsonl`` beside ``NAME.truth.jsonl``): the
busiest thread's next-window accuracy of the shown prediction and of last-phase, and the changes
foretold, replayed alone and with every thread (run.py's scores, to three decimals); then, with
every thread replayed, each thread of at least ``--min`` windows: shown minus last-phase in windows
and points. ``--host DIR`` replays with another tree's engine (``DIR`` its ``host``), for a
before/after on the same logs.

    python3 bench/truth/thread_shown.py DIR... [--host OTHER/host] [--min 20]
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def per_thread(results, least: int) -> list:
    """(thread, windows scored, shown right less last-phase right) per thread of ``least`` windows or more."""
    by = {}
    for r in results:
        by.setdefault(r.thread, []).append((r.phase, -1 if r.prediction is None else r.prediction))
    out = []
    for t, rows in sorted(by.items(), key=lambda kv: -len(kv[1])):
        if len(rows) >= least:
            ph, pr = np.array(rows).T
            out.append((t, len(rows) - 1, int(np.sum(pr[:-1] == ph[1:]) - np.sum(ph[:-1] == ph[1:]))))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--host", help="replay with this tree's host package (default: this tree's)")
    ap.add_argument("--min", type=int, default=20, help="threads with fewer windows are left out")
    args = ap.parse_args()
    for d in args.dirs:
        if not os.path.isdir(d):
            print(f"thread_shown.py: {d}: not a directory of bench/truth/run.py's logs", file=sys.stderr)
            return 2
    if args.host:  # the package imported first from there: run.py's own path entry then finds it loaded
        sys.path.insert(0, os.path.abspath(args.host))
        import phasescope  # noqa: F401
    sys.path.insert(0, HERE)
    import run  # noqa: E402
    rp = argparse.ArgumentParser()
    run.add_engine_options(rp)
    config = run.engine_config_from_args(rp.parse_args([]), interval_default=None, preset_default="sampled")
    by_name = {w.name: w for w in run.WORKLOADS}
    points = []
    for d in args.dirs:
        for f in sorted(os.listdir(d)):
            name = f[:-len(".truth.jsonl")] if f.endswith(".truth.jsonl") else None
            if name not in by_name:
                continue
            every = list(run.read_log(os.path.join(d, name + ".jsonl")))
            busy = run.main_thread(every)
            cpu = np.array([iv.cpu_ns for iv in busy], dtype=np.float64)
            truth = run.read_truth(by_name[name].truth(d))
            cells = []
            for mode in ("alone", "every"):
                phases, shown, live = run.classify(busy, config) if mode == "alone" else \
                    run.classify_every(every, busy, config)
                s = run.score_stream(cpu, phases, shown, truth, live)
                foretold = "-" if s["foretold"] is None else f"{s['foretold']:.2f}"
                cells.append(f"{mode}: shown {s['shown_acc']:.3f} last {s['last_acc']:.3f} foretold {foretold}")
            threads = per_thread(run.PhaseEngine(config).feed_many(every), args.min)
            points += [100 * d_ / n for _, n, d_ in threads]
            print(f"{d}/{name}: busiest {'; '.join(cells)}; every thread, shown - last: "
                  + ", ".join(f"{d_:+d}/{n} ({100 * d_ / n:+.1f})" for _, n, d_ in threads), flush=True)
    if points:
        print(f"threads {len(points)}: below last-phase by more than 1 point {sum(p < -1 for p in points)}, "
              f"worst {min(points):+.1f}, mean {np.mean(points):+.2f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
