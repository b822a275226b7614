"""Four activities, each driving one real library for a fixed CPU time, twice over (a cycle): zlib,
OpenSSL's SHA-256, expat and liblzma. Writes ``activity start_ns end_ns`` lines (the thread's user
CPU time) to argv[1]; argv[2] is the CPU seconds per activity."""

import hashlib
import lzma
import resource
import sys
import xml.parsers.expat
import zlib

DATA = bytes(range(256)) * 2048 + b"phasescope " * 40000
DOC = ("<r>" + "".join(f'<i n="{i}"><v>{i * 7}</v></i>' for i in range(4000)) + "</r>").encode()


def expat():
    p = xml.parsers.expat.ParserCreate()
    p.Parse(DOC, True)


WORK = {"zlib": lambda: zlib.compress(DATA, 6), "sha256": lambda: hashlib.sha256(DATA).digest(),
        "expat": expat, "lzma": lambda: lzma.compress(DATA[:200000], preset=1)}


def user_ns():
    return int(resource.getrusage(resource.RUSAGE_THREAD).ru_utime * 1e9)


with open(sys.argv[1], "w") as out:
    for _ in range(2):
        for name, fn in WORK.items():
            start = user_ns()
            while user_ns() - start < float(sys.argv[2]) * 1e9:
                fn()
            out.write(f"{name} {start} {user_ns()}\n")
