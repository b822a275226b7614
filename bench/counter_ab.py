#!/usr/bin/env python3
"""Exact mode's hot path against an earlier one, on the same program in the same run: native, bare
Stalker, then phasescope with each C hot path given (``agent/*.c`` joined), interleaved, minimum of the runs.

    python3 bench/counter_ab.py [--runs 3] [--ref REV] [--file PATH] [--json] -- PROGRAM [ARGS...]
    python3 bench/counter_ab.py [--runs 3] [--ref REV] [--file PATH] [--json] --programs

``--ref REV`` adds the C source as of that git revision (named REV; its ``agent/counter.c``, or its parts
joined as the tree joins them) before the working tree's (``tree``); ``--file PATH`` adds a whole C
source not committed (named by its file name), for trying a change.
``--programs``: the system programs of bench/sampled_overhead.py (bzip2, xz, python3, cc1, sqlite3)
one after the other. Besides wall time it reports the CPU time of the target's main thread (as
``phasescope bench`` does for traced/bare), which a machine shared with other work inflates less
than wall time. ``--json`` adds every run's (wall, cpu) pair, in run order, to show the spread. The agent's JavaScript is the tree's for every variant, so a revision's C source
must export the C functions the tree's agent calls.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "host"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from phasescope.commands.bench import _native, _traced  # noqa: E402
from phasescope.resources import joined  # noqa: E402
from phasescope.sources.device import resolve_device, resolve_target  # noqa: E402
from phasescope.sources.session import TraceSession  # noqa: E402


def _run_native(argv):
    cpu = []
    return _native(argv, cpu), cpu[0]


def _run_traced(session, what):
    run = _traced(session, what)
    return run[0], run[5]


def _git_show(ref: str, path: str):
    run = subprocess.run(["git", "-C", ROOT, "show", f"{ref}:{path}"], capture_output=True, text=True)
    return run.stdout if run.returncode == 0 else None


def _c_source_at(ref: str) -> str:
    """The C hot path at git revision ``ref``: one file before the split, else its parts joined."""
    whole = _git_show(ref, "agent/counter.c")
    return whole if whole is not None else joined("agent", lambda part: _git_show(ref, f"agent/{part}"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ref", action="append", default=[], help="a git revision whose C hot path to compare")
    ap.add_argument("--file", action="append", default=[], help="a whole C source file to compare")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--programs", action="store_true", help="bench/sampled_overhead.py's system programs")
    ap.add_argument("argv", nargs="*")
    args = ap.parse_args()
    if args.programs == bool(args.argv):
        ap.error("give either PROGRAM [ARGS...] or --programs")
    variants = [(ref, _c_source_at(ref)) for ref in args.ref]
    for path in args.file:
        with open(path) as f:
            variants.append((os.path.basename(path), f.read()))
    variants.append(("tree", joined("agent")))
    if not args.programs:
        _report(_compare(args.argv, variants, args.runs), variants, args.json)
        return 0
    from sampled_overhead import make_data, workloads
    with tempfile.TemporaryDirectory(prefix="phasescope-ab-") as tmp:
        for _, argv in workloads(make_data(tmp), tmp):
            _report(_compare(argv, variants, args.runs), variants, args.json)
    return 0


def _compare(argv, variants, runs_per: int) -> dict:
    device = resolve_device()
    target = resolve_target(device, argv=list(argv))
    runs = {name: [] for name in ["native", "bare"] + [n for n, _ in variants]}
    for _ in range(runs_per):
        runs["native"].append(_run_native(target.argv))
        runs["bare"].append(_run_traced(TraceSession(device, target, stdio="inherit", bare=True), "bare Stalker"))
        for name, source in variants:
            runs[name].append(_run_traced(TraceSession(device, target, stdio="inherit", counter_source=source),
                                          f"counter.c of {name}"))
    wall = {k: min(w for w, _ in v) for k, v in runs.items()}
    cpu = {k: min(c for _, c in v) for k, v in runs.items()}
    row = {"command": target.argv, "runs": runs_per, "native_s": wall["native"], "native_cpu_s": cpu["native"],
           "bare/native": wall["bare"] / wall["native"], "bare/native cpu": cpu["bare"] / cpu["native"],
           "runs_s": runs}
    for name, _ in variants:
        row[f"{name}/bare"] = wall[name] / wall["bare"]
        row[f"{name}/bare cpu"] = cpu[name] / cpu["bare"]
    return row


def _report(row: dict, variants, as_json: bool) -> None:
    if as_json:
        print(json.dumps(row), flush=True)
        return
    print(" ".join(row["command"]))
    print(f"  native {row['native_s']:.3f} s (main thread cpu {row['native_cpu_s']:.3f} s), "
          f"bare/native {row['bare/native']:.2f}x (cpu {row['bare/native cpu']:.2f}x)")
    for name, _ in variants:
        print(f"  {name + '/bare':<14} {row[f'{name}/bare']:.3f}x  (cpu {row[f'{name}/bare cpu']:.3f}x)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
