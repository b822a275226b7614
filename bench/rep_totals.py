#!/usr/bin/env python3
"""Exact mode's total instruction count against valgrind's, with rep strings (issue 33).

For each workload: phasescope's total with ``--rep-count iterations`` against callgrind's ``I refs``,
and with ``--rep-count once`` against exp-bbv's ``Total instructions``. Each difference is what ran
before tracing started (the loader and the dynamic linker: valgrind sees them, phasescope's agent
is not there yet), so both differences of one workload should be equal, and small.

    python3 bench/rep_totals.py [--only NAME]

glibc chooses memcpy/memset, and the sizes from which they use rep movsb, by the CPU's features and
cache sizes, and valgrind's CPU differs (no AVX-512, other caches): every run gets GLIBC_TUNABLES
with valgrind's values, so the traced and the valgrind runs execute the same code.
Inputs are smaller than bench/sampled_overhead.py's (valgrind runs them 50-100x slower).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "host"))
from phasescope.sources.device import resolve_device, resolve_target  # noqa: E402
from phasescope.sources.events import Ended, IntervalEvent  # noqa: E402
from phasescope.sources.session import TraceSession  # noqa: E402

SAME_GLIBC = ("glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-AVX512ER,-AVX512PF"
              ":glibc.cpu.x86_rep_movsb_threshold=0x2000:glibc.cpu.x86_non_temporal_threshold=0x200000"
              ":glibc.cpu.x86_shared_cache_size=0x800000:glibc.cpu.x86_data_cache_size=0x8000")
SQL = """CREATE TABLE t(a INTEGER, b TEXT, c REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO t SELECT i, printf('%08x', (i * 2654435761) % 4294967296), i * 0.5 FROM n;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(c) FROM t WHERE b LIKE '1%';
SELECT a % 97 AS g, count(*), avg(c) FROM t GROUP BY g ORDER BY 2 DESC LIMIT 3;
"""
SMALL_C = "int f(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i] * i; return s; }\n" + \
    "".join(f"int g{i}(int x) {{ return x * {i} + (x >> 3); }}\n" for i in range(40))


def cc(tmp: str, source: str, name: str) -> str:
    exe = os.path.join(tmp, name)
    subprocess.run(["cc", "-O1", "-o", exe, source], check=True)
    return exe


def workloads(tmp: str) -> list:
    text = os.path.join(tmp, "data.txt")
    with open(text, "wb") as out:  # 1 MiB of real text: Python's own sources
        for path in sorted(os.listdir(os.path.dirname(os.__file__))):
            full = os.path.join(os.path.dirname(os.__file__), path)
            if path.endswith(".py") and out.tell() < 1 << 20:
                with open(full, "rb") as f:
                    out.write(f.read())
    with open(os.path.join(tmp, "small.c"), "w") as f:
        f.write(SMALL_C)
    subprocess.run(["gcc", "-E", "-o", os.path.join(tmp, "small.i"), os.path.join(tmp, "small.c")], check=True)
    cc1 = subprocess.run(["gcc", "-print-prog-name=cc1"], capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(tmp, "q.sql"), "w") as f:
        f.write(SQL)
    rep = cc(tmp, os.path.join(ROOT, "tests", "programs", "rep_strings.c"), "rep_strings")
    return [
        ("rep strings + memcpy/memset 1 MiB x 20", [rep, "20", "1048576"]),
        ("calls.c (matmul, qsort callback, hash) x 2", [cc(tmp, os.path.join(ROOT, "bench", "calls.c"), "calls"), "2"]),
        ("cpu_bound.c (qsort, hash, matrix, crc, chase) x 1",
         [cc(tmp, os.path.join(ROOT, "bench", "cpu_bound.c"), "cpu_bound"), "1"]),
        ("cc1 -O2 (small file)", [cc1, "-quiet", "-O2", "-o", os.path.join(tmp, "small.s"), os.path.join(tmp, "small.i")]),
        ("bzip2 -9 (1 MiB)", ["bzip2", "-9", "-c", text]),
        ("xz -6 (1 MiB)", ["xz", "-6", "-T1", "-c", text]),
        ("sqlite3 (20k rows)", ["sqlite3", ":memory:", f".read {os.path.join(tmp, 'q.sql')}"]),
    ]


def traced_total(argv: list, rep_count: str) -> int:
    device = resolve_device()
    session = TraceSession(device, resolve_target(device, argv=argv), interval=10_000_000, stdio="pipe",
                           rep_count=rep_count)
    session.start()
    total, ended = 0, None
    try:
        for event in session.events(timeout=600):
            if event is None:
                raise SystemExit(f"rep_totals: no event from {argv[0]} for 600 s")
            if isinstance(event, IntervalEvent):
                total += int(event.interval.instructions)
            elif isinstance(event, Ended):
                ended = event
    finally:
        session.stop()
    if ended is None or ended.how != "exited":
        raise SystemExit(f"rep_totals: {argv[0]} did not exit normally: {ended}")
    return total


def valgrind_total(tool: list, argv: list, pattern: bytes) -> int:
    proc = subprocess.run(["valgrind", *tool, *argv], capture_output=True, timeout=3600)
    return sum(int(m.replace(b",", b"")) for m in re.findall(pattern, proc.stderr))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="run the workloads whose label contains this")
    args = ap.parse_args()
    os.environ["GLIBC_TUNABLES"] = SAME_GLIBC
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'workload':50} {'iterations':>13} {'callgrind':>13} {'offset':>8} {'once':>13} {'exp-bbv':>13} {'offset':>8}")
        for label, argv in workloads(tmp):
            if args.only and args.only not in label:
                continue
            it = traced_total(argv, "iterations")
            cg = valgrind_total(["--tool=callgrind", f"--callgrind-out-file={tmp}/cg.%p"], argv, rb"refs:\s+([\d,]+)")
            once = traced_total(argv, "once")
            bbv = valgrind_total(["--tool=exp-bbv", f"--bb-out-file={tmp}/bb.%p", "--interval-size=100000000"], argv,
                                 rb"Total instructions: (\d+)")
            print(f"{label:50} {it:13,} {cg:13,} {cg - it:8,} {once:13,} {bbv:13,} {bbv - once:8,}", flush=True)


if __name__ == "__main__":
    main()
