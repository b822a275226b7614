"""SplitMix64, the one hash of the engine: block keys to buckets (vectorised, numpy) and predictor
histories to table slots (one Python int). Both forms follow the same steps and constants."""

from __future__ import annotations

import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
#: (shift, multiplier) of the finalizer; the last step only shifts
STEPS = ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB), (31, None))
M64 = (1 << 64) - 1
_BLOCK = 1 << 16


def mix64_int(z: int) -> int:
    """SplitMix64 of one Python int."""
    z = (z + GOLDEN) & M64
    for shift, mul in STEPS:
        z ^= z >> shift
        if mul is not None:
            z = (z * mul) & M64
    return z


def mix64(keys: np.ndarray) -> np.ndarray:
    """SplitMix64 of each uint64 key (key + golden gamma, then the finalizer); a new array."""
    z = np.add(np.asarray(keys, dtype=np.uint64), np.uint64(GOLDEN))
    tmp = np.empty(min(len(z), _BLOCK), dtype=np.uint64)
    for start in range(0, len(z), _BLOCK):  # cache-sized pieces: about twice as fast
        zz = z[start:start + _BLOCK]
        tt = tmp[: len(zz)]
        for shift, mul in STEPS:
            np.right_shift(zz, np.uint64(shift), out=tt)
            np.bitwise_xor(zz, tt, out=zz)
            if mul is not None:
                np.multiply(zz, np.uint64(mul), out=zz)
    return z
