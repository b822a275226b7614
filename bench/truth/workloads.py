"""The ground-truth workloads of bench/truth/run.py: each a command whose activities are known by
construction and a way to get its truth file. ``split``: ``tune`` (defaults were chosen on these)
or ``held-out`` (reported only). Kinds ``pg`` (a PostgreSQL backend) and ``tool`` (openssl speed)
are attached with ``-p`` by their driver (bench/truth/attach.py); the others are launched."""

import os
import subprocess
import sys
from dataclasses import dataclass
from typing import List

from truth_score import place_truth

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


#: node's flags: --perf-basic-prof: JIT code named in /tmp/perf-PID.map; --interpreted-frames-native-stack:
#: each interpreted function's frame is a copy of the interpreter entry that the map names too.
#: run.py --no-short-builtin-calls adds that flag (optimised code then calls the builtins in node's
#: own text, not in the copy V8 maps near its code; phasescope keys the copy as the text anyway).
NODE_FLAGS = ["--perf-basic-prof", "--interpreted-frames-native-stack"]


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # python | sqlite | perl | node | java | pg | go | tool
    split: str  # tune | held-out
    activities: str
    order: str  # random | cycle
    seed: int
    seconds: float = 40.0

    @property
    def attached(self) -> bool:
        """Traced with ``-p`` by its driver: :meth:`driver` instead of :meth:`prepare`."""
        return self.kind in ("pg", "go", "tool")

    def driver(self, out_dir: str, phasescope: List[str]) -> List[str]:
        """The command that starts the target and attaches ``phasescope`` (options, no -p) to it."""
        if self.kind == "pg":
            return [sys.executable, os.path.join(HERE, "pgwork.py"), self.truth(out_dir), self.activities, self.order,
                    str(self.seconds), str(self.seed), "--cluster", os.path.join(out_dir, "pg-cluster"), "--",
                    *phasescope]
        if self.kind == "go":
            return [sys.executable, os.path.join(HERE, "gowork.py"), self.truth(out_dir), self.activities, self.order,
                    str(self.seconds), str(self.seed), "--dir", out_dir, "--", *phasescope]
        return [sys.executable, os.path.join(HERE, "toolwork.py"), self.truth(out_dir), self.activities,
                str(int(self.seconds)), "--", *phasescope]

    def prepare(self, out_dir: str) -> List[str]:
        """The command to trace (writing any input it needs into ``out_dir``)."""
        common = ["--order", self.order, "--seconds", str(self.seconds), "--seed", str(self.seed)]
        if self.kind == "python":
            return [PYTHON, os.path.join(HERE, "pylibs.py"), self.truth(out_dir), "--activities", self.activities,
                    *common]
        if self.kind == "node":
            # V8's own log goes beside the truth
            return ["node", *NODE_FLAGS, "--no-logfile-per-isolate",
                    "--logfile=" + os.path.join(out_dir, self.name + ".v8.log"), os.path.join(HERE, "nodework.js"),
                    self.truth(out_dir), self.activities, self.order, str(self.seconds), str(self.seed)]
        if self.kind == "java":
            subprocess.run(["javac", "-d", out_dir, os.path.join(HERE, "JavaWork.java")], check=True)
            return ["java", "-XX:+UseSerialGC", "-cp", out_dir, "JavaWork", self.truth(out_dir), self.activities,
                    self.order, str(self.seconds), str(self.seed)]
        if self.kind == "perl":
            return ["perl", os.path.join(HERE, "perlwork.pl"), self.truth(out_dir), self.activities, self.order,
                    str(self.seconds), str(self.seed)]
        script = os.path.join(out_dir, self.name + ".sql")
        subprocess.run([sys.executable, os.path.join(HERE, "sqlshell.py"), "script", script, "--kinds",
                        self.activities, *common], check=True)
        return ["sqlite3", ":memory:", f".read {script}"]

    def truth(self, out_dir: str) -> str:
        return os.path.join(out_dir, self.name + ".truth.jsonl")

    def finish(self, out_dir: str, stdout_path: str) -> None:
        """Write the truth file from the run's stdout where the workload prints its truth there, and
        put the truth of a workload that stamps the wall clock on the clock of its log's windows."""
        if self.kind == "sqlite":
            subprocess.run([sys.executable, os.path.join(HERE, "sqlshell.py"), "truth", stdout_path,
                            self.truth(out_dir)], check=True)
        if self.kind in ("sqlite", "node", "python", "java", "perl", "pg", "go", "tool"):  # stamped on the wall clock: placed among the windows
            place_truth(self.truth(out_dir), os.path.join(out_dir, self.name + ".jsonl"))


