#!/usr/bin/env python3
"""Event stream latency: from an interval's end in the target to its event on the socket.

    python3 bench/event_latency.py [--rounds 8] [--clients 1] [--interval N]

Builds bench/cpu_bound.c, runs ``phasescope -f cpu_bound ROUNDS --no-dashboard --events
unix:SOCK`` on it with CLIENTS reading clients, and reports, over every ``interval`` event, the
percentiles of ``sent_ns - end_ns`` (interval end in the target, CLOCK_REALTIME, to the write on
the socket) and of ``received - end_ns`` (to the client's read). Goal: p99 under 20 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def client(path, out):
    deadline = time.monotonic() + 30
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            break
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)
    for line in s.makefile("r", encoding="utf-8"):
        now = time.time_ns()
        e = json.loads(line)
        if e["event"] == "interval" and e["end_ns"]:
            out.append((e["sent_ns"] - e["end_ns"], now - e["end_ns"]))
        elif e["event"] == "end":
            break


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q / 100 * len(v)))] / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=8, help="cpu_bound rounds (default 8)")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--interval", type=int, default=None, help="phasescope --interval")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="event-latency-"))
    exe = tmp / "cpu_bound"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(ROOT / "bench" / "cpu_bound.c")], check=True)
    sock = str(tmp / "ev.sock")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "phasescope.cli", "-f", str(exe), str(args.rounds), "--no-dashboard",
           "--events", f"unix:{sock}"] + (["--interval", str(args.interval)] if args.interval else [])
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = [[] for _ in range(args.clients)]
    threads = [threading.Thread(target=client, args=(sock, r)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proc.wait()
    print(" ".join(cmd[2:]))
    for i, r in enumerate(results):
        sent, recv = [a for a, _ in r], [b for _, b in r]
        print(f"client {i}: {len(r)} interval events; end->sent p50 {pct(sent, 50):.2f} ms p99 {pct(sent, 99):.2f} ms "
              f"max {max(sent) / 1e6:.2f} ms; end->received p50 {pct(recv, 50):.2f} ms p99 {pct(recv, 99):.2f} ms")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
