"""The quality harness's programs (issue 17): real system programs of several kinds, each with a
short input (1-4 s native), split once into a ``tune`` half (defaults are chosen on these) and a
``held-out`` half (reported only). The split was fixed before any setting was scored; each kind
that has two programs has one in each half.

``runs(DIR)`` writes the inputs into DIR and returns name -> :class:`Program` (with its argv);
a server program also has a ``driver``, the client that loads it and then stops it.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from sampled_overhead import make_data  # noqa: E402

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
PYLIBS = os.path.join(HERE, "..", "truth", "pylibs.py")

PERL = r"""
my %freq; my @lines;
open(my $f, '<', $ARGV[0]) or die; while (<$f>) { push @lines, $_; $freq{lc $1}++ while /(\w+)/g; } close $f;
my @top = (sort { $freq{$b} <=> $freq{$a} || $a cmp $b } keys %freq)[0..49];
my $n = 0; for my $l (@lines[0..150000]) { (my $t = $l) =~ s/(\w+)\s*=\s*(\w+)/$2 = $1/g; $n += length $t; }
my @recs = map { sprintf("%08d|%s|%.3f", $_, $top[$_ % 50], $_ / 7) } 0..400000;
my %by; for (@recs) { my @p = split /\|/; $by{$p[1]} += $p[2]; }
my $packed = join '', map { pack('NnC', $_, $_ % 65536, $_ % 256) } 0..500000;
my @u = unpack('N*', $packed);
print scalar(@top), " $n ", scalar(keys %by), " ", scalar(@u), "\n";
"""

PY = r"""
import hashlib, json, random, re, zlib
from decimal import Decimal, getcontext
r = random.Random(1)
words = ["".join(r.choice("abcdefghij") for _ in range(r.randint(2, 9))) for _ in range(20000)]
for rnd in range(2):
    d = {}
    for i in range(400000):
        w = words[i % len(words)]
        d[w] = d.get(w, 0) + i
    s = sorted(d.items(), key=lambda kv: (kv[1] % 977, kv[0]))
    text = " ".join(w for w, _ in s) * 10
    n = len(re.findall(r"\b[a-e]+\b", text))
    obj = json.loads(json.dumps([{"k": w, "v": v, "l": list(range(v % 7))} for w, v in s]))
    z = zlib.compress(text.encode() * 4, 9)
    h = hashlib.sha256()
    for i in range(200000):
        h.update(words[i % 1000].encode())
    getcontext().prec = 60
    x = sum(Decimal(1) / Decimal(k) for k in range(1, 30000))
    def fib(k): return k if k < 2 else fib(k - 1) + fib(k - 2)
    print(n, len(obj), len(z), h.hexdigest()[:8], str(x)[:10], fib(22))
