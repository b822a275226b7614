#!/usr/bin/env python3
"""How often a Java program runs right under exact mode: its output against a native run (issue 32).

Compiles bench/jvm/Phases.java (two-thread integer and floating-point rounds, a checksum known from
the native run), runs it once natively and RUNS times under ``phasescope --no-dashboard -f java``
(phasescope's own lines to a file), or with --bare under bench/jvm/bare_stalker.py (the agent's
bare="handled": Stalker with exact mode's JVM handling and near reserve, no counters), and counts
the runs whose stdout and stderr are byte-identical to the native run's. A failed run's first line
of stderr is shown. With --attach S, each run starts the program natively and attaches
``phasescope -p PID --duration D`` S seconds in: a run is right when phasescope exits 0 having
counted instructions on at least two threads, the program still runs when it detaches, and its
output is the native run's (the program must outlast S + D).

    python3 bench/jvm_exact.py [--runs N] [--bare | --attach S [--duration D]] [--java-flag=-Xint ...]
                               [-- THREADS ROUNDS WORK]

Default program arguments: 2 2 300000.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TIMEOUT = 300


def run(argv: list, timeout: int = TIMEOUT) -> tuple:
    """stdout and stderr of argv; a run past the timeout is killed and counts as wrong."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, b"timed out\n"
    return done.stdout, done.stderr


def attached(target: list, phasescope: str, tmp: str, after: float, duration: float) -> tuple:
    """The program's stdout and stderr, started natively and traced with -p from ``after`` seconds
    in for ``duration``, and what went wrong on phasescope's side (None: nothing): it failed,
    counted fewer than two threads, or the program had ended by the time it detached."""
    summary = os.path.join(tmp, "summary.json")
    program = subprocess.Popen(target, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = os.path.join(tmp, "lines")
    if os.path.exists(lines):
        os.remove(lines)  # the run before's
    time.sleep(after)
    tracer = subprocess.Popen([phasescope, "--no-dashboard", "-o", lines, "--summary", summary,
                               "-p", str(program.pid), "--duration", str(duration)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    alive = False
    while tracer.poll() is None:  # whether the program runs once phasescope says it detached
        if os.path.exists(lines) and b"detached;" in open(lines, "rb").read():
            alive = program.poll() is None
            break
        time.sleep(0.05)
    traced = subprocess.CompletedProcess(tracer.args, tracer.wait(timeout=TIMEOUT), None, tracer.stderr.read())
    out, err = program.communicate(timeout=TIMEOUT)
    if traced.returncode != 0:
        text = traced.stderr + (open(lines, "rb").read() if os.path.exists(lines) else b"")
        said = [line for line in text.splitlines() if b"phasescope:" in line or b" exited " in line]
        return out, err, f"phasescope exit {traced.returncode}: {b' / '.join(said[-2:]).decode()}"
    counted = [t for t in json.load(open(summary))["threads"].values() if t["instructions"] > 0]
    if len(counted) < 2:
        return out, err, f"counted {len(counted)} thread(s)"
    return out, err, None if alive else "the program ended before phasescope detached"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bare", action="store_true", help="bare Stalker with the same JVM handling")
    parser.add_argument("--attach", type=float, metavar="S", help="attach with -p S seconds after the start")
    parser.add_argument("--duration", type=float, default=3.0, help="with --attach: seconds traced")
    parser.add_argument("--java-flag", action="append", default=[], help="a JVM flag, e.g. --java-flag=-Xint")
    parser.add_argument("program", nargs="*", default=["2", "2", "300000"])
    args = parser.parse_args()
    java, javac, phasescope = shutil.which("java"), shutil.which("javac"), shutil.which("phasescope")
    if java is None or javac is None or phasescope is None:
        print("jvm_exact: java, javac and phasescope (an activated venv) are needed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([javac, "-d", tmp, os.path.join(ROOT, "bench", "jvm", "Phases.java")], check=True)
        target = [java, *args.java_flag, "-XX:+UseSerialGC", "-cp", tmp, "Phases", *args.program]
        native = run(target)
        print(f"native: {native[0].decode().strip()}", flush=True)
        right = 0
        for i in range(args.runs):
            if args.attach is not None:
                *traced, problem = attached(target, phasescope, tmp, args.attach, args.duration)
                if problem is not None:
                    same = "the same" if tuple(traced) == native else "NOT the same"
                    print(f"run {i + 1}: {problem[:600]} (the program's output: {same} as native)", flush=True)
                    continue
                traced = tuple(traced)
            elif args.bare:
                traced = run([sys.executable, os.path.join(ROOT, "bench", "jvm", "bare_stalker.py"), *target])
            else:
                traced = run([phasescope, "--no-dashboard", "-o", os.path.join(tmp, "lines"),
                              "-f", java, "--", *target[1:]])
            if traced == native:
                right += 1
                print(f"run {i + 1}: right", flush=True)
            else:
                first = (traced[1].decode(errors="replace").strip().splitlines() or ["(no stderr)"])[0]
                print(f"run {i + 1}: differs: {first[:800]}", flush=True)
        print(f"{' '.join(target[1:])}: {right} of {args.runs} byte-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
