"""Call stacks of a sampled window: each sample's leaf and user return addresses (frame pointers,
``PERF_SAMPLE_CALLCHAIN``) as stable keys, counted, with the names of their frames.

The kernel walks the user stack by frame pointers. Code built without them (``-O2`` without
``-fno-omit-frame-pointer``) leaves ``rbp`` a general register: the walk stops at once or reads
a few words that are no return addresses. A chain is therefore cut at its first address outside
every known code module and not named by the process's perf map (JIT code), and a sample whose chain is cut to nothing keeps its leaf alone
(counted in ``leaf_only``, so a run can say how much of it had no stacks). A return address
points after its call: it is named and keyed as ``address - 1``, inside the calling function.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from phasescope.sources.modules import KERNEL_KEY, KERNEL_NAME, ModuleMap
from phasescope.sources.perf_event import user_callers

#: Frames remembered across windows, at most (then forgotten at once).
KNOWN_FRAMES = 100_000
#: ``[count, leaf key, caller key, ...]``: one distinct stack of a window, innermost first.
Stack = List[int]
#: stable key -> ``(module, function)``; either may be None (unknown).
Frames = Dict[int, Tuple[Optional[str], Optional[str]]]


def window_stacks(ips: np.ndarray, raw_chains: np.ndarray, modules: ModuleMap,
                  keys_for: Callable[[np.ndarray], np.ndarray],
                  names_for: Callable[[List[int]], list], jit, known: Frames) -> Tuple[List[Stack], Frames, int]:
    """``(stacks, frames, leaf_only)`` of a window's samples: raw leaf IPs, their raw call chains
    (sample records' bytes from :data:`~phasescope.sources.perf_event.CHAIN_AT` on), the process's
    modules, its IP -> stable key function, its names function (addresses -> ``(module,
    function)`` or None each), its perf map (:class:`~phasescope.sources.perf_map.PerfMap`) and
    the frames of earlier windows (``known``, updated: a module or perf-map key names one place for
    good, so each is named once; a raw address is named anew each window)."""
    counted: Counter = Counter()
    for (ip, raw), n in Counter(zip(ips.tolist(), raw_chains.tolist())).items():  # a distinct chain decoded once
        counted[ip, user_callers(raw, ip)] += n
    returns = sorted({a for _, chain in counted for a in chain})
    inside = dict(zip(returns, (modules._index(modules.canonical(returns)) >= 0).tolist())) if returns else {}
    outside = [a for a in returns if not inside[a]]
    for a, name in zip(outside, jit.names([a - 1 for a in outside])):
        inside[a] = name is not None
    chains = {}
    for ip, chain in counted:
        kept = []
        for a in chain:
            if not inside[a]:
                break
            kept.append(a - 1)
        chains[ip, chain] = kept
    pcs = sorted({ip for ip, _ in counted} | {a for kept in chains.values() for a in kept})
    keys = dict(zip(pcs, keys_for(np.array(pcs, dtype=np.uint64)).tolist()))
    stacks, leaf_only = [], 0
    for (ip, chain), n in counted.items():
        kept = chains[ip, chain]
        leaf_only += 0 if kept else n
        stacks.append([n, keys[ip]] + [keys[a] for a in kept])
    user = [pc for pc in pcs if pc != KERNEL_KEY]
    frames: Frames = {KERNEL_KEY: (None, KERNEL_NAME)} if len(user) < len(pcs) else {}
    unknown = []
    for pc in user:
        if keys[pc] in known:
            frames[keys[pc]] = known[keys[pc]]
        else:
            unknown.append(pc)
    if len(known) + len(unknown) > KNOWN_FRAMES:
        known.clear()
    named = names_for(unknown) if unknown else []  # most windows: every frame named before
    unnamed = [pc for pc, n in zip(unknown, named) if n is None]
    where = dict(zip(unnamed, modules.module_names(unnamed)))
    for pc, n in zip(unknown, named):
        frames[keys[pc]] = n if n is not None else (where[pc], None)
        if keys[pc] != pc:
            known[keys[pc]] = frames[keys[pc]]
    return stacks, frames, leaf_only
