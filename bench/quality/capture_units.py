#!/usr/bin/env python3
"""Capture the segment-mode comparison's logs (docs/quality.md, Segments): 100k-instruction units of bzip2,
python3, sqlite3 and bc, each a few seconds to under a minute under exact mode.

    PYTHONPATH=host python3 bench/quality/capture_units.py /tmp/seeds
    PYTHONPATH=host python3 bench/quality/run.py --configs default --segment-modes unit,fixed,variable,qphase \\
        /tmp/seeds/{bzip2,python,sqlite,bc}.jsonl
"""

from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture  # noqa: E402

MIXED_PY = '''
import re, json, hashlib
d = {}
for i in range(150000): d[i % 9973] = d.get(i % 9973, 0) + i
s = sorted(str(i * 7919) for i in range(120000))
txt = " ".join(s[:40000])
n = len(re.findall(r"1[0-9]+9", txt))
js = json.dumps([{"a": i, "b": str(i)} for i in range(40000)]); o = json.loads(js)
h = hashlib.sha256()
for i in range(30000): h.update(str(i).encode())
x = 1
for i in range(2000): x = x * 3 + i
print(n, len(o), h.hexdigest()[:8], x % 1000)
'''
BC = "scale=250\nx=4*a(1)\ny=e(1)\nz=sqrt(2)\nl(3)\nscale=0\nf=1\nfor(i=1;i<=900;i++) f=f*i\nlength(f)\nquit\n"


def inputs(out: str) -> dict:
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    paths = {k: os.path.join(out, k) for k in ("text3m.txt", "mixed.py", "bulk.sql", "big.bc")}
    with open(paths["text3m.txt"], "w") as f:
        size = 0
        while size < 3_000_000:
            line = " ".join(rng.choice(words) for _ in range(8)) + "\n"
            f.write(line)
            size += len(line)
    with open(paths["mixed.py"], "w") as f:
        f.write(MIXED_PY)
    with open(paths["bulk.sql"], "w") as f:
        f.write("create table t(a integer, b text, c real);\nbegin;\n")
        for i in range(40000):
            f.write(f"insert into t values({i},'{words[i % 3000]}',{i * 0.5});\n")
        f.write("commit;\ncreate index ti on t(b);\n"
                "select b,count(*),sum(c) from t group by b order by 2 desc limit 5;\n"
                "select count(*) from t x join t y on x.a=y.a+1 where x.b<y.b;\n"
                "update t set c=c*2 where a%3=0;\nselect avg(c) from t;\n")
    with open(paths["big.bc"], "w") as f:
        f.write(BC)
    return paths


def runs_in(out: str) -> dict:
    p = inputs(out)
    return {"bzip2": ["bzip2", "-9", "-c", p["text3m.txt"]], "python": ["python3", p["mixed.py"]],
            "sqlite": ["sqlite3", ":memory:", "-init", p["bulk.sql"], ".quit"], "bc": ["bc", "-l", p["big.bc"]]}


if __name__ == "__main__":
    sys.exit(capture.main(runs_in, 100_000, __doc__))
