#!/usr/bin/env python3
"""Ctrl-C while a python3 program is still in CPython's start-up, untraced and under exact mode
(issue 26; docs/robustness.md): how each SIGINT ended the program.

    python3 bench/ctrl_c_start_up.py [--tries 6] [--python /usr/bin/python3]

untraced: SIGINT to ``python3 -c ...`` 5-80 ms after its start; exact: SIGINT to phasescope
0.5-3.5 s after it resumed the same program (its first status line). Each SIGINT ends as
``fatal`` (CPython's "Fatal Python error", during its site import), ``traceback`` (the program's
KeyboardInterrupt) or ``signal`` (neither: it died of the signal). Run as root, from the repository
with phasescope installed.
"""

from __future__ import annotations

import argparse
import collections
import signal
import subprocess
import sys
import time

PROGRAM = ["-c", "import time; print('main', flush=True); time.sleep(5)"]


def outcome(stderr: str) -> str:
    if "Fatal Python error" in stderr:
        return "fatal"
    return "traceback" if "KeyboardInterrupt" in stderr else "signal"


def interrupt(argv: list, delay: float, after_first_line: bool) -> str:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline() if after_first_line else ""  # phasescope's first status line
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return outcome(first + err)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tries", type=int, default=6, help="SIGINTs per delay")
    ap.add_argument("--python", default="/usr/bin/python3")
    args = ap.parse_args()
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a shell's background job starts with it ignored, as its children would
    runs = {
        "untraced": ([args.python, *PROGRAM], (0.005, 0.01, 0.02, 0.03, 0.05, 0.08), False),
        "exact": ([sys.executable, "-m", "phasescope.cli", "--no-dashboard", "-f", args.python, "--", *PROGRAM],
                  (0.5, 1.5, 2.5, 3.5), True),
    }
    for name, (argv, delays, after_first_line) in runs.items():
        for delay in delays:
            counts = collections.Counter(interrupt(argv, delay, after_first_line) for _ in range(args.tries))
            print(f"{name}: SIGINT at {delay:g} s: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
