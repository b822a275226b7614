#!/usr/bin/env python3
"""Is sampled mode's picture of a program the same as exact mode's? On real programs of this system:

- repeatability: two sampled runs of the same deterministic program, their phase sequences aligned
  by CPU-time fraction, scored with the adjusted Rand index (goal: >= 0.8);
- agreement: the exact run, replayed at the sampled run's time scale (its 10M intervals merged to as
  many intervals as the sampled run has windows), and each of its phases with >= 5% of the CPU
  time maps to a sampled phase with the same
  top code (``module!function``; a stripped module's code compares by module, since a sampled
  instruction pointer and a block's branch address differ inside a function), and their shares
  agree within 10 points.

The workloads are tests/programs/phased.c (three phases of a few tenths of a second each, in the
pattern A A B C), then bench/sampled_overhead.py's, made about three times longer (bzip2's input three
times over, the python script run three times) so that sampled mode has enough windows; windows
are ``--window`` samples (default 100: 0.1 s of CPU).

    python3 bench/sampled_quality.py [--programs bzip2,python3,...] [--window 100] [--keep DIR]
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
from phasescope.engine.segments import merge_intervals  # noqa: E402
from phasescope.engine import EngineConfig, PhaseEngine  # noqa: E402
from phasescope.engine.tracker import MIN_INTERVAL  # noqa: E402
from phasescope.formats.log import read_log  # noqa: E402
from phasescope.quality.labels import read_log_labels  # noqa: E402
from phasescope.quality.metrics import score  # noqa: E402
from sampled_overhead import make_data, workloads  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CLI = [sys.executable, "-m", "phasescope.cli", "--no-dashboard"]
BIG = 0.05  # exact phases this large must map


def trace(argv, out_dir: str, name: str, *mode, reuse: bool = False) -> dict:
    log, summary = os.path.join(out_dir, name + ".jsonl"), os.path.join(out_dir, name + ".json")
    if not (reuse and os.path.exists(summary)):
        subprocess.run(CLI + list(mode) + ["--log", log, "--summary", summary, "-f", argv[0], "--", *argv[1:]],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    with open(summary) as f:
        return {"log": log, "summary": json.load(f)}


def top_symbol(phase: dict) -> str:
    """``module!function`` of the phase's hottest code, or ``module`` where it has no symbol."""
    top = phase["top_code"]
    if not top:
        return "?"
    name = top[0].get("symbol") or hex(top[0]["key"])
    module, bang, function = name.partition("!")
    if not bang:  # module+0xoffset: stripped code
        return name.split("+")[0]
    return module + "!" + function.split("+")[0]


def longer(name: str, argv: list, tmp: str) -> list:
    """About three times the work of bench/sampled_overhead.py's workload."""
    if name.startswith("bzip2"):
        big = os.path.join(tmp, "data-x3.txt")
        with open(argv[-1], "rb") as f:
            data = f.read()
        with open(big, "wb") as f:
            f.write(data * 3)
        return argv[:-1] + [big]
    if name.startswith("python3"):
        return [argv[0], "-c", f"import runpy\nfor _ in range(3): runpy.run_path({argv[1]!r})"]
    return argv


def exact_at(log: str, summary: dict, windows: int) -> list:
    """The exact log replayed at sampled mode's time scale (its intervals merged to as many as the
    sampled run had windows): (phase, top symbol, share of CPU time) per phase. Shares weigh CPU
    time, as sampled mode's do: instruction shares differ wherever IPC does."""
    intervals = list(read_log(log))
    size = max(MIN_INTERVAL, sum(iv.instructions for iv in intervals) // max(1, windows))
    engine = PhaseEngine(EngineConfig())
    merged = list(merge_intervals(intervals, size))
    cpu: dict = {}
    for r, iv in zip(engine.feed_many(merged), merged):
        cpu[r.phase] = cpu.get(r.phase, 0) + (iv.cpu_ns or 0)
    total = sum(cpu.values()) or 1
    names = {p.phase: p for p in engine.stats.phases.values()}
    pcs = {b["key"]: b.get("symbol") for p in summary["phases"] for b in p["top_code"]}
    out = []
    for phase, ns in sorted(cpu.items(), key=lambda kv: -kv[1]):
        top = names[phase].top_code(1)
        symbol = pcs.get(top[0]["key"]) if top else None
        out.append((phase, top_symbol({"top_code": [{"symbol": symbol, "key": top[0]["key"]}]}) if top else "?",
                    ns / total))
    return out


def agreement(exact: list, sampled: dict) -> list:
    """(exact phase, its top symbol, exact CPU share, best sampled share with that symbol or None)."""
    by_symbol = {}
    for p in sampled["phases"]:
        s = top_symbol(p)
        by_symbol[s] = max(by_symbol.get(s, 0.0), p["share"])
    return [(phase, sym, share, by_symbol.get(sym)) for phase, sym, share in exact if share >= BIG]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", help="comma-separated name prefixes (default: all)")
    ap.add_argument("--keep", metavar="DIR", help="keep the logs and summaries here")
    ap.add_argument("--reuse", action="store_true", help="with --keep: score the runs already kept there")
    ap.add_argument("--window", type=int, default=100, help="sampled mode: samples per interval (default 100)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="phasescope-quality-") as tmp:
        out_dir = args.keep or tmp
        os.makedirs(out_dir, exist_ok=True)
        phased = os.path.join(tmp, "phased")
        subprocess.run(["cc", "-O1", "-g", "-o", phased, os.path.join(ROOT, "tests", "programs", "phased.c")],
                       check=True)
        for name, argv in [("phased.c (3 phases)", [phased, "6", "60"])] + workloads(make_data(tmp), tmp):
            if args.programs and not any(name.startswith(p) for p in args.programs.split(",")):
                continue
            tag = name.split()[0]
            argv = longer(name, argv, tmp)
            sampled = ("--mode", "sampled", "--window", str(args.window))
            a = trace(argv, out_dir, tag + "-sampled-a", *sampled, reuse=args.reuse)
            b = trace(argv, out_dir, tag + "-sampled-b", *sampled, reuse=args.reuse)
            e = trace(argv, out_dir, tag + "-exact", "--mode", "exact", reuse=args.reuse)
            s = score(read_log_labels(a["log"]), read_log_labels(b["log"]))
            rows = agreement(exact_at(e["log"], e["summary"], s["intervals"]), a["summary"])
            mapped = [r for r in rows if r[3] is not None and abs(r[2] - r[3]) <= 0.10]
            print(f"{name:<22} sampled runs: {s['intervals']} intervals, phases {s['phases']}/{s['reference_phases']}, "
                  f"ARI {s['ari']:.2f}; exact phases >= 5% of CPU time (at the same time scale): {len(rows)}, "
                  f"mapped within 10 points: {len(mapped)}", flush=True)
            for phase, sym, share, sshare in rows:
                got = "no sampled phase" if sshare is None else f"sampled {100 * sshare:.1f}%"
                print(f"    P{phase} {sym}: exact {100 * share:.1f}%, {got}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