"""

TCL = r"""
set d [dict create]
for {set i 0} {$i < 600000} {incr i} { dict incr d [expr {($i * 7919) % 5003}] }
set l {}
for {set i 0} {$i < 300000} {incr i} { lappend l [format %08x [expr {($i * 2654435761) % 4294967296}]] }
set s [lsort $l]
set txt [join [lrange $s 0 30000] " "]
set n [llength [regexp -all -inline {[0-3][a-f]+[0-9]} $txt]]
set str ""
for {set i 0} {$i < 200000} {incr i} { append str [string toupper [string range "phasescope$i" 2 8]] }
proc fib {k} { if {$k < 2} { return $k }; return [expr {[fib [expr {$k - 1}]] + [fib [expr {$k - 2}]]}] }
puts "[dict size $d] $n [string length $str] [fib 23]"
"""

BC = "scale=900\nx=4*a(1)\ny=e(1)\nz=sqrt(2)\nl(3)\nscale=0\nf=1\nfor(i=1;i<=1500;i++) f=f*i\nlength(f)\nquit\n"

SQL_TEXT = """
CREATE TABLE doc(id INTEGER PRIMARY KEY, title TEXT, body TEXT, meta TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
INSERT INTO doc SELECT i, 'doc ' || i, printf('%s %s %s', hex(randomblob(12)), lower(hex(i * 7919)), 'abc' || (i % 97)),
  json_object('k', i % 13, 'tags', json_array(i % 3, i % 5, 'x' || (i % 11))) FROM n;
SELECT json_extract(meta, '$.k') AS k, count(*), sum(length(body)) FROM doc GROUP BY k ORDER BY 2 DESC LIMIT 3;
SELECT count(*) FROM doc WHERE body LIKE '%ab%' AND title GLOB '*7*';
SELECT id, sum(length(title)) OVER (ORDER BY id ROWS BETWEEN 50 PRECEDING AND CURRENT ROW) FROM doc ORDER BY 2 DESC LIMIT 2;
SELECT count(*), group_concat(substr(body, 3, 4), ',') IS NOT NULL FROM doc WHERE id % 7 = 0;
SELECT count(*) FROM doc, json_each(doc.meta, '$.tags') WHERE json_each.value = 2;
SELECT upper(replace(body, 'a', 'zz')) FROM doc ORDER BY body DESC LIMIT 1;
"""

CPP = """
#include <algorithm>
#include <map>
#include <string>
#include <vector>
#include <functional>
#include <numeric>
#include <sstream>
"""
CPP_FN = """
template <typename T> struct Acc{i} {{
  std::vector<T> v; std::map<std::string, T> m;
  void add(T x) {{ v.push_back(x); m[std::to_string(x % {m})] += x; }}
  T total() const {{ return std::accumulate(v.begin(), v.end(), T{{}}); }}
  std::string show() const {{ std::ostringstream o; for (auto &kv : m) o << kv.first << '=' << kv.second << ';'; return o.str(); }}
}};
long f{i}(int n) {{
  Acc{i}<long> a; for (int j = 0; j < n; j++) a.add(j * {i} + 1);
  std::sort(a.v.begin(), a.v.end(), [](long x, long y) {{ return (x % {m}) < (y % {m}); }});
  std::function<long(long)> g = [&](long x) {{ return x ? g(x / 2) + a.v[x % a.v.size()] : 0; }};
  return a.total() + g(n) + (long)a.show().size();
}}
"""

JQ = ('[.[] | select(.v % 3 != 0) | {k, w: (.v * 2), t: (.tags | join("-"))}] | group_by(.k) '
      '| map({k: .[0].k, n: length, s: (map(.w) | add), t: (map(.t) | unique | length)}) | sort_by(-.s) | .[:5]')


#: name -> (kind, split): fixed before any setting was scored. ``truth-*`` are python3 runs of
#: bench/truth/pylibs.py, whose activities are known by construction (NAME.truth.jsonl beside the log).
PROGRAMS = {
    "cc1": ("compiler", "tune"), "python3": ("interpreter", "tune"), "tclsh": ("interpreter", "tune"),
    "sqlite3": ("database", "tune"), "bzip2": ("compressor", "tune"), "zstd": ("compressor", "tune"),
    "httpd": ("server", "tune"), "truth-A": ("libraries", "tune"),
    "cc1plus": ("compiler", "held-out"), "perl": ("interpreter", "held-out"), "bc": ("interpreter", "held-out"),
    "sqlite3-text": ("database", "held-out"), "xz": ("compressor", "held-out"), "gzip": ("compressor", "held-out"),
    "jq": ("query", "held-out"), "truth-B": ("libraries", "held-out"),
    "truth-C": ("libraries", "held-out"),  # stop 44: truth-B was seen once before a choice
    "truth-D": ("libraries", "held-out"),  # stop 44: recorded unseen after truth-C was scored
    "truth-E": ("libraries", "tune"),  # stop 47: the tuning half's second and third truth workloads
    "truth-F": ("libraries", "tune"),
    "truth-G": ("libraries", "held-out"),  # stop 48: recorded unseen after held and held2 were scored
    "truth-H": ("libraries", "held-out"),
}
TRUTH_ACTIVITIES = {"truth-A": ("sqlite,lzma,sha256,expat,decimal,json,sort,zlib", 1),
                    "truth-B": ("bz2,md5,regex,pickle,csv,inflate,unicode,sqlite", 2),
                    "truth-C": ("zlib,bz2,regex,decimal,inflate,json,md5,expat", 3),
                    "truth-D": ("sqlite,lzma,bz2,sort,csv,unicode,sha256,regex", 4),
                    "truth-E": ("pickle,md5,json,inflate,sort,expat,csv,lzma", 5),
                    "truth-F": ("regex,unicode,decimal,sha256,zlib,sqlite,bz2,pickle", 6),
                    "truth-G": ("md5,unicode,expat,lzma,zlib,sort,decimal,pickle", 7),
                    "truth-H": ("json,bz2,csv,sha256,inflate,regex,sqlite,lzma", 8)}


@dataclass
class Program:
    name: str
    argv: List[str]
    driver: Optional[Callable[[str], None]] = field(default=None, repr=False)  # a server's client (log path)

    @property
    def split(self) -> str:
        return PROGRAMS[self.name][1]


def split_of(name: str) -> str:
    """``tune`` or ``held-out`` for a program name (a log's file name without .jsonl); unknown: ``?``."""
    return PROGRAMS.get(name, ("", "?"))[1]


def truth_path(log: str) -> str:
    """Where a log's constructed truth is, if it has one."""
    return log[: -len(".jsonl")] + ".truth.jsonl" if log.endswith(".jsonl") else log + ".truth.jsonl"


def _write(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    return path


def _cc1(files: dict, out: str, name: str, src: str, text: str) -> List[str]:
    """The compiler proper (gcc/g++ fork it: a child is not followed) on preprocessed input."""
    driver = "g++" if name == "cc1plus" else "gcc"
    ifile = os.path.join(out, src.rsplit(".", 1)[0] + (".ii" if name == "cc1plus" else ".i"))
    subprocess.run([driver, "-E", "-o", ifile, _write(os.path.join(out, src), text)], check=True)
    prog = subprocess.run([driver, f"-print-prog-name={name}"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return [prog, "-quiet", "-O2", "-o", os.path.join(out, name + ".s"), ifile]


SERVER = r"""
import http.server, os, sys
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/quit":
            self.send_response(200); self.end_headers(); self.wfile.flush(); os._exit(0)
        super().do_GET()
os.chdir(sys.argv[2])
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _serve_phases(port: int, rounds: int = 6) -> Callable[[str], None]:
    """A client that loads the server in changing ways (directory listings, many small files, a few
    large ones, 404s), ``rounds`` times, then stops it with /quit."""
    def get(path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
                r.read()
        except OSError:
            pass

    def drive(_log: str) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until it serves
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/small/0.txt", timeout=5).read()
                break
            except OSError:
                time.sleep(0.5)
        for _ in range(rounds):
            for _ in range(6):
                get("/small/")
            for i in range(150):
                get(f"/small/{i}.txt")
            for i in range(3):
                get(f"/big{i}.bin")
            for i in range(100):
                get(f"/missing/{i}")
        get("/quit")
    return drive


def _server_root(out: str) -> str:
    root = os.path.join(out, "www")
    os.makedirs(os.path.join(root, "small"), exist_ok=True)
    rng = random.Random(3)
    for i in range(150):
        _write(os.path.join(root, "small", f"{i}.txt"), "".join(rng.choice("abcdef\n") for _ in range(2000)))
    for i in range(3):
        with open(os.path.join(root, f"big{i}.bin"), "wb") as f:
            f.write(rng.randbytes(8 << 20))
    return root


def runs(out: str) -> Dict[str, Program]:
    """Write every program's input into ``out``; name -> Program."""
    files = make_data(out)
    c_src = open(files["c"]).read()
    cpp = CPP + "".join(CPP_FN.format(i=i, m=7 + i % 13) for i in range(40))
    rng = random.Random(2)
    jq_in = _write(os.path.join(out, "data.json"), "[" + ",".join(
        f'{{"k":"k{rng.randrange(40)}","v":{i},"tags":["a{i % 5}","b{i % 7}"]}}' for i in range(150000)) + "]")
    port = 18000 + os.getpid() % 1000
    argv = {
        "cc1": _cc1(files, out, "cc1", "big.c", c_src),
        "python3": [PYTHON, _write(os.path.join(out, "mixed2.py"), PY)],
        "tclsh": ["tclsh", _write(os.path.join(out, "mixed.tcl"), TCL)],
        "sqlite3": ["sqlite3", ":memory:", f".read {files['sql']}"],
        "bzip2": ["bzip2", "-9", "-c", files["text"]],
        "zstd": ["zstd", "-19", "-c", files["text3"]],
        "httpd": [PYTHON, _write(os.path.join(out, "server.py"), SERVER), str(port), _server_root(out)],
        "cc1plus": _cc1(files, out, "cc1plus", "big.cc", cpp),
        "perl": ["perl", _write(os.path.join(out, "mixed.pl"), PERL), files["text"]],
        "bc": ["bc", "-l", _write(os.path.join(out, "big.bc"), BC)],
        "sqlite3-text": ["sqlite3", ":memory:", f".read {_write(os.path.join(out, 'text.sql'), SQL_TEXT)}"],
        "xz": ["xz", "-6", "-T1", "-c", files["text3"]],
        "gzip": ["gzip", "-9", "-c", files["text"]],
        "jq": ["jq", "-c", JQ, jq_in],
    }
    for name, (acts, seed) in TRUTH_ACTIVITIES.items():  # 10 s of the traced thread's CPU, 0.4-1.2 s each
        argv[name] = [PYTHON, PYLIBS, truth_path(os.path.join(out, name + ".jsonl")), "--activities", acts,
                      "--order", "random", "--seconds", "10", "--min", "0.4", "--max", "1.2", "--seed", str(seed)]
    return {name: Program(name, argv[name], _serve_phases(port) if name == "httpd" else None) for name in PROGRAMS}
