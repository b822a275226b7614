#!/usr/bin/env python3
"""Capture the quality harness's logs: one exact-mode phasescope log (live defaults: 10M-instruction
intervals) of each program of bench/quality/programs.py, into DIR/NAME.jsonl. Exact mode costs
10-15x native on interpreters and compilers, so record once and tune by replay.

    python3 bench/quality/capture.py DIR [NAME ...]
    python3 bench/quality/run.py DIR/*.jsonl
"""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
sys.path.insert(0, HERE)


def capture(runs: dict, out: str, interval: int) -> None:
    """Trace each ``name -> argv`` (or :class:`programs.Program`, whose ``driver`` loads a server
    while it is traced) in exact mode at ``interval`` instructions into ``out/name.jsonl``."""
    for name, prog in runs.items():
        argv, driver = getattr(prog, "argv", prog), getattr(prog, "driver", None)
        log = os.path.join(out, name + ".jsonl")
        cmd = [sys.executable, "-m", "phasescope.cli", "--no-dashboard", "--interval", str(interval), "--log", log,
               "-f", argv[0], "--", *argv[1:]]
        with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as p:
            if driver is not None:
                driver(log)
            _, err = p.communicate(timeout=900)
        print(f"{name}: exit {p.returncode}, {sum(1 for _ in open(log))} intervals -> {log}"
              + (f"\n{err.strip()}" if p.returncode else ""), flush=True)


def main(runs_in=None, interval: int = 10_000_000, usage: str = __doc__) -> int:
    """``script DIR [NAME...]``: make the inputs in DIR (``runs_in(DIR)`` -> name -> argv or Program;
    default: bench/quality/programs.py), then capture them (only the NAMEs given, if any)."""
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(usage, file=sys.stderr)
        return 2
    if runs_in is None:
        from programs import runs as runs_in
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    runs = runs_in(out)
    only = sys.argv[2:]
    unknown = set(only) - set(runs)
    if unknown:
        print(f"unknown program(s): {', '.join(sorted(unknown))} (known: {', '.join(runs)})", file=sys.stderr)
        return 2
    capture({k: v for k, v in runs.items() if not only or k in only}, out, interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
