#!/usr/bin/env python3
"""Keys of a sampled window compared on the same samples (issue 27, stop 43).

Two recordings of one workload differ by up to ~0.1 ARI, so a key is compared with another only on
the samples of one recording. A log recorded with ``--log`` already holds each sample's raw key
(``blocks``: module key << 32 | offset, byte-exact), its call chain as stable keys (``stacks``:
``[count, leaf, caller, ...]``, the kernel's frame-pointer walk) and the names of those keys
(``frames``). ``rewrite`` keys every window's samples by a variant into ``DIR/keys/VARIANT/`` (each
new key a 52-bit hash shifted left 12 bits, so the page tracker's ``key >> 12`` buckets exactly the
variant's key); the sampled tracker (or the one the replay options name) then classifies them, as ``run.py --reuse`` does,
and they are scored against the truth. A variant with two parts (``page+caller``) counts each sample once under each: the L1
distance is then the mean of the parts' distances.

    python3 bench/truth/sample_keys.py --dir DIR --only NAME,... [--variants page,line,...] [--salts N]
                                       [--set NAME=VALUE ...] [-- REPLAY OPTIONS]

Prints a line per variant, salt and workload, then a markdown table: per workload and variant, the
mean ARI over the salts (min-max), false changes per 10 s, and recurrences that kept their first ID.

Parts (:data:`PARTS`): ``page`` (4 KiB: the tracker's own key, the log replayed unchanged),
``line`` (64 bytes), ``page8k`` and ``page16k`` (two and four pages as one), ``func`` (the leaf's function by ``frames``; an unnamed leaf keeps its page),
``elffunc`` (``func`` for code in the ELF files only: JIT code, which perf maps and HotSpot name,
keeps its key's page), ``funcpage`` (the page where the leaf's ELF function starts, as far as the
log's samples show: what a live key by the function's start address would give; functions that
start in one page share it),
``bigfunc`` (``elffunc`` only for a function whose samples fall in two pages or more: a big function's
pages joined, every other sample keeps its page), ``sharedfunc`` (``elffunc`` only where the page
holds samples of two named functions or more: the functions of a shared page parted),
``caller`` (the leaf's page and its caller's page when the chain has one, else the leaf page
alone), ``callerfunc`` (the leaf's function and its caller's function), ``chain2`` (the leaf's page
and the next two callers' pages). Requires the logs' ``stacks`` (every run with ``--log`` records them).
``--set NAME=VALUE`` replays with a constant of :mod:`phasescope.engine.page_tracker` changed
(``--set Z=2.5``): the tracker's own settings on the same samples and hashings (stop 44).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE, LINE = 12, 6


SALT = [0]  # --salts: each salt hashes the variant's keys anew (other keys share the tracker's buckets)


def _key(*parts) -> int:
    """A 52-bit hash of ``parts`` (and the salt), shifted so that ``key >> 12`` is the hash (one
    tracker page)."""
    h = hashlib.blake2b(repr((SALT[0],) + parts).encode(), digest_size=8).digest()
    return (int.from_bytes(h, "little") >> 12) << PAGE


def _func(names: dict, k: int, jit: bool = True):
    """The leaf's function name (``jit``: JIT code's too), else its page."""
    name = names.get(k)
    return ("f",) + tuple(name) if name and name[1] and (jit or name[0] != "[jit]") else ("p", k >> PAGE)


def _start_page(names: dict, first: dict, k: int) -> int:
    """The page of the lowest address of ``k``'s function (ELF code) seen in the log, else ``k``'s."""
    f = _func(names, k, jit=False)
    return first[f] >> PAGE if f[0] == "f" else k >> PAGE


def _func_where(names: dict, first: dict, k: int, many: str) -> tuple:
    """``k``'s ELF function where ``many`` holds: ``"pages"``, the function's samples in the log fall
    in two pages or more (a function bigger than a page: its pages joined); ``"funcs"``, ``k``'s page
    holds samples of two named functions or more (a shared page: its functions parted); else ``k``'s
    page."""
    f = _func(names, k, jit=False)
    n = len(first.get((many, f if many == "pages" else k >> PAGE), ()))
    return f if f[0] == "f" and n > 1 else ("p", k >> PAGE)


#: part -> (function of (stack, names, first) -> the key of that sample); stack = [leaf, caller,
#: ...], names: key -> (module, function), first: ``_func`` -> its lowest key in the log, and
#: ("pages", ``_func``) -> the pages its samples fall in, ("funcs", page) -> the named ELF functions
#: sampled in it
PARTS = {
    "page": lambda s, names, first: _key("p", s[0] >> PAGE),
    "line": lambda s, names, first: _key("l", s[0] >> LINE),
    "page8k": lambda s, names, first: _key("p", s[0] >> (PAGE + 1)),
    "page16k": lambda s, names, first: _key("p", s[0] >> (PAGE + 2)),
    "func": lambda s, names, first: _key(_func(names, s[0])),
    "elffunc": lambda s, names, first: _key(_func(names, s[0], jit=False)),
    "funcpage": lambda s, names, first: _key("p", _start_page(names, first, s[0])),
    "bigfunc": lambda s, names, first: _key(_func_where(names, first, s[0], "pages")),
    "sharedfunc": lambda s, names, first: _key(_func_where(names, first, s[0], "funcs")),
    "caller": lambda s, names, first: _key("c", s[0] >> PAGE, s[1] >> PAGE if len(s) > 1 else None),
    "callerfunc": lambda s, names, first: _key("cf", _func(names, s[0]),
                                                _func(names, s[1]) if len(s) > 1 else None),
    "chain2": lambda s, names, first: _key("c2", *[a >> PAGE for a in s[:3]]),
}


def rewrite(src: str, name: str, variant: str, out: str) -> float:
    """``out/NAME.jsonl``: the log with each window's samples keyed by ``variant``; returns the share
    of samples whose chain names a caller."""
    parts = [PARTS[p] for p in variant.split("+")]
    names, first = {}, {}
    with open(os.path.join(src, name + ".jsonl")) as f:
        for r in map(json.loads, f):
            for k, module, function in r.get("frames") or ():
                names[k] = (module, function)
    for k in names:
        f = _func(names, k, jit=False)
        first[f] = min(first.get(f, k), k)
        first.setdefault(("pages", f), set()).add(k >> PAGE)
        if f[0] == "f":
            first.setdefault(("funcs", k >> PAGE), set()).add(f)
    with_caller = total = 0
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(src, name + ".jsonl")) as f, open(os.path.join(out, name + ".jsonl"), "w") as o:
        for r in map(json.loads, f):
            stacks = r.get("stacks")
            if stacks is None:
                raise SystemExit(f"{name}: a window without stacks (recorded without --log?)")
            counts: dict = {}
            for s in stacks:
                n, chain = s[0], s[1:]
                total += n
                with_caller += n if len(chain) > 1 else 0
                for part in parts:
                    k = part(chain, names, first)
                    counts[k] = counts.get(k, 0) + n
            r["blocks"] = sorted(counts.items())
            r["samples"] = sum(counts.values())  # each sample once per part; the tracker normalises
            r.pop("stacks")
            r.pop("frames", None)
            o.write(json.dumps(r) + "\n")
    for ext in (".truth.jsonl", ".stdout"):
        if os.path.exists(os.path.join(src, name + ext)):
            shutil.copy(os.path.join(src, name + ext), os.path.join(out, name + ext))
    return with_caller / max(total, 1)


def summary(got: dict, names, variants) -> str:
    """A markdown table: per workload and variant, the mean ARI over the salts (min-max), and the
    mean false changes per 10 s and recurrences that kept their ID."""
    rows = ["| workload | " + " | ".join(variants) + " |", "| --- " * (len(variants) + 1) + "|"]
    for name in names:
        cells = []
        for v in variants:
            ss = got[name, v]
            ari = [s["ari"] for s in ss]
            rec = [s["recur_same"] for s in ss if s["recur_same"] is not None]
            cells.append(f"{np.mean(ari):.2f} ({min(ari):.2f}-{max(ari):.2f}), "
                         f"{np.mean([s['false_per_10s'] for s in ss]):.2f}, " + (f"{np.mean(rec):.2f}" if rec else "-"))
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def split_argv(argv: list) -> tuple:
    """(the script's own arguments, the replay options after ``--``)."""
    return (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])


