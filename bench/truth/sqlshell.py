#!/usr/bin/env python3
"""A sqlite3 shell workload whose activities are known by construction, for bench/truth/run.py.

``script`` writes a SQL script: a setup, then statements of several kinds (all in libsqlite3, so
the kinds share one library and differ only in the code paths they take), each kind sized for about
--min..--max s of CPU, recurring in a random order or a fixed cycle. Before each statement the
script prints its kind and the wall clock (``@@kind SECONDS``, ``CLOCK_REALTIME`` to the
millisecond), and after the last one ``@@end SECONDS``. ``truth`` turns the shell's stdout into the
truth file, one ``{"activity", "start_ns", "end_ns", "start_wall_ns", "end_wall_ns"}`` line per
statement (``start_ns``/``end_ns``: the ``.timer`` user time, ``Run Time: real R user U sys S``);
truth_score.place_truth then places the stamps among the run's windows (their sample times), on
the windows' own CPU clock. The shell cannot read that clock itself: ``.timer``'s user time is the
kernel's split of CPU time between user and system by ticks, which drifted up to 4 windows against
the windows along a 130 s run (issue 27, stop 40).

    sqlshell.py script OUT.sql --kinds cte,sort,groupby --order random --seconds 40 [--seed 1]
    phasescope --mode sampled --log LOG -f sqlite3 -- :memory: ".read OUT.sql" > OUT.txt
    sqlshell.py truth OUT.txt TRUTH.jsonl
"""

import argparse
import json
import random
import re

SETUP = """
CREATE TABLE t(a INTEGER, b INTEGER, c TEXT, d REAL);
WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 200000)
INSERT INTO t SELECT x, abs(random()) % 1000, hex(randomblob(8)), random() / 1e15 FROM s;
CREATE TABLE u(k INTEGER PRIMARY KEY, v TEXT);
INSERT INTO u SELECT a, c FROM t WHERE a <= 1000;
"""

#: kind -> (statement with {n}, n per CPU second on this VM), or (statement, -seconds per run): repeated
KINDS = {
    "cte": ("WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < {n}) "
            "SELECT sum(x * x % 7) FROM s;", 7_000_000),
    "strings": ("WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < {n}) "
                "SELECT count(*) FROM s WHERE instr(upper(replace(printf('%08d-abc-%x', x, x), 'a', 'zz')), 'ZZB') > 0;", 1_650_000),
    "sort": ("SELECT count(*) FROM (SELECT c FROM t ORDER BY d * 7 % 997, c LIMIT 100000 OFFSET 10);", -0.14),
    "groupby": ("SELECT count(*) FROM (SELECT b, sum(d), max(c), avg(a) FROM t, (SELECT value FROM "
                "generate_series(1, {n})) GROUP BY b);", 14),
    "join": ("SELECT count(*) FROM t JOIN u ON u.k = t.b, (SELECT value FROM generate_series(1, {n}));", 530),
    "like": ("SELECT count(*) FROM t, (SELECT value FROM generate_series(1, {n})) WHERE c LIKE '%A%B%' OR c GLOB '*[0-3]F*';", 950),
    "index": ("CREATE INDEX ix ON t(c, d); DROP INDEX ix;", -0.066),
    "json": ("WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < {n}) "
             "SELECT sum(json_extract(json_object('a', x, 'b', json_array(x, x * 2, 'q')), '$.b[1]')) FROM s;", 1_550_000),
    "window": ("SELECT max(r) FROM (SELECT sum(d) OVER (PARTITION BY b ORDER BY a ROWS 5 PRECEDING) AS r FROM t, "
               "(SELECT value FROM generate_series(1, {n})));", 7),
    "insert": ("CREATE TEMP TABLE w(x, y); WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < {n}) "
               "INSERT INTO w SELECT x, hex(randomblob(16)) FROM s; DROP TABLE w;", 2_700_000),
    "math": ("WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < {n}) "
             "SELECT sum(round(x * 1.000001 / 3.0, 3) + abs(x - 5000) % 13) FROM s;", 2_650_000),
    "blob": ("WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < {n}) "
             "SELECT count(DISTINCT substr(hex(zeroblob(64) || randomblob(32)), 60, 8)) FROM s;", 1_950_000),
}


def statement(kind: str, seconds: float) -> str:
    text, per_s = KINDS[kind]
    if per_s < 0:
        return " ".join([text] * max(1, round(seconds / -per_s)))
    return text.format(n=max(1, round(per_s * seconds)))


def stamp(kind: str) -> str:
    """A statement printing ``@@kind`` and the wall clock in seconds (sqlite's 'now': ms)."""
    return f"SELECT '@@{kind} ' || ((julianday('now') - 2440587.5) * 86400.0);"


def write_script(path, kinds, order, seconds, lo, hi, seed):
    rnd = random.Random(seed)
    budgets = {k: rnd.uniform(lo, hi) for k in kinds}
    total, i, last, lines = 0.0, 0, None, [stamp("setup"), ".timer on", SETUP.strip()]
    while total < seconds:
        if order == "cycle":
            kind = kinds[i % len(kinds)]
            budget = budgets[kind]
        else:
            kind = rnd.choice([k for k in kinds if k != last] or kinds)
            budget = rnd.uniform(lo, hi)
        lines += [".timer off", stamp(kind), ".timer on", statement(kind, budget)]
        total, last, i = total + budget, kind, i + 1
    lines += [".timer off", stamp("end")]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


RUN = re.compile(r"Run Time: real [\d.]+ user ([\d.]+) sys [\d.]+")


def stamps(stdout_path) -> list:
    """(kind, wall ns, .timer user ns so far) at each ``@@kind SECONDS`` line of the shell's stdout."""
    out, user = [], 0.0
    with open(stdout_path) as f:
        for line in f:
            if line.startswith("@@"):
                kind, seconds = line[2:].split()
                out.append((kind, round(float(seconds) * 1e9), round(user * 1e9)))
            else:
                m = RUN.search(line)
                if m:
                    user += float(m.group(1))
    return out


def write_truth(stdout_path, truth_path):
    """One truth line per statement kind block (setup included), from stamp to stamp: the wall
    clock, and the .timer user time as the shell's own CPU reading."""
    marks = stamps(stdout_path)
    if not marks or marks[-1][0] != "end":
        raise SystemExit(f"{stdout_path}: no @@end stamp (the script did not run to its end)")
    with open(truth_path, "w") as f:
        for (kind, s, us), (_, e, ue) in zip(marks, marks[1:]):
            f.write(json.dumps({"activity": kind, "start_ns": us, "end_ns": ue, "start_wall_ns": s,
                                "end_wall_ns": e}) + "\n")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("script")
    s.add_argument("out")
    s.add_argument("--kinds", default="cte,sort,groupby,like,json,insert")
    s.add_argument("--order", choices=("random", "cycle"), default="random")
    s.add_argument("--seconds", type=float, default=40.0)
    s.add_argument("--min", type=float, default=1.0)
    s.add_argument("--max", type=float, default=3.0)
    s.add_argument("--seed", type=int, default=1)
    t = sub.add_parser("truth")
    t.add_argument("stdout")
    t.add_argument("truth")
    a = ap.parse_args()
    if a.cmd == "script":
        write_script(a.out, a.kinds.split(","), a.order, a.seconds, a.min, a.max, a.seed)
    else:
        write_truth(a.stdout, a.truth)


if __name__ == "__main__":
    main()
