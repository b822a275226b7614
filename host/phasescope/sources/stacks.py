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
from phasescope.sources.sample_code import JIT_MODULE

#: The low 32 bits of a JIT key (:func:`phasescope.sources.perf_map.jit_tag`): the offset in the function.
_OFFSET = (1 << 32) - 1

#: ``[count, leaf key, caller key, ...]``: one distinct stack of a window, innermost first.
Stack = List[int]
#: stable key -> ``(module, function)``; either may be None (unknown).
Frames = Dict[int, Tuple[Optional[str], Optional[str]]]


def window_stacks(ips: np.ndarray, callers: np.ndarray, modules: ModuleMap,
                  keys_for: Callable[[np.ndarray], np.ndarray],
                  names_for: Callable[[List[int]], list], jit) -> Tuple[List[Stack], Frames, int]:
    """``(stacks, frames, leaf_only)`` of a window's samples: raw leaf IPs, their caller tuples
    (innermost first), the process's modules, its IP -> stable key function, its names function
    (addresses -> ``(module, function)`` or None each) and its perf map
    (:class:`~phasescope.sources.perf_map.PerfMap`)."""
    counted = Counter(zip(ips.tolist(), callers.tolist()))
    returns = sorted({a for _, chain in counted for a in chain})
    inside = dict(zip(returns, (modules._index(np.array(returns, dtype=np.uint64)) >= 0).tolist())) if returns else {}
    for a in returns:
        if not inside[a]:
            inside[a] = jit.name(a - 1) is not None
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
    for pc, named in zip(user, names_for(user)):
        frames[keys[pc]] = named if named is not None else (modules.locate(pc)[0], None)
    return stacks, frames, leaf_only


def jit_frame_keys(stacks: List[Stack], frames: Frames) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """``(keys, counts)`` of a window with each sample keyed by the innermost frame of its stack
    (leaf first) that is JIT code (module :data:`~phasescope.sources.sample_code.JIT_MODULE`), as
    that function (offset 0): the interpreted and the optimised runs of one JavaScript function,
    and the runtime's shared helpers it calls, then count as that function. Samples with no JIT
    frame keep their leaf key. None when no sample has a JIT frame (the window is unchanged)."""
    out: Counter = Counter()
    jit = False
    for stack in stacks:
        key = next((k for k in stack[1:] if frames.get(k, (None,))[0] == JIT_MODULE), None)
        jit = jit or key is not None
        out[stack[1] if key is None else key & ~_OFFSET] += stack[0]
    if not jit:
        return None
    keys = np.fromiter(out.keys(), dtype=np.uint64, count=len(out))
    return keys, np.fromiter(out.values(), dtype=np.uint64, count=len(out))
