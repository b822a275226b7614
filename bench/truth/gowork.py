#!/usr/bin/env python3
"""A server written in Go, attached with ``-p`` as an operator would, for bench/truth/run.py.

Builds bench/truth/goserver.go (Go's standard library: JSON, regular expressions, SHA-256,
deflate, sorting, big integers, templates, number formatting, maps, CRC-32; one path each), starts
it on a Unix socket with the Go runtime's defaults (GOMAXPROCS = the CPUs, its own garbage
collector threads), attaches ``PHASESCOPE... -p SERVER`` and sends it requests over one kept-alive
connection, each kind for a budget of the server's user CPU time, in a random order or a fixed
cycle. TRUTH gets the lines of ``attach.run_activities`` (the server's user CPU, all threads, and
the wall clock, which truth_score.place_truth puts on the windows' clock). Stopping the server ends
the trace.

    gowork.py TRUTH KINDS(comma) random|cycle SECONDS SEED --dir DIR -- PHASESCOPE ARGS...
"""

import argparse
import http.client
import os
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attach import attach, finish, run_activities, user_ns  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class UnixHTTP(http.client.HTTPConnection):
    """An HTTP/1.1 connection over a Unix socket."""

    def __init__(self, path: str):
        super().__init__("localhost", timeout=60)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def main() -> int:
    argv = sys.argv[1:]
    ap = argparse.ArgumentParser()
    for name in ("truth", "kinds", "order", "seconds", "seed"):
        ap.add_argument(name)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args(argv[:argv.index("--")])
    phasescope = argv[argv.index("--") + 1:]
    binary, sock = os.path.join(a.dir, "goserver"), os.path.join(a.dir, "goserver.sock")
    subprocess.run(["go", "build", "-o", binary, os.path.join(HERE, "goserver.go")], check=True)
    server = subprocess.Popen([binary, sock], stdout=subprocess.PIPE, text=True)
    try:
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("the Go server did not start")
        conn = UnixHTTP(sock)

        def get(name: str) -> None:
            conn.request("GET", "/" + name)
            conn.getresponse().read()

        for name in a.kinds.split(","):  # one of each before the attach: start-up is not an activity
            get(name)
        tracer = attach(phasescope, server.pid)
        run_activities(a.truth, a.kinds.split(","), a.order, float(a.seconds), int(a.seed),
                       lambda: user_ns(server.pid, every_thread=True), get)
        conn.close()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    return finish(tracer)


if __name__ == "__main__":
    sys.exit(main())
