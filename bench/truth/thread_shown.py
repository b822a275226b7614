#!/usr/bin/env python3
"""The shown prediction against last-phase on every thread, with every thread's windows replayed
together as a live run feeds them (issue 27, stop 45).

For each recorded log of bench/truth/run.py (``DIR/NAME.jsonl`` beside ``NAME.truth.jsonl``): the
busiest thread's next-window accuracy of the shown prediction and of last-phase, and the changes
foretold, replayed alone and with every thread (run.py's scores, to three decimals); then, with
every thread replayed, each thread of at least ``--min`` windows: shown minus last-phase in windows
and points. ``--host DIR`` replays with another tree's engine (``DIR`` its ``host``), for a
before/after on the same logs. ``--sources``: for the every-thread replay, the changes shown on
the threads of ``--min`` windows or more, by where ``cycle`` took them (a claim at a window the
tracker held, a claim of run lengths at a window not held, ``measured``'s change) and what came
next (the phase shown, the same phase, another): shown right less stayed is what each source
adds to last-phase (issue 27, stop 47).

    python3 bench/truth/thread_shown.py DIR... [--host OTHER/host] [--min 20] [--sources]
"""

import argparse
import os
import sys
from collections import Counter

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


def track_sources(predict) -> dict:
    """Wrap ``ThreadPredictors.observe`` of the module ``predict`` so that each instance keeps, per
    window, (phase, prediction shown, its source or None when no change is shown); returns the
    instances by ``id`` as they are made."""
    made, observe = {}, predict.ThreadPredictors.observe

    def tracked(self, phase, held=False):
        out = observe(self, phase, held)
        source = None if self.prediction == phase else \
            ("held claim" if held else "length claim") if self.periodic._claim is not None else "measured"
        made.setdefault(id(self), (self, []))[1].append((phase, self.prediction, source))
        return out
    predict.ThreadPredictors.observe = tracked
    return made


def sources(made: dict, least: int) -> str:
    """One line of :func:`track_sources`' counts over the instances of ``least`` windows or more."""
    n = Counter()
    for _, rows in made.values():
        if len(rows) >= least:
            for (now, shown, source), (nxt, _, _) in zip(rows, rows[1:]):
                if source:
                    n[source, "right" if shown == nxt else "stayed" if nxt == now else "elsewhere"] += 1
    return "; ".join(f"{src}: right {n[src, 'right']}, stayed {n[src, 'stayed']}, elsewhere {n[src, 'elsewhere']}"
                     for src in ("held claim", "length claim", "measured"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--host", help="replay with this tree's host package (default: this tree's)")
    ap.add_argument("--min", type=int, default=20, help="threads with fewer windows are left out")
    ap.add_argument("--sources", action="store_true", help="the every-thread replay's shown changes by source")
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
    if args.sources:
        from phasescope.engine import predict
        made = track_sources(predict)
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
            if args.sources:
                made.clear()
            threads = per_thread(run.PhaseEngine(config).feed_many(every), args.min)
            points += [100 * d_ / n for _, n, d_ in threads]
            print(f"{d}/{name}: busiest {'; '.join(cells)}; every thread, shown - last: "
                  + ", ".join(f"{d_:+d}/{n} ({100 * d_ / n:+.1f})" for _, n, d_ in threads), flush=True)
            if args.sources:
                print(f"  shown changes, every thread: {sources(made, args.min)}", flush=True)
    if points:
        print(f"threads {len(points)}: below last-phase by more than 1 point {sum(p < -1 for p in points)}, "
              f"worst {min(points):+.1f}, mean {np.mean(points):+.2f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
