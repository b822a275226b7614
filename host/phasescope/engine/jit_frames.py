"""The page tracker's input for JIT runtimes: each sample shared between its own code and the JIT
function it runs for (issue 27).

A JIT runtime runs one activity first in its interpreter and baseline tiers, whose samples land in
the bytecode handlers and builtins that every activity shares, and later in optimised code, which
is other code. Keyed by its leaf alone, the later runs look like another phase. The function those
samples run for is the same in every tier: the innermost frame of the sample's call chain that the
process's perf map names (a JS function; V8's tier mark is already dropped from the key, see
:mod:`phasescope.sources.perf_map`). A sample with such a frame puts ``FUNCTION_SHARE`` of its
weight on that function (its key with the offset dropped: one page per function, whatever the
tier's code size) and the rest on its leaf. V8's compiled regular expressions (``RegExp:``) are code
of a pattern, not a function, and its tiers differ too: the frame looked for is the JS function
that called them. Samples without such a frame (native programs, native threads, cut chains) keep
their leaf alone, so a program without a perf map is classified as before.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

#: The module name of code a perf map names (JIT code in anonymous memory).
JIT_MODULE = "[jit]"
#: Share of a sample's weight on the JIT function it runs for (chosen on bench/truth's tuning half).
FUNCTION_SHARE = 0.9
_NOT_FUNCTIONS = ("RegExp:",)
_BUILTINS = ("Builtins_",)


def tracker_input(iv, share: Optional[float] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``(keys, weights)`` the tracker's vector of interval ``iv`` is made of: its leaf keys and
    sample counts, with ``share`` of each sample that has a JIT function in its stack moved to that
    function's key (None: ``FUNCTION_SHARE``)."""
    share = FUNCTION_SHARE if share is None else share
    if not share or not iv.stacks or not iv.frames:
        return iv.keys, iv.counts
    functions, builtins = set(), set()
    for k, (module, name) in iv.frames.items():
        if module == JIT_MODULE and not (name or "").startswith(_NOT_FUNCTIONS):
            functions.add(k)
        elif (name or "").startswith(_BUILTINS):
            builtins.add(k)
    if not functions or not builtins:
        return iv.keys, iv.counts
    keys, weights = [], []
    for stack in iv.stacks:
        n = stack[0]
        f = next((k for k in stack[2:] if k in functions), None) if stack[1] in builtins else None
        if f is None:
            keys.append(stack[1])
            weights.append(n)
        else:
            keys += [stack[1], f >> 32 << 32]
            weights += [n * (1.0 - share), n * share]
    k = np.array(keys, dtype=np.uint64)
    return k, np.array(weights, dtype=np.float64)

