#!/usr/bin/env python3
"""Runs a program under bare Stalker with phasescope's JVM handling (bare_stalker.js), its output
untouched: the baseline of bench/jvm_exact.py --bare (issue 32).

    python3 bench/jvm/bare_stalker.py PROGRAM [ARGS...]
"""

import os
import sys
import threading

import frida


def main() -> int:
    if len(sys.argv) < 2:
        print("bare_stalker: usage: bare_stalker.py PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    device = frida.get_local_device()
    pid = device.spawn(sys.argv[1:])
    session = device.attach(pid)
    gone = threading.Event()
    session.on("detached", lambda *_: gone.set())
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "bare_stalker.js")) as f:
        script = session.create_script(f.read())
    script.load()
    device.resume(pid)
    return 0 if gone.wait(600) else 3  # the output is what counts (the target is not our child)


if __name__ == "__main__":
    sys.exit(main())
