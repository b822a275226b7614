"""engine/arrays.py: distinct values (and their counts) by sorting, the same as np.unique's."""

import numpy as np
import pytest

from phasescope.engine.arrays import unique, unique_counts


@pytest.mark.parametrize("dtype", [np.uint64, np.int64, np.uint32, np.int32])
def test_unique_is_numpys(dtype):
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 17, 5000):
        values = (rng.integers(0, 50, n) * 64 + 3).astype(dtype)
        got = unique(values)
        assert got.dtype == values.dtype
        assert np.array_equal(got, np.unique(values))


def test_unique_flattens_and_keeps_extremes():
    values = np.array([[2**64 - 1, 0], [5, 2**64 - 1]], dtype=np.uint64)
    assert unique(values).tolist() == [0, 5, 2**64 - 1]
    assert unique([3, 3, 3]).tolist() == [3]


@pytest.mark.parametrize("dtype", [np.uint64, np.int64])
def test_unique_counts_is_numpys(dtype):
    rng = np.random.default_rng(11)
    for n in (0, 1, 2, 100, 5000):
        values = (rng.integers(0, 30, n) * 4096).astype(dtype)
        got, counts = unique_counts(values)
        want, want_counts = np.unique(values, return_counts=True)
        assert got.dtype == want.dtype and counts.dtype == want_counts.dtype
        assert np.array_equal(got, want) and np.array_equal(counts, want_counts)
