#!/usr/bin/env python3
"""How often a Java program runs right under exact mode: its output against a native run (issue 32).

Compiles bench/jvm/Phases.java (two-thread integer and floating-point rounds, a checksum known from
the native run), runs it once natively and RUNS times under ``phasescope --no-dashboard -f java``
(phasescope's own lines to a file), or with --bare under bench/jvm/bare_stalker.py (the agent's
bare="handled": Stalker with exact mode's JVM handling and near reserve, no counters), and counts
the runs whose stdout and stderr are byte-identical to the native run's. A failed run's first line
of stderr is shown.

    python3 bench/jvm_exact.py [--runs N] [--bare] [--java-flag=-Xint ...] [-- THREADS ROUNDS WORK]

Default program arguments: 2 2 300000.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TIMEOUT = 300


def run(argv: list, timeout: int = TIMEOUT) -> tuple:
    """stdout and stderr of argv; a run past the timeout is killed and counts as wrong."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, b"timed out\n"
    return done.stdout, done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bare", action="store_true", help="bare Stalker with the same JVM handling")
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
        print(f"native: {native[0].decode().strip()}")
        right = 0
        for i in range(args.runs):
            if args.bare:
                traced = run([sys.executable, os.path.join(ROOT, "bench", "jvm", "bare_stalker.py"), *target])
            else:
                traced = run([phasescope, "--no-dashboard", "-o", os.path.join(tmp, "lines"),
                              "-f", java, "--", *target[1:]])
            if traced == native:
                right += 1
            else:
                first = (traced[1].decode(errors="replace").strip().splitlines() or ["(no stderr)"])[0]
                print(f"run {i + 1}: differs: {first[:160]}")
        print(f"{' '.join(target[1:])}: {right} of {args.runs} byte-identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
