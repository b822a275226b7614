#!/usr/bin/env python3
"""An example policy: lower a thread's CPU priority while it runs a background phase.

    phasescope -f ./server --phase-db phases.json --events unix:/tmp/ps.sock &
    python3 examples/nice_by_phase.py unix:/tmp/ps.sock --background 4,7 --nice 10

It reads phasescope's event stream (JSON Lines, see README "The event stream"); when a thread's
interval is in a background phase it renices that thread (os.setpriority on its tid), and when
the thread leaves the phase it restores the thread's previous niceness. Every decision is logged
on stdout. With --phase-db, phase IDs mean the same code in every run, so the flagged IDs stay
valid from one run to the next. Lowering a niceness again needs CAP_SYS_NICE (root); without it
the failure is logged and the thread stays niced. --dry-run only logs.
"""

import argparse
import json
import os
import socket
import sys
import time


def connect(address, timeout=30.0):
    kind, _, rest = address.partition(":")
    if kind == "unix":
        family, where = socket.AF_UNIX, rest
    elif kind == "tcp":
        host, _, port = rest.rpartition(":")
        family, where = socket.AF_INET6 if ":" in host else socket.AF_INET, (host.strip("[]"), int(port))
    else:
        sys.exit(f"nice_by_phase: bad address {address!r} (unix:PATH or tcp:HOST:PORT)")
    deadline = time.monotonic() + timeout
    while True:  # phasescope may not be listening yet
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.connect(where)
            return s
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                sys.exit(f"nice_by_phase: cannot connect to {address}")
            time.sleep(0.05)


def events(stream):
    """The events of a stream of lines; stops at a last line without its newline: phasescope cut
    off a client that read too slowly as it ended, in the middle of that line."""
    for line in stream:
        if not line.endswith("\n"):
            print("nice_by_phase: the stream was cut off (phasescope ended)", flush=True)
            return
        yield json.loads(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("address", help="phasescope --events address: unix:PATH or tcp:HOST:PORT")
    ap.add_argument("--background", required=True, help="comma-separated phase IDs to run at low priority")
    ap.add_argument("--nice", type=int, default=10, help="niceness while in a background phase (default 10)")
    ap.add_argument("--dry-run", action="store_true", help="log decisions, change nothing")
    args = ap.parse_args()
    background = {int(p) for p in args.background.split(",") if p}
    saved = {}  # tid -> niceness before we reniced it

    def log(msg):
        print(f"nice_by_phase: {msg}", flush=True)

    def renice(tid, value, why):
        try:
            if not args.dry_run:
                os.setpriority(os.PRIO_PROCESS, tid, value)
            now = value if args.dry_run else os.getpriority(os.PRIO_PROCESS, tid)
            log(f"thread {tid}: {why}: nice {value} (now {now}){' [dry run]' if args.dry_run else ''}")
        except OSError as e:  # the thread exited, or raising priority needs CAP_SYS_NICE
            log(f"thread {tid}: {why}: cannot set nice {value}: {e.strerror}")

    for e in events(connect(args.address).makefile("r", encoding="utf-8")):
        kind = e["event"]
        if kind == "hello":
            log(f"connected to {e['target']} (pid {e['pid']}); background phases {sorted(background)}")
        elif kind == "interval":
            tid, phase = e["thread"], e["phase"]
            if phase in background and tid not in saved:
                try:
                    saved[tid] = os.getpriority(os.PRIO_PROCESS, tid)
                except OSError:
                    continue  # already gone
                renice(tid, args.nice, f"entered background phase P{phase}")
            elif phase not in background and tid in saved:
                renice(tid, saved.pop(tid), f"left for P{phase}")
        elif kind == "dropped":
            log(f"missed {e['count']} events (reading too slowly)")
        elif kind == "end":
            log(f"target {e['how']}; {len(saved)} thread(s) still niced")
            break


if __name__ == "__main__":
    main()
