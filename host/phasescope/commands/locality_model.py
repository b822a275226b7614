"""``phasescope locality-model DB``: each phase's miss rates for input sizes never run (seed 004).

Reads the reuse signatures that ``--locality --phase-db DB`` runs saved (with each run's input
size), fits every phase's reference-group patterns (:mod:`phasescope.engine.locality_model`) and
reports them, the critical input sizes of a list of cache sizes and how sure it is; ``--predict
SIZE`` adds each phase's predicted miss-rate curve (4 KiB to 64 MiB), ``--json`` prints JSON and
``--plot FILE`` draws predicted miss rate against input size and cache size per main phase.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import List, Optional

from phasescope.commands.sizes import parse_size
from phasescope.commands.runner import Command
from phasescope.engine.locality import CACHE_BYTES
from phasescope.engine.locality_model import MIN_SPAN, Run, confidence, fit
from phasescope.errors import InputError
from phasescope.sinks.phase_db import read_locality_runs

DEFAULT_CACHES = "32KiB,256KiB,1MiB,8MiB"
PLOT_PHASES = 4  # main phases drawn


def size_text(n: float) -> str:
    """4096 -> '4 KiB', 1572864 -> '1.5 MiB'."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.3g} {unit}"
    return f"{int(n)} B"


class LocalityModelCommand(Command):
    """Fit, report and predict per-phase miss rates across input sizes."""

    description = ("Fit each phase's locality model (Zhong et al., seed 004) from the reuse signatures of two or "
                   "more --locality --phase-db runs of different input sizes (--input-size), and predict its "
                   "LRU miss rates for input sizes never run.")
    inputs = {"DB": "db"}
    outputs = {"--plot": "plot"}
    stdout_why = "standard output carries the model"

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("db", metavar="DB", help="phase database written by --locality --phase-db runs")
        p.add_argument("--predict", metavar="SIZE",
                       help="input size (with a unit, e.g. 64MiB) to predict each phase's miss-rate curve for, "
                            "4 KiB to 64 MiB caches")
        p.add_argument("--caches", default=DEFAULT_CACHES, metavar="LIST",
                       help=f"cache sizes whose critical input sizes are reported (default {DEFAULT_CACHES})")
        p.add_argument("--json", action="store_true",
                       help="JSON on stdout; with --predict exactly {\"phases\": [{\"phase\", \"top_code\", "
                            "\"miss_rate_curve\": [[cache_bytes, rate], ...]}]}")
        p.add_argument("--plot", metavar="FILE",
                       help="draw predicted miss rate against input size and cache size per main phase, the "
                            "measured runs marked (.png, .svg, .pdf; needs matplotlib)")

    def run(self, args) -> int:
        predict = None if args.predict is None else parse_size(args.predict, "--predict")
        caches = [parse_size(c, "--caches") for c in args.caches.split(",") if c.strip()]
        if not caches or any(c < 64 for c in caches):
            raise InputError(f"--caches: {args.caches!r}: give one or more cache sizes of 64 bytes or more")
        if args.plot:
            try:
                importlib.import_module("matplotlib")
            except ImportError:
                raise InputError("--plot needs matplotlib: pip install 'phasescope[plot]'") from None
            from phasescope.view.plot import check_output
            check_output(args.plot)
        db = read_locality_runs(args.db)
        models, skipped = self._models(args.db, db)
        reports = [self._report(p, runs, model, top, predict, caches) for p, runs, model, top in models]
        if args.json:
            if predict is not None:
                out = {"phases": [{"phase": r["phase"], "top_code": r["top_code"],
                                   "miss_rate_curve": r["miss_rate_curve"]} for r in reports]}
            else:
                out = {"phases": reports, "skipped": skipped}
            json.dump(out, sys.stdout, indent=1)
            print()
        else:
            self._print(args.db, db, reports, skipped, predict)
        if args.plot:
            from phasescope.view.plot import plot_locality_model
            plot_locality_model([(r, m[2]) for r, m in zip(reports, models)][:PLOT_PHASES], args.plot,
                                predict, title=f"phasescope locality-model {args.db}")
            print(f"{args.plot}: {min(len(models), PLOT_PHASES)} phase(s)", file=sys.stderr)
        return 0

    def _models(self, path: str, db: dict):
        """[(phase, runs, model, top_code of its last run)] of the phases that can be modelled, heaviest first; one-line InputError
        when none can: too few runs, or runs too close in size."""
        models, skipped, spans = [], [], []
        order = sorted(db["phases"].items(), key=lambda kv: (-kv[1]["instructions"], kv[0]))
        for phase, entry in order:
            runs = [Run(r["input_size"], r["signature"], r.get("touched_bytes", 0), r.get("run")) for r in entry["runs"]]
            sizes = [r.input_size for r in runs]
            span = max(sizes) / min(sizes)
            if len(set(sizes)) < 2:
                skipped.append({"phase": phase, "why": f"{len(runs)} run(s) of one input size"})
                continue
            if span < MIN_SPAN:
                spans.append(span)
                skipped.append({"phase": phase, "why": f"runs too close in size ({span:.2f}x)"})
                continue
            model = fit(runs)
            models.append((phase, runs, model, entry["runs"][-1].get("top_code", [])))
        if not models:
            if spans:
                raise InputError(f"{path}: runs too close in size: the largest input is {max(spans):.2f}x the "
                                 f"smallest (the model needs {MIN_SPAN}x or more; give --input-size)")
            raise InputError(f"{path}: no phase has reuse signatures from 2 or more runs of different input sizes "
                             f"({db['runs']} run(s) saved); run the program with --locality --phase-db {path} "
                             "--input-size SIZE on 2 or more input sizes")
        return models, skipped

    def _report(self, phase: int, runs: List[Run], model, top_code: list, predict: Optional[int],
                caches: List[int]) -> dict:
        sizes = [r.input_size for r in runs]
        lo = min(sizes) / 4
        hi = max(max(sizes) * 1024, (predict or 0) * 4)
        top = [{"key": b.get("key"), "pc": None, "share": b.get("share"), "symbol": b.get("symbol")}
               for b in top_code]
        report = {
            "phase": phase, "top_code": top,
            "runs": [{"run": r.run, "input_size": r.input_size} for r in runs],
            "patterns": {k: round(v, 4) for k, v in model.patterns().items()},
            "critical": [c for cache in caches for c in model.critical_sizes(cache, lo, hi)],
            "confidence": _plain(confidence(runs, predict)),
        }
        if predict is not None:
            report["input_size"] = predict
            report["miss_rate_curve"] = [[b, round(float(r), 4)] for b, r in zip(CACHE_BYTES, model.miss_rates(predict))]
        return report

    def _print(self, path: str, db: dict, reports: List[dict], skipped: List[dict], predict: Optional[int]) -> None:
        print(f"locality model of {path}: {db['runs']} run(s) saved, {len(reports)} phase(s) modelled")
        for r in reports:
            sym = next((b["symbol"] for b in r["top_code"] if b.get("symbol")), None)
            sizes = sorted(x["input_size"] for x in r["runs"])
            pats = ", ".join(f"{k} {100 * v:.0f}%" for k, v in r["patterns"].items() if v >= 0.005)
            print(f"P{r['phase']}{' ' + sym if sym else ''}: {len(sizes)} runs, inputs "
                  f"{', '.join(size_text(s) for s in sizes)}; groups: {pats}")
            crit = "; ".join(f"{size_text(c['cache_bytes'])} cache at {size_text(c['input_size'])} "
                             f"(from {size_text(c['begins'])}: {100 * c['from']:.0f}% -> {100 * c['to']:.0f}%)"
                             for c in r["critical"])
            print(f"  critical input sizes: {crit or 'none (no miss-rate jump of 5 points or more)'}")
            print(f"  confidence: {_confidence_text(r['confidence'])}")
            if predict is not None:
                curve = ", ".join(f"{size_text(b)} {100 * x:.1f}%" for b, x in r["miss_rate_curve"])
                print(f"  predicted miss rates at input {size_text(predict)}: {curve}")
        if skipped:
            print("not modelled: " + "; ".join(f"P{s['phase']} ({s['why']})" for s in skipped))


def _plain(c: dict) -> dict:
    """The confidence dict with plain floats (JSON)."""
    f = lambda x: None if x is None else round(float(x), 4)
    return {"runs": c["runs"], "span": f(c["span"]), "max_error": f(c["max_error"]),
            "leave_one_out": [{"input_size": x["input_size"], "error": f(x["error"])} for x in c["leave_one_out"]],
            "extrapolation": f(c["extrapolation"]), "level": c["level"]}


def _confidence_text(c: dict) -> str:
    if c["max_error"] is None:
        check = f"{c['runs']} runs: no run left to check against (3 or more give a leave-one-out check)"
    else:
        check = (f"each run predicted from the others within {100 * c['max_error']:.1f} points "
                 f"(32 KiB - 8 MiB caches, {len(c['leave_one_out'])} checks)")
    beyond = "" if c["extrapolation"] is None else f"; the prediction is {c['extrapolation']:.3g}x the largest run"
    return f"{c['level']}: {check}; inputs span {c['span']:.3g}x{beyond}"
