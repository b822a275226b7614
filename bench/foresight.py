"""What share of a phase stream's changes any predictor could foretell (issues 27, 28): the bounds of
bench/quality/foreseeable.py (exact mode's programs and cycles) and bench/truth/shown.py (sampled
mode's cycles), computed on one thread's stream.

- ``new``: changes into a phase not seen before in the stream (no predictor names it);
- ``seen_phase``, ``seen_short``, ``seen_long``: changes whose context had been followed by the same
  next phase before, for the phase alone (the loosest: a bound on the recall of any predictor that
  names a phase that has followed the current one), (phase, run length), and the same preceded by
  the phases of the ``DEPTH`` runs before (a bound for a perfect map from that context to one of
  the phases seen after it);
- ``online_short``, ``online_long``: a map that names each context's most frequent next phase so far
  where it came more often than the run went on; ``hindsight_short``: the same for (phase, run
  length) with the whole stream's counts known in advance (a ceiling for any (phase, run length) ->
  next-phase map). Over all changes: the mispredictions they save against last-phase (+1 per change
  foretold, -1 per claim the run outlived); over the changes ``counted``: those foretold.
"""

from __future__ import annotations

import os
import sys
from collections import Counter, defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))
from phasescope.engine.predictors import run_key  # noqa: E402

DEPTH = 3


def contexts(stream: list) -> list:
    """Per interval but the last: ((phase, run length), (the DEPTH runs before, phase, run length))."""
    out, before, run = [], (), 0
    for i, p in enumerate(stream[:-1]):
        if i and stream[i - 1] == p:
            run += 1
        else:
            if i:
                before = (before + (stream[i - 1],))[-DEPTH:]
            run = 1
        out.append(((p, run_key(run)), before + (p, run_key(run))))
    return out


def claims(stream: list, keys: list, hindsight: bool) -> list:
    """Per interval but the last, the change named by each context's most frequent next phase (so
    far, or over the whole stream) where it beat the run going on; the interval's own phase: none."""
    counts, out = defaultdict(Counter), []
    if hindsight:
        for k, nxt in zip(keys, stream[1:]):
            counts[k][nxt] += 1
    for k, p, nxt in zip(keys, stream, stream[1:]):
        c = counts[k]
        to = max(c, key=c.get) if c else p
        out.append(to if to != p and c[to] > c[p] else p)
        if not hindsight:
            c[nxt] += 1
    return out


def stream_figures(s: list, counted=None) -> Counter:
    """The shares' counts over one thread's stream ``s``; ``counted``: the indices of the changes to
    count (``s[i] != s[i - 1]``; default: all), whose online and hindsight figures are then the
    changes foretold rather than the mispredictions saved."""
    f = Counter()
    ctx = contexts(s)
    short, long_ = [c[0] for c in ctx], [c[1] for c in ctx]
    named = {"online_short": claims(s, short, False), "online_long": claims(s, long_, False),
             "hindsight_short": claims(s, short, True)}
    seen, followed = set(), defaultdict(set)
    for i, (p, nxt) in enumerate(zip(s, s[1:])):
        seen.add(p)
        keys = {"short": short[i], "long": long_[i], "phase": (p,)}
        if nxt != p and (counted is None or i + 1 in counted):
            f["changes"] += 1
            f["new"] += nxt not in seen
            for name, k in keys.items():
                f["seen_" + name] += nxt in followed[name, k]
            if counted is not None:
                for name, to in named.items():
                    f[name] += to[i] == nxt
        for name, k in keys.items():
            followed[name, k].add(nxt)
    if counted is None:  # mispredictions saved: +1 per change foretold, -1 per claim the run outlived
        for name, to in named.items():
            f[name] += sum((t == nxt) - (nxt == p) for t, p, nxt in zip(to, s, s[1:]) if t != p)
    return f
