"""``phasescope score LOG --reference LABELS``: how the live phases and predictions of a log hold
up against an offline reference (definitions in :mod:`phasescope.quality.metrics`).

LABELS: a SimPoint ``-saveLabels`` file, another phasescope log (its ``phase`` fields), or
``auto``: SimPoint's clustering of LOG's own vectors (needs scikit-learn).
"""

from __future__ import annotations

import argparse
import json

from phasescope.commands.reference import add_reference_options, build_reference, check_reference_options
from phasescope.commands.runner import Command
from phasescope.quality.labels import LabelStream, read_labels, read_log_labels
from phasescope.quality.metrics import score


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def format_scores(s: dict) -> str:
    lines = [
        f"intervals            {s['intervals']} (reference {s['reference_intervals']})",
        f"changes detected     {_pct(s['changes_detected'])} of {s['reference_changes']} reference phase changes "
        f"(live changes {s['live_changes']})",
        f"same-phase agreed    {_pct(s['same_agreed'])} of {s['pairs'] - s['reference_changes']} same-phase pairs",
        f"misclassified pairs  {_pct(s['misclassified'])}",
        f"ARI                  {s['ari']:.3f}",
        f"phases               {s['phases']} (reference {s['reference_phases']})",
        f"top-20 coverage      {_pct(s['top20_coverage'])}",
        "predictor            overall   at changes",
    ]
    for name, p in sorted(s["predictors"].items(), key=lambda kv: -(kv[1]["overall"] or 0)):
        lines.append(f"  {name:<18} {_pct(p['overall']):>8}   {_pct(p['changes']):>8}")
    if "confidence" in s:
        c = s["confidence"]
        lines.append(f"confidence >= 0.5    {_pct(c['confident_share'])} of predictions, accuracy "
                     f"{_pct(c['accuracy_when_confident'])} (else {_pct(c['accuracy_when_not'])})")
    return "\n".join(lines)


class ScoreCommand(Command):
    """Figure 6 scores of a log against a reference."""

    description = "Score a phasescope log's phases and predictions against an offline reference (ISCA 2003, Figure 6)."
    inputs = {"LOG": "log", "--reference": "reference"}

    def add_options(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("log", metavar="LOG", help="phasescope interval log (.jsonl)")
        p.add_argument("--reference", required=True, metavar="LABELS",
                       help="SimPoint labels file, phasescope log, or 'auto' (cluster LOG offline)")
        p.add_argument("--json", action="store_true", help="print the scores as JSON")
        add_reference_options(p)

    def run(self, args) -> int:
        check_reference_options(args)
        live = read_log_labels(args.log)
        if args.reference == "auto":
            ref = build_reference(args.log, args, "log")
            ref_stream = LabelStream(ref.labels, ref.instructions, path="auto")
        else:
            ref_stream = read_labels(args.reference)
        s = score(live, ref_stream)
        print(json.dumps(s, indent=1) if args.json else format_scores(s))
        return 0
