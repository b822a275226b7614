#!/usr/bin/env python3
"""A python3 workload whose activities are known by construction, for bench/truth/run.py.

Each activity drives one real library of this system (or one part of the interpreter) for a CPU
budget, measured in the thread's user CPU time (``RUSAGE_THREAD``), and appends
``{"activity", "start_ns", "end_ns", "start_wall_ns", "end_wall_ns"}`` (that user CPU time, and the
wall clock) to the truth file. The user CPU time is the kernel's split of CPU time between user and
system by ticks, not the sampled windows' clock: truth_score.place_truth puts the wall-clock stamps
on that. Activities recur: ``--order random`` draws each next one at random (never the
same twice in a row) with a random budget in [--min, --max] s; ``--order cycle`` repeats the list
in order, activity i always with the same budget (a fixed run-length pattern a predictor can learn).

    pylibs.py TRUTH --activities sqlite,lzma,sha256 --order cycle --seconds 40 [--seed 1]
"""

import argparse
import bz2
import csv
import decimal
import hashlib
import io
import json
import lzma
import pickle
import random
import re
import resource
import sqlite3
import time
import unicodedata
import xml.parsers.expat
import zlib

RND = random.Random(7)
DATA = bytes(RND.getrandbits(8) for _ in range(1 << 16)) * 4 + b"the quick brown fox " * 20000
TEXT = " ".join(RND.choice(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]) + str(i % 97)
                for i in range(60000))


def user_ns() -> int:
    return int(resource.getrusage(resource.RUSAGE_THREAD).ru_utime * 1e9)


def act_sqlite():
    db = sqlite3.connect(":memory:")
    return lambda: db.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) "
                              "SELECT sum(x * x % 7), count(*) FROM c").fetchall()


def act_lzma():
    return lambda: lzma.compress(DATA[:300000], preset=1)


def act_bz2():
    return lambda: bz2.compress(DATA[:400000], 9)


def act_zlib():
    return lambda: zlib.compress(DATA, 6)


def act_inflate():
    packed = zlib.compress(TEXT.encode() * 4, 9)
    return lambda: zlib.decompress(packed)


def act_sha256():
    return lambda: hashlib.sha256(DATA).digest()


def act_md5():
    return lambda: hashlib.md5(DATA).digest()


def act_expat():
    doc = ("<root>" + "".join(f'<item id="{i}" kind="k{i % 13}"><name>n{i}</name><v>{i * 7}</v></item>'
                              for i in range(5000)) + "</root>").encode()

    def run():
        p = xml.parsers.expat.ParserCreate()
        p.Parse(doc, True)
    return run


def act_decimal():
    ctx = decimal.Context(prec=700)
    x = decimal.Decimal(2)
    return lambda: ctx.sqrt(x) * ctx.ln(x + 1)


def act_json():
    obj = [{"id": i, "name": f"n{i}", "tags": ["a", "b", str(i)], "v": i * 0.5} for i in range(3000)]
    return lambda: json.loads(json.dumps(obj))


def act_regex():
    pat = re.compile(r"(\w+?)(\d+)\s(?=[aeiou])")
    return lambda: len(pat.findall(TEXT))


def act_sort():
    xs = [RND.random() for _ in range(100000)]
    return lambda: sorted(xs)


def act_pickle():
    obj = [(i, str(i), float(i), {"k": i}) for i in range(20000)]
    return lambda: pickle.loads(pickle.dumps(obj, 4))


def act_csv():
    rows = "\n".join(f"{i},name{i},\"quoted, {i}\",{i * 3.5}" for i in range(20000))
    return lambda: sum(1 for _ in csv.reader(io.StringIO(rows)))


def act_unicode():
    text = "".join(chr(0xC0 + (i % 60)) for i in range(200000))
    return lambda: unicodedata.normalize("NFD", text)


_DB = None


def database():
    """One in-memory SQLite database shared by the ``sq_*`` activities: short statements on the same
    tables, so those activities differ only in the paths they take through libsqlite3."""
    global _DB
    if _DB is None:
        _DB = sqlite3.connect(":memory:")
        _DB.execute("CREATE TABLE t(a INTEGER PRIMARY KEY, b INTEGER, c TEXT, d REAL)")
        _DB.executemany("INSERT INTO t VALUES (?, ?, ?, ?)",
                        ((i, i * 7 % 1000, f"name{i:06d}", i * 0.5) for i in range(100000)))
        _DB.execute("CREATE INDEX tb ON t(b)")
    return _DB


def act_sq_point():
    db, r = database(), random.Random(1)
    return lambda: [db.execute("SELECT c, d FROM t WHERE a = ?", (r.randrange(100000),)).fetchone()
                    for _ in range(200)]


def act_sq_update():
    db, r = database(), random.Random(2)
    return lambda: [db.execute("UPDATE t SET d = d + 1 WHERE a = ?", (r.randrange(100000),)) for _ in range(200)]


def act_sq_range():
    db, r = database(), random.Random(3)
    return lambda: [db.execute("SELECT sum(d), max(c) FROM t WHERE b = ?", (r.randrange(1000),)).fetchone()
                    for _ in range(20)]


def act_sq_insert():
    db, r = database(), random.Random(4)
    db.execute("CREATE TABLE IF NOT EXISTS w(x INTEGER, y TEXT)")

    def run():
        db.executemany("INSERT INTO w VALUES (?, ?)", ((r.randrange(10**9), "v") for _ in range(2000)))
        db.execute("DELETE FROM w")
    return run


def act_sq_like():
    db = database()
    return lambda: db.execute("SELECT count(*) FROM t WHERE c LIKE '%12%3'").fetchone()


def act_sq_group():
    db = database()
    return lambda: db.execute("SELECT b % 17, count(*), avg(d) FROM t GROUP BY 1").fetchall()


ACTIVITIES = {name[4:]: fn for name, fn in globals().items() if name.startswith("act_")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("--activities", default="sqlite,lzma,sha256,expat")
    ap.add_argument("--order", choices=("random", "cycle"), default="random")
    ap.add_argument("--seconds", type=float, default=40.0, help="user CPU seconds in all")
    ap.add_argument("--min", type=float, default=0.6)
    ap.add_argument("--max", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    names = a.activities.split(",")
    work = {n: ACTIVITIES[n]() for n in names}
    budgets = {n: rnd.uniform(a.min, a.max) for n in names}  # cycle: fixed per activity
    with open(a.truth, "w") as out:
        start, i, last = user_ns(), 0, None
        while user_ns() - start < a.seconds * 1e9:
            if a.order == "cycle":
                name, budget = names[i % len(names)], budgets[names[i % len(names)]]
            else:
                name = rnd.choice([n for n in names if n != last] or names)
                budget = rnd.uniform(a.min, a.max)
            t0, w0 = user_ns(), time.time_ns()
            fn = work[name]
            while user_ns() - t0 < budget * 1e9:
                fn()
            out.write(json.dumps({"activity": name, "start_ns": t0, "end_ns": user_ns(), "start_wall_ns": w0,
                                  "end_wall_ns": time.time_ns()}) + "\n")
            out.flush()
            last, i = name, i + 1


if __name__ == "__main__":
    main()
