#!/usr/bin/env python3
"""A database server's backend, attached with ``-p`` as an operator would, for bench/truth/run.py.

Starts (once) a private PostgreSQL cluster on a Unix socket under ``--cluster`` (as user
``postgres``), opens one psql session, attaches ``PHASESCOPE... -p BACKEND`` to its backend and runs
statements of several kinds (point lookups, range scans, sequential scans, grouping, sorting,
joins, inserts, updates, regular expressions, JSON) in batches, each kind for a budget of the
backend's user CPU time, in a random order or a fixed cycle. Writes ``{"activity", "start_ns",
"end_ns", "start_wall_ns", "end_wall_ns"}`` lines (backend user CPU ns since the attach, and the wall
clock, which truth_score.place_truth puts on the windows' clock) to TRUTH; closing the session ends the
backend and so the trace, and the cluster is stopped.

    pgwork.py TRUTH KINDS(comma) random|cycle SECONDS SEED --cluster DIR -- PHASESCOPE ARGS...
"""

import argparse
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attach import attach, finish, run_activities, user_ns  # noqa: E402

BIN = next((f"/usr/lib/postgresql/{v}/bin" for v in ("17", "16", "15") if os.path.isdir(f"/usr/lib/postgresql/{v}")),
           "/usr/lib/postgresql/15/bin")
ROWS = 200_000
SETUP = f"""
DROP TABLE IF EXISTS t, u;
CREATE TABLE t (id int PRIMARY KEY, a int, b text, j jsonb);
INSERT INTO t SELECT g, (g * 7919) % 1000, md5(g::text), jsonb_build_object('k', g % 97, 'n', md5(g::text))
  FROM generate_series(1, {ROWS}) g;
CREATE INDEX ON t (a);
CREATE TABLE u (id int, v text);
INSERT INTO u SELECT g, 'v' || g FROM generate_series(1, 20000) g;
VACUUM ANALYZE;
"""
R = random.Random(3)
KINDS = {  # one statement each (the truth clock is user time: no storms of round trips), ~10-50 ms
    "point": lambda: f"SELECT count((SELECT b FROM t WHERE id = (g * 7919) % {ROWS} + 1)) "
                     f"FROM generate_series({R.randrange(1000)}, 3000) g;",
    "range": lambda: f"SELECT sum(length(b)) FROM t WHERE a BETWEEN {R.randrange(900)} AND {R.randrange(900) + 60};",
    "seqscan": lambda: "SELECT count(*) FROM t WHERE b LIKE '%ab%';",
    "group": lambda: "SELECT a % 50, count(*), max(b) FROM t GROUP BY 1;",
    "sort": lambda: "SELECT id FROM t ORDER BY b DESC LIMIT 5 OFFSET 20000;",
    "join": lambda: "SELECT count(*) FROM u JOIN t ON t.id = u.id * 3;",
    "insert": lambda: "BEGIN; INSERT INTO u SELECT g, 'x' FROM generate_series(1, 3000) g; ROLLBACK;",
    "update": lambda: f"BEGIN; UPDATE t SET a = a + 1 WHERE id < {R.randrange(2000, 4000)}; ROLLBACK;",
    "regex": lambda: "SELECT count(*) FROM u WHERE v ~ '^v[0-9]*7[0-9]?$' OR regexp_replace(v, '[0-4]', 'z') = 'vzz';",
    "json": lambda: "SELECT count(*) FROM t WHERE (j->>'k')::int = 5 AND j ? 'n' AND id < 60000;",
}


def pg_ctl(path: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", "postgres", "--", f"{BIN}/pg_ctl", "-D", path, *args],
                          stdout=subprocess.DEVNULL, **kw)


def cluster(path: str) -> str:
    """Start the private cluster (initdb on first use); returns its socket directory."""
    if not os.path.exists(os.path.join(path, "PG_VERSION")):
        os.makedirs(path, exist_ok=True)
        shutil.chown(path, "postgres")
        subprocess.run(["runuser", "-u", "postgres", "--", f"{BIN}/initdb", "-A", "trust", "-D", path],
                       check=True, stdout=subprocess.DEVNULL)
    if pg_ctl(path, "status").returncode != 0:
        pg_ctl(path, "-w", "-l", os.path.join(path, "server.log"), "-o", f"-k {path} -c listen_addresses=''",
               "start", check=True)
    return path


class Session:
    """One psql session; ``run`` sends SQL and returns once the backend has answered."""

    def __init__(self, socket_dir: str):
        self.p = subprocess.Popen(["psql", "-h", socket_dir, "-U", "postgres", "-X", "-q", "-A", "-t",
                                   "-v", "ON_ERROR_STOP=1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1)
        self.pid = int(self.ask("SELECT pg_backend_pid();"))
        self.run("\\o /dev/null")

    def ask(self, sql: str) -> str:
        self.p.stdin.write(sql + "\n\\echo @@done\n")
        lines = []
        while (line := self.p.stdout.readline().strip()) != "@@done":
            if not line and self.p.poll() is not None:
                raise RuntimeError("psql ended")
            lines.append(line)
        return "\n".join(lines)

    run = ask


def main() -> int:
    argv = sys.argv[1:]
    ap = argparse.ArgumentParser()
    for name in ("truth", "kinds", "order", "seconds", "seed"):
        ap.add_argument(name)
    ap.add_argument("--cluster", default="/tmp/phasescope-pg")
    a = ap.parse_args(argv[:argv.index("--")])
    phasescope = argv[argv.index("--") + 1:]
    try:
        return trace(Session(cluster(a.cluster)), a, phasescope)
    finally:
        pg_ctl(a.cluster, "-w", "-m", "fast", "stop")


def trace(s: Session, a: argparse.Namespace, phasescope: list) -> int:
    """Run the activities in session ``s`` under ``phasescope`` attached to its backend."""
    s.run(SETUP)
    s.run("SELECT count(*) FROM t;")
    tracer = attach(phasescope, s.pid)
    run_activities(a.truth, a.kinds.split(","), a.order, float(a.seconds), int(a.seed), lambda: user_ns(s.pid),
                   lambda name: s.run(KINDS[name]()))
    s.p.stdin.close()
    s.p.wait(timeout=60)
    return finish(tracer)

if __name__ == "__main__":
    sys.exit(main())