WORKLOADS = [
    Workload("py-random-A", "python", "tune", "sqlite,lzma,sha256,expat,decimal,json,sort,zlib", "random", 1, 45),
    Workload("py-cycle-A", "python", "tune", "sqlite,lzma,sha256,expat", "cycle", 1),
    Workload("sql-random-A", "sqlite", "tune", "cte,sort,groupby,like,json,insert", "random", 1),
    Workload("py-db-A", "python", "tune", "sq_point,sq_update,sq_range,sq_insert,sq_like,sq_group", "random", 1),
    Workload("py-random-B", "python", "held-out", "bz2,md5,regex,pickle,csv,inflate,unicode,sqlite", "random", 2, 45),
    Workload("py-cycle-B", "python", "held-out", "bz2,md5,pickle,csv,regex", "cycle", 2),
    Workload("sql-random-B", "sqlite", "held-out", "strings,join,index,window,math,blob", "random", 2),
    Workload("py-db-B", "python", "held-out", "sq_point,sq_range,sq_insert,sq_group,sq_update", "cycle", 2),
    Workload("sql-cycle-B", "sqlite", "held-out", "cte,json,sort,window", "cycle", 3),
    # issue 27, stop 43: a perl tuning workload (regex's runs drift between pages on perl-cycle-B)
    Workload("perl-cycle-A", "perl", "tune", "regex,sort,sprintf,deflate", "cycle", 1, 30),
    Workload("perl-random-B", "perl", "held-out", "sha,deflate,regex,sort,hash,sprintf,math", "random", 4),
    Workload("perl-cycle-B", "perl", "held-out", "sha,regex,hash,math", "cycle", 5),
    # issue 27: a JIT runtime, a database server's backend attached with -p, a real tool's own phases
    Workload("node-random-A", "node", "tune", "json,regex,sort,strings,map,math,bigint,closure,sha,deflate",
             "random", 1, 30),
    Workload("pg-random-A", "pg", "tune", "point,range,seqscan,group,sort,join,insert,update,regex,json",
             "random", 1, 30),
    Workload("tool-A", "tool", "tune", "md5,sha1,sha256,aes-128-cbc,des-ede3,rsa2048", "fixed", 0, 30),
    Workload("node-cycle-A", "node", "tune", "sort,strings,closure,deflate", "cycle", 1, 30),
    Workload("node-cycle-B", "node", "held-out", "json,regex,map,math", "cycle", 2, 30),
    Workload("node-random-B", "node", "held-out", "json,regex,sort,strings,map,math,bigint,closure,sha,deflate",
             "random", 3, 30),
    Workload("pg-cycle-B", "pg", "held-out", "point,range,seqscan,group", "cycle", 2, 30),
    Workload("pg-random-B", "pg", "held-out", "point,range,seqscan,group,sort,join,insert,update,regex,json",
             "random", 3, 30),
    Workload("tool-B", "tool", "held-out", "sha512,aes-256-cbc,camellia-128-cbc,ghash,rmd160,ecdsap256", "fixed", 0, 30),
    # issue 32: the JVM, in sampled and in exact mode (bench/truth/modes.py)
    Workload("java-cycle-B", "java", "held-out", "ints,floats,sort,strings,map", "cycle", 2, 30),
    Workload("java-random-B", "java", "held-out", "ints,floats,sort,strings,map,sha", "random", 3, 30),
    # issue 32, stop 38: held out from the choices of exact mode's JIT method keys (tuned on the two above)
    Workload("java-random-C", "java", "held-out", "ints,floats,sort,strings,map,sha", "random", 7, 20),
    # issue 27, stop 44: a server in a compiled language with its own runtime (Go), attached with -p; held out
    # from every choice (recorded after the defaults were fixed)
    Workload("go-random-B", "go", "held-out", "json,regex,sha,deflate,sort,bigint,template,strconv,map,crc",
             "random", 4, 40),
    Workload("go-cycle-B", "go", "held-out", "json,template,map,strconv", "cycle", 4, 40),
    # issue 27, stop 45: a tuning half for the Go server (the shown prediction with every thread replayed)
    Workload("go-cycle-A", "go", "tune", "regex,sha,sort,crc", "cycle", 1, 40),
    Workload("go-random-A", "go", "tune", "json,regex,sha,deflate,sort,bigint,template,strconv,map,crc",
             "random", 1, 40),
    # issue 27, stop 46: tuning twins of the held-out sqlite and PostgreSQL cycles (other activities and seed), for
    # the shown prediction's claims on a database engine's cycle
    Workload("sql-cycle-A", "sqlite", "tune", "strings,groupby,like,math", "cycle", 1),
    Workload("pg-cycle-A", "pg", "tune", "sort,join,regex,json", "cycle", 1, 30),
]
# issue 27, stop 48: a fresh held-out half (variant C: seed 5, other mixes of each kind's activities), recorded
# with stop 47's defaults before anything at stop 48 was chosen, and scored once after: (name, kind, activities,
# order, seconds); openssl's seconds are per algorithm
WORKLOADS += [Workload(name, kind, "held-out", acts, order, 0 if order == "fixed" else 5, seconds) for
              name, kind, acts, order, seconds in (
                  ("py-random-C", "python", "zlib,sha256,regex,json,decimal,csv,lzma,pickle", "random", 45),
                  ("sql-random-C", "sqlite", "cte,join,index,like,json,math,groupby", "random", 40),
                  ("py-cycle-C", "python", "json,zlib,unicode,decimal", "cycle", 40),
                  ("tool-C", "tool", "hmac,aes-192-cbc,camellia-256-cbc,ecdhp384,ed25519", "fixed", 6),
                  ("node-cycle-C", "node", "bigint,sha,strings,regex", "cycle", 30),
                  ("pg-random-C", "pg", "point,range,seqscan,group,sort,join,insert,update,regex,json", "random", 30),
                  ("perl-cycle-C", "perl", "deflate,hash,sprintf,sort", "cycle", 30),
                  ("node-random-C", "node", "json,regex,sort,strings,map,math,bigint,closure,sha,deflate", "random",
                   30),
                  ("pg-cycle-C", "pg", "range,update,join,json", "cycle", 30))]
