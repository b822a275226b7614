#!/usr/bin/env python3
"""``kill -SEGV`` to an attached exact-mode target, once per round: does it end as untraced, or
hang (docs/robustness.md, stop 47)? ``tests/programs/robust.c spin`` (or ``sent handle``) is
attached with ``-p``; after 5 intervals it is sent SIGSEGV. A target still alive 15 s later is a
hang: its threads' signal state and kernel wait channel are printed, then it is killed. With
``--vs OTHER/host`` each round runs that checkout's phasescope first, then this one's.

    python3 bench/sent_signal.py [--rounds 8] [--how spin|handle] [--vs /tmp/before/host]
"""

from __future__ import annotations

import argparse
import glob
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def thread_state(pid: int) -> str:
    """One line per thread: its SigPnd, ShdPnd, SigBlk, SigCgt, wait channel and kernel function (a
    thread spinning on Frida's heap lock is in ``__do_sys_sched_yield``)."""
    lines = []
    for task in sorted(glob.glob(f"/proc/{pid}/task/*")):
        try:
            status = dict(line.split(":\t", 1) for line in open(task + "/status").read().splitlines() if ":\t" in line)
            wchan = open(task + "/wchan").read()
            stack = open(task + "/stack").read().split("\n")[0].split(" ")[-1]  # root: the kernel stack's top
        except OSError:
            continue
        fields = " ".join(f"{k}={status.get(k, '?')}" for k in ("State", "SigPnd", "ShdPnd", "SigBlk", "SigCgt"))
        lines.append(f"  {os.path.basename(task)} {fields} wchan={wchan} in={stack}")
    return "\n".join(lines)


def one_round(exe: str, how: str, host: str, log: str) -> str:
    """What became of one target sent SIGSEGV under the phasescope of `host`."""
    target = subprocess.Popen([exe, "spin"] if how == "spin" else [exe, "sent", how], stdout=subprocess.PIPE, text=True)
    target.stdout.readline()
    if os.path.exists(log):
        os.unlink(log)
    env = dict(os.environ, PYTHONPATH=host)
    mon = subprocess.Popen([sys.executable, "-m", "phasescope.cli", "--no-dashboard", "--interval", "1000000",
                            "--log", log, "-p", str(target.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env)
    end = time.monotonic() + 120
    while time.monotonic() < end and (not os.path.exists(log) or open(log, "rb").read().count(b"\n") < 5):
        time.sleep(0.05)
    os.kill(target.pid, signal.SIGSEGV)
    try:
        status = target.wait(timeout=15)
        err = mon.communicate(timeout=60)[1].strip().splitlines()
        return f"ended: status {status}, {err[-1] if err else ''}"
    except subprocess.TimeoutExpired:
        state = thread_state(target.pid)
        target.kill()
        target.wait()
        mon.send_signal(signal.SIGINT)
        mon.communicate(timeout=60)
        return "HUNG\n" + state


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--how", choices=("spin", "handle"), default="spin")
    ap.add_argument("--vs", help="another checkout's host/ directory, run first in each round")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "robust")
        subprocess.run(["cc", "-O1", "-pthread", "-o", exe, os.path.join(ROOT, "tests/programs/robust.c")], check=True)
        hosts = ([("vs", args.vs)] if args.vs else []) + [("this", os.path.join(ROOT, "host"))]
        hung = {name: 0 for name, _ in hosts}
        for i in range(args.rounds):
            for name, host in hosts:
                result = one_round(exe, args.how, host, os.path.join(tmp, "log.jsonl"))
                hung[name] += result.startswith("HUNG")
                print(f"round {i + 1} {name}: {result}", flush=True)
        print(" ".join(f"{name}: {n} of {args.rounds} hung" for name, n in hung.items()))


if __name__ == "__main__":
    main()