def replay_config(replay: list):
    """The engine configuration the replay options give (the sampled defaults where none)."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
    from phasescope.commands.options import add_engine_options, engine_config_from_args
    rp = argparse.ArgumentParser(prog="replay options")
    add_engine_options(rp)
    return engine_config_from_args(rp.parse_args(replay), interval_default=None, preset_default="sampled")


def main() -> int:
    argv, replay = split_argv(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="run.py's logs (recorded with --log)")
    ap.add_argument("--only", required=True, help="comma-separated workload names")
    ap.add_argument("--variants", default="page,line,func,caller,page+line,page+func,page+caller",
                    help="comma-separated; parts joined by +: " + ", ".join(PARTS))
    ap.add_argument("--salts", type=int, default=1, metavar="N",
                    help="score each variant with N hashings of its keys (which keys share one of the tracker's "
                         "buckets changes with each: a few such collisions move an ARI by up to 0.15)")
    ap.add_argument("--out", help="where the rewritten logs go (default DIR/keys)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="replay with a constant of phasescope.engine.page_tracker changed (Z=2.5, STAY_CAP=0.7, ...); "
                         "repeatable")
    args = ap.parse_args(argv)
    for v in args.variants.split(","):
        if not v or any(p not in PARTS for p in v.split("+")):
            print(f"sample_keys.py: unknown variant {v!r} (parts: {', '.join(PARTS)})", file=sys.stderr)
            return 2
    sys.path.insert(0, os.path.join(HERE, "..", "..", "host"))
    sys.path.insert(0, HERE)
    from run import COLUMNS, classify
    from phasescope.formats.log import read_log
    from truth_score import main_thread, read_truth, score_stream
    import phasescope.engine.page_tracker as page_tracker
    missing = [n for n in args.only.split(",") if not os.path.exists(os.path.join(args.dir, n + ".jsonl"))]
    if missing:
        print(f"sample_keys.py: no log {missing[0]}.jsonl in {args.dir}", file=sys.stderr)
        return 2
    for setting in args.set:
        name, _, value = setting.partition("=")
        old = getattr(page_tracker, name, None) if name.isupper() else None
        try:
            setattr(page_tracker, name, type(old)(value))
        except (TypeError, ValueError):
            print(f"sample_keys.py: --set {setting!r}: not NAME=NUMBER of a page_tracker constant", file=sys.stderr)
            return 2
    config = replay_config(replay)
    print(f"{'variant':16s} {'workload':14s} {'ph':>3s} " + " ".join(f"{c[:8]:>8s}" for c in COLUMNS[:5])
          + "  callers")
    got: dict = {}
    for v, salt in ((v, salt) for v in args.variants.split(",") for salt in range(args.salts)):
        SALT[0] = salt
        out = os.path.join(args.out or os.path.join(args.dir, "keys"), f"{v}.{salt}")
        for name in args.only.split(","):
            callers = rewrite(args.dir, name, v, out)
            intervals = main_thread(list(read_log(os.path.join(out, name + ".jsonl"))))
            cpu = np.array([iv.cpu_ns for iv in intervals], dtype=np.float64)
            phases, preds, live = classify(intervals, config)
            s = score_stream(cpu, phases, preds, read_truth(os.path.join(out, name + ".truth.jsonl")), live)
            got.setdefault((name, v), []).append(s)
            print(f"{v + '.' + str(salt):16s} {name:14s} {s['phases']:3d} " + " ".join(
                "       -" if s[c] is None else f"{s[c]:8.2f}" for c in COLUMNS[:5]) + f"  {callers:7.2f}", flush=True)
    print(summary(got, args.only.split(","), args.variants.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
