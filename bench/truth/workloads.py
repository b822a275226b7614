"""The ground-truth workloads of bench/truth/run.py: each a command whose activities are known by
construction and a way to get its truth file. ``split``: ``tune`` (defaults were chosen on these)
or ``held-out`` (reported only)."""

import os
import subprocess
import sys
from dataclasses import dataclass
from typing import List

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # python | sqlite | perl
    split: str  # tune | held-out
    activities: str
    order: str  # random | cycle
    seed: int
    seconds: float = 40.0

    def prepare(self, out_dir: str) -> List[str]:
        """The command to trace (writing any input it needs into ``out_dir``)."""
        common = ["--order", self.order, "--seconds", str(self.seconds), "--seed", str(self.seed)]
        if self.kind == "python":
            return [PYTHON, os.path.join(HERE, "pylibs.py"), self.truth(out_dir), "--activities", self.activities,
                    *common]
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
        """Write the truth file from the run's stdout where the workload prints its truth there."""
        if self.kind == "sqlite":
            subprocess.run([sys.executable, os.path.join(HERE, "sqlshell.py"), "truth", stdout_path,
                            self.truth(out_dir)], check=True)


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
    Workload("perl-random-B", "perl", "held-out", "sha,deflate,regex,sort,hash,sprintf,math", "random", 4),
    Workload("perl-cycle-B", "perl", "held-out", "sha,regex,hash,math", "cycle", 5),
]
