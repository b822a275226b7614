#!/usr/bin/env python3
"""Keys for compiled Java code compared on the same samples (issues 27 and 32, stop 42).

Sampled mode keys a sample in an nmethod while recording (the nmethods are gone afterwards), so two
keys compared on two recordings mix the key with the spread between recordings (about 0.1 ARI on
JavaWork, docs/quality.md). ``record`` runs bench/truth/run.py with ``HotSpotCode.keys`` wrapped
(in the recording phasescope only, through a ``sitecustomize`` on its PYTHONPATH): each PC in an
nmethod stays a raw address in the log, and the scope chains of the debug points around it (two
before, two after) are written once per PC and nmethod to ``DIR/NAME.dump.PID``. ``score`` keys
those PCs by each variant into ``DIR/VARIANT/`` and scores them with ``run.py --reuse``.

    python3 bench/truth/java_keys.py record DIR NAME,...
    python3 bench/truth/java_keys.py score DIR NAME,... [VARIANT,...]

Variants (:data:`VARIANTS`): ``raw`` (addresses), ``method`` (the next point's innermost method),
``next`` (that method, with the point's bytecode index in the nmethod's own scope: main before stop
42), ``kept`` (``next``, or the point before where the next has no scope: stop 42's), ``prev``,
``nearest`` (the nearer of the two with a scope), ``inner_bci`` (the bytecode index inlined too).
"""

from __future__ import annotations

import bisect
import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
DUMP = "PS_JAVA_KEYS_DUMP"  # the dump's path prefix, in the recording phasescope's environment
AROUND = {"p2": -2, "p1": -1, "n1": 0, "n2": 1}  # debug points around a PC: index from the first past it


def _chain(blob, i: int) -> list:
    """``[(Method*, bci + 1), ...]`` of debug point ``i``'s scopes, innermost first."""
    from phasescope.sources.hotspot import read_int
    out, s = [], blob.scope_at + blob.decodes[i] if 0 <= i < len(blob.decodes) else 0
    while blob.scope_at < s < len(blob.scopes) and len(out) < 16:
        sender, at = read_int(blob.scopes, s)
        index, at = read_int(blob.scopes, at)
        bci, _ = read_int(blob.scopes, at)
        if sender < 0 or not 1 <= index <= blob.scope_at // 8:
            break
        out.append((struct.unpack_from("<Q", blob.scopes, 8 * (index - 1))[0], bci))
        s = blob.scope_at + sender if sender else 0
    return out


def patch() -> None:
    """Wraps ``HotSpotCode.keys`` as the module docstring says (when :data:`DUMP` is set)."""
    if not os.environ.get(DUMP):
        return
    import time
    import numpy as np
    from phasescope.sources import hotspot
    keys = hotspot.HotSpotCode.keys

    def dumping(self, pcs, given, modules):
        out = keys(self, pcs, given, modules)
        if not hasattr(self, "_dump"):
            self._dump, self._dumped, self._named = open(f"{os.environ[DUMP]}.{self.pid}", "w"), {}, set()
        t = time.time_ns()
        for pc in pcs[(out != given) & (given == pcs)].tolist():
            start, check = self._pcs[pc][:2]
            blob = self._blobs.get(start)
            if blob is None or self._dumped.get(pc) == check:
                continue
            self._dumped[pc] = check
            i = int(np.searchsorted(blob.pc_offsets, pc - blob.code, side="right"))
            row = {"t": t, "pc": pc, "root": blob.method}
            for name, d in AROUND.items():
                if 0 <= i + d < len(blob.decodes):
                    row[name] = [int(blob.pc_offsets[i + d]) - (pc - blob.code), _chain(blob, i + d)]
            for m in {blob.method} | {m for n in AROUND if n in row for m, _ in row[n][1]} - self._named:
                self._named.add(m)
                self._dump.write(json.dumps({"m": m, "key": self._key(m)[0], "name": self._key(m)[1]}) + "\n")
            self._dump.write(json.dumps(row) + "\n")
        self._dump.flush()
        return given  # raw addresses in the log
    hotspot.HotSpotCode.keys = dumping


