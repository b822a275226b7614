"""The page tracker's input on JIT code (engine/jit_frames.py), on windows built by hand: keys of a
V8-like process whose perf map names its JS functions."""

import numpy as np
import pytest

from phasescope.engine.config import preset
from phasescope.engine.interval import Interval
from phasescope.engine.jit_frames import FUNCTION_SHARE, JIT_MODULE, tracker_input
from phasescope.engine.page_tracker import PageTracker
from phasescope.sources.modules import fnv1a32
from phasescope.sources.perf_map import jit_tag

NODE = fnv1a32("node") << 32
HANDLERS = [NODE | 0x10000 + 0x40 * i for i in range(8)]  # bytecode handlers, shared by every function
SIN = NODE | 0x900000  # a C++ runtime function
F_INTERPRETED = jit_tag("JS:~f app.js:1:1") | 0x10  # the interpreter entry's copy for f
F_OPTIMISED = jit_tag("JS:*f app.js:1:1")  # f's optimised code (+ offset)
G = jit_tag("JS:*g app.js:9:1")
MAIN = jit_tag("JS:^ app.js:1:1") | 0x200  # the script's top level, under every sample
REGEXP = jit_tag("RegExp:a+b") | 0x30
FRAMES = {**{h: ("node", f"Builtins_Handler{i}") for i, h in enumerate(HANDLERS)}, SIN: ("node", "sin"),
          F_INTERPRETED: (JIT_MODULE, "JS:~f app.js:1:1"), MAIN: (JIT_MODULE, "JS:^ app.js:1:1"),
          G: (JIT_MODULE, "JS:*g app.js:9:1"), REGEXP: (JIT_MODULE, "RegExp:a+b")}


def window(stacks, frames=FRAMES):
    """A sampled window of ``stacks`` ([count, leaf, callers...]); its keys and counts from the leaves."""
    leaves = {}
    for s in stacks:
        leaves[s[1]] = leaves.get(s[1], 0) + s[0]
    return Interval(thread=1, seq=0, instructions=None, keys=np.array(list(leaves), dtype=np.uint64),
                    counts=np.array(list(leaves.values()), dtype=np.uint64), mode="sampled",
                    samples=sum(leaves.values()), stacks=stacks, frames={k: frames[k] for s in stacks for k in s[1:]
                                                                           if k in frames})


def weights_by_key(iv, share):
    keys, weights = tracker_input(iv, share)
    out = {}
    for k, w in zip(keys.tolist(), weights.tolist()):
        out[k] = out.get(k, 0) + w
    return out


def test_a_builtin_leaf_shares_its_sample_with_the_innermost_js_function():
    iv = window([[10, HANDLERS[0], F_INTERPRETED, MAIN], [6, SIN, F_INTERPRETED, MAIN]])
    f = F_INTERPRETED >> 32 << 32  # the function: tier and offset dropped
    assert weights_by_key(iv, 0.5) == {HANDLERS[0]: 5.0, f: 5.0, SIN: 6.0}  # the C++ leaf keeps its sample


def test_a_regexp_frame_is_passed_over_for_the_function_that_ran_it():
    iv = window([[4, HANDLERS[1], REGEXP, G, MAIN]])
    assert weights_by_key(iv, 0.25) == {HANDLERS[1]: 3.0, G: 1.0}


def test_windows_without_js_frames_or_builtins_are_passed_through():
    native = window([[5, SIN]], frames={SIN: ("libm.so.6", "sin")})
    assert tracker_input(native, 0.5) == (native.keys, native.counts)
    no_stacks = Interval(thread=1, seq=0, instructions=None, keys=native.keys, counts=native.counts, mode="sampled")
    assert tracker_input(no_stacks, 0.5) == (no_stacks.keys, no_stacks.counts)
    assert tracker_input(window([[10, HANDLERS[0], F_INTERPRETED, MAIN]]), 0.0)[1].tolist() == [10]


def test_a_function_interpreted_and_optimised_is_nearer_itself_than_another_function():
    # f interpreted: its samples in the shared bytecode handlers under f's frame; f optimised: in
    # its own code. g interpreted: the same handlers under g's frame. By leaves alone the
    # interpreted f is g (the same handlers) and shares nothing with its optimised self; with
    # share s of each sample on its function, it is 2(1 - s) from its optimised self and 2s from g.
    interpreted_f = window([[10, h, F_INTERPRETED, MAIN] for h in HANDLERS])
    interpreted_g = window([[10, h, G, MAIN] for h in HANDLERS])
    optimised_f = window([[20, F_OPTIMISED | 0x100 * i, MAIN] for i in range(4)],
                         frames={**FRAMES, **{F_OPTIMISED | 0x100 * i: (JIT_MODULE, "JS:*f app.js:1:1")
                                              for i in range(4)}})
    tracker = PageTracker(preset("sampled"))
    tracker.shift = 12

    def distance(a, b, share):
        (ka, wa), (kb, wb) = tracker_input(a, share), tracker_input(b, share)
        fp, _ = tracker.footprints([ka, kb], [wa, wb])
        return float(np.abs(fp[0] - fp[1]).sum())

    assert distance(interpreted_f, optimised_f, 0.0) == 2.0 and distance(interpreted_f, interpreted_g, 0.0) == 0.0
    assert distance(interpreted_f, optimised_f, FUNCTION_SHARE) == pytest.approx(2 * (1 - FUNCTION_SHARE))
    assert distance(interpreted_f, interpreted_g, FUNCTION_SHARE) == pytest.approx(2 * FUNCTION_SHARE)
    assert FUNCTION_SHARE > 0.5  # nearer its optimised self than another function
