#!/usr/bin/env python3
"""A real tool whose own phases are known, attached with ``-p`` (bench/truth/run.py): ``openssl
speed -mr`` runs one algorithm after another and announces each on stderr (``+DT:md5:...``,
``+DTP:2048:private:rsa:...``) as it starts. The tool is started stopped, phasescope attaches, and
each announcement is stamped with the tool's user CPU time since the attach (polled every 10 ms):
TRUTH gets ``{"activity", "start_ns", "end_ns", "start_wall_ns", "end_wall_ns"}`` lines (the wall
clock at each announcement too: truth_score.place_truth puts it on the windows' clock).

    toolwork.py TRUTH ALGORITHMS(comma) SECONDS_EACH -- PHASESCOPE ARGS...
"""

import json
import os
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attach import attach, finish, user_ns  # noqa: E402


def activity(line: str):
    """The algorithm a ``+DT``/``+DTP`` line starts, None for other lines."""
    f = line.strip().split(":")
    if f[0] == "+DT":
        return f[1]
    if f[0] in ("+DTP", "+DTP1", "+DTP2"):
        return f"{f[3]}{f[1]}-{f[2]}"  # rsa2048-private
    return None


def main() -> int:
    argv = sys.argv[1:]
    truth, algorithms, seconds = argv[:3]
    phasescope = argv[argv.index("--") + 1:]
    tool = subprocess.Popen(["openssl", "speed", "-mr", "-seconds", seconds, "-bytes", "16384",
                             *algorithms.split(",")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.kill(tool.pid, signal.SIGSTOP)
    tracer = attach(phasescope, tool.pid)
    base = user_ns(tool.pid)
    os.kill(tool.pid, signal.SIGCONT)
    rows, now, buf = [], 0, b""
    while True:
        ready, _, _ = select.select([tool.stderr], [], [], 0.01)
        t = user_ns(tool.pid)
        now = t - base if t >= 0 else now
        if not ready:
            continue
        chunk = os.read(tool.stderr.fileno(), 4096)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            name = activity(line.decode())
            if name is not None:
                wall = time.time_ns()
                if rows:
                    rows[-1].update(end_ns=now, end_wall_ns=wall)
                rows.append({"activity": name, "start_ns": now, "end_ns": now, "start_wall_ns": wall, "end_wall_ns": wall})
    if rows:
        rows[-1].update(end_ns=now, end_wall_ns=time.time_ns())
    tool.wait(timeout=60)
    with open(truth, "w") as out:
        out.writelines(json.dumps(r) + "\n" for r in rows)
    return finish(tracer)


if __name__ == "__main__":
    sys.exit(main())
