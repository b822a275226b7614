"""engine/arrays.py: distinct values (and their counts) by sorting, the same as np.unique's."""

import numpy as np
import pytest

from phasescope.engine.arrays import unique, unique_counts, unique_counts_rows


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


@pytest.mark.parametrize("width", [1, 2, 100])
def test_unique_counts_rows_is_unique_counts_of_each_row(width):
    rng = np.random.default_rng(5)
    rows = (rng.integers(0, 20, (9, width)) * 4096).astype(np.uint64)
    rows[0] = 7  # one value only
    rows[1] = np.arange(width, dtype=np.uint64)[::-1]  # every value distinct
    rows[2, -1] = 2**64 - 1
    values, counts, starts = unique_counts_rows(rows)
    assert len(starts) == len(rows) + 1 and starts[0] == 0 and starts[-1] == len(values)
    for i, row in enumerate(rows):
        want, want_counts = unique_counts(row)
        got, got_counts = values[starts[i]:starts[i + 1]], counts[starts[i]:starts[i + 1]]
        assert got.dtype == want.dtype and got_counts.dtype == want_counts.dtype
        assert np.array_equal(got, want) and np.array_equal(got_counts, want_counts)
