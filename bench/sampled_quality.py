#!/usr/bin/env python3
"""Is sampled mode's picture of a program the same as exact mode's? On real programs of this system:

- repeatability: two sampled runs of the same deterministic program, their phase sequences aligned
  by CPU-time fraction, scored with the adjusted Rand index (goal: >= 0.8);
- agreement: each exact-mode phase with >= 5% of instructions maps to a sampled phase with the same
  top code (``module!symbol``), and their shares agree within 10 points.

    python3 bench/sampled_quality.py [--programs bzip2,python3,...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from phasescope.quality.labels import read_log_labels  # noqa: E402
from phasescope.quality.metrics import score  # noqa: E402
from sampled_overhead import make_data, workloads  # noqa: E402

CLI = [sys.executable, "-m", "phasescope.cli", "--no-dashboard"]
BIG = 0.05  # exact phases this large must map


def trace(argv, out_dir: str, name: str, *mode) -> dict:
    log, summary = os.path.join(out_dir, name + ".jsonl"), os.path.join(out_dir, name + ".json")
    subprocess.run(CLI + list(mode) + ["--log", log, "--summary", summary, "-f", argv[0], "--", *argv[1:]],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    with open(summary) as f:
        return {"log": log, "summary": json.load(f)}


def top_symbol(phase: dict) -> str:
    top = phase["top_code"]
    return (top[0].get("symbol") or hex(top[0]["key"])) if top else "?"


def agreement(exact: dict, sampled: dict) -> list:
    """(exact phase, its top symbol, exact share, best sampled share with that symbol or None)."""
    by_symbol = {}
    for p in sampled["phases"]:
        s = top_symbol(p)
        by_symbol[s] = max(by_symbol.get(s, 0.0), p["share"])
    return [(p["phase"], top_symbol(p), p["share"], by_symbol.get(top_symbol(p)))
            for p in exact["phases"] if p["share"] >= BIG]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", help="comma-separated name prefixes (default: all)")
    ap.add_argument("--keep", metavar="DIR", help="keep the logs and summaries here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="phasescope-quality-") as tmp:
        out_dir = args.keep or tmp
        os.makedirs(out_dir, exist_ok=True)
        for name, argv in workloads(make_data(tmp), tmp):
            if args.programs and not any(name.startswith(p) for p in args.programs.split(",")):
                continue
            tag = name.split()[0]
            a = trace(argv, out_dir, tag + "-sampled-a", "--mode", "sampled")
            b = trace(argv, out_dir, tag + "-sampled-b", "--mode", "sampled")
            e = trace(argv, out_dir, tag + "-exact", "--mode", "exact")
            s = score(read_log_labels(a["log"]), read_log_labels(b["log"]))
            rows = agreement(e["summary"], a["summary"])
            mapped = [r for r in rows if r[3] is not None and abs(r[2] - r[3]) <= 0.10]
            print(f"{name:<22} sampled runs: {s['intervals']} intervals, phases {s['phases']}/{s['reference_phases']}, "
                  f"ARI {s['ari']:.2f}; exact phases >= 5%: {len(rows)}, mapped within 10 points: {len(mapped)}",
                  flush=True)
            for phase, sym, share, sshare in rows:
                got = "no sampled phase" if sshare is None else f"sampled {100 * sshare:.1f}%"
                print(f"    P{phase} {sym}: exact {100 * share:.1f}%, {got}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