def _key(names, method, low=0):
    return names[method][0] | (low & 0xFFFFF) << 12


def _own(names, f, chain):
    """``method | bci << 12`` of a chain (the bci in the nmethod's own scope only), else the root."""
    if not chain:
        return _key(names, f["root"])
    return _key(names, chain[0][0], chain[0][1] if len(chain) == 1 else 0)


def _scope(f, name):
    return f[name][1] if name in f else []


def _nearest(names, f):
    got = sorted((abs(f[n][0]), n) for n in ("p1", "n1") if _scope(f, n))
    return _own(names, f, _scope(f, got[0][1]) if got else [])


VARIANTS = {
    "raw": lambda names, f: f["pc"],
    "method": lambda names, f: _key(names, (_scope(f, "n1") or [(f["root"], 0)])[0][0]),
    "next": lambda names, f: _own(names, f, _scope(f, "n1")),
    "kept": lambda names, f: _own(names, f, _scope(f, "n1") or _scope(f, "p1")),
    "prev": lambda names, f: _own(names, f, _scope(f, "p1")),
    "nearest": _nearest,
    "inner_bci": lambda names, f: (_key(names, _scope(f, "n1")[0][0], _scope(f, "n1")[0][1]) if _scope(f, "n1")
                                   else _key(names, f["root"])),
}


def rewrite(src: str, name: str, variant, out: str) -> None:
    """``out/NAME.jsonl``: the log with each PC of the dump keyed by ``variant`` (the dump's row
    nearest after the window's start: a PC's nmethod can be freed and its address reused)."""
    names, rows = {}, defaultdict(list)
    for path in glob.glob(f"{src}/{name}.dump.*"):
        for r in map(json.loads, open(path)):
            if "m" in r:
                names[r["m"]] = (r["key"], r["name"])
            else:
                rows[r["pc"]].append(r)
    times = {pc: [r["t"] for r in sorted(v, key=lambda r: r["t"])] for pc, v in rows.items()}
    for v in rows.values():
        v.sort(key=lambda r: r["t"])
    os.makedirs(out, exist_ok=True)
    with open(f"{src}/{name}.jsonl") as f, open(f"{out}/{name}.jsonl", "w") as o:
        for r in map(json.loads, f):
            for b in r.get("blocks") or ():
                if b[0] in rows:
                    i = bisect.bisect_left(times[b[0]], r.get("start_ns") or 0)
                    b[0] = variant(names, rows[b[0]][min(i, len(rows[b[0]]) - 1)])
            o.write(json.dumps(r) + "\n")
    for ext in (".truth.jsonl", ".stdout"):
        shutil.copy(f"{src}/{name}{ext}", f"{out}/{name}{ext}")


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[1] not in ("record", "score"):
        print(__doc__.split("\n\n")[2], file=sys.stderr)
        return 2
    cmd, d, only = sys.argv[1:4]
    host = os.path.join(os.path.dirname(os.path.dirname(HERE)), "host")
    if cmd == "record":
        with tempfile.TemporaryDirectory() as site:
            with open(os.path.join(site, "sitecustomize.py"), "w") as f:
                f.write(f"import sys\nsys.path.insert(0, {HERE!r})\nimport java_keys\njava_keys.patch()\n")
            for name in only.split(","):
                env = dict(os.environ, PYTHONPATH=f"{site}:{host}", **{DUMP: f"{d}/{name}.dump"})
                subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "--dir", d, "--only", name],
                               env=env, check=True)
        return 0
    for v in (sys.argv[4] if len(sys.argv) > 4 else ",".join(VARIANTS)).split(","):
        for name in only.split(","):
            rewrite(d, name, VARIANTS[v], os.path.join(d, v))
        got = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "--dir", os.path.join(d, v), "--reuse",
                              "--only", only], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=host))
        print("\n".join(f"{v:10s} {line}" for line in got.stdout.splitlines() if " phasescope " in line
                        and not line.startswith("mean")) or got.stderr[-2000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
