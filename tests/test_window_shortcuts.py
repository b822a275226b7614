"""The sampled engine's per-window shortcuts (issue 31) give what the plain computation gives:
the cycle predictor's context looked up once a run, the confidence counters' LRU written out, a
single window's page vector without the batch's row offsets."""

import random
from collections import OrderedDict

import numpy as np
import pytest

from phasescope.engine.page_tracker import PageTracker
from phasescope.engine.predictors import Confidence, Periodic
from phasescope.engine.tracker import preset


class EveryWindow(Periodic):
    """Periodic looking its run's context up at every window (no shortcut)."""

    def _next(self, phase, held):
        self._seen = None
        return super()._next(phase, held)


@pytest.mark.parametrize("seed", range(4))
def test_cycle_looks_its_context_up_once_a_run_and_claims_the_same(seed):
    rng = random.Random(seed)
    cycle = [rng.randrange(6) for _ in range(5)]
    a, b = Periodic(), EveryWindow()
    phase, left, at = cycle[0], 0, 0
    claims = 0
    for i in range(5000):
        if left == 0:  # runs of a jittered cycle, now and then a phase out of order
            at += 1
            phase = rng.randrange(6) if rng.random() < 0.1 else cycle[at % len(cycle)]
            left = rng.choice([2, 3, 3, 4]) if rng.random() < 0.9 else 9
        left -= 1
        held = rng.random() < 0.1
        got = a.observe(phase, held)
        assert got == b.observe(phase, held), i
        assert (a.trust, a.margin, a.claims, a.hits) == (b.trust, b.margin, b.claims, b.hits)
        claims += a._made is not None
    assert claims > 200  # claims were made (shown or not)


class PlainConfidence:
    """Confidence as a get, then a put, of an LRU table (the counters' contract)."""

    def __init__(self, entries):
        self.entries, self.d = entries, OrderedDict()

    def value(self, ctx):
        if ctx in self.d:
            self.d.move_to_end(ctx)
            return self.d[ctx]
        return Confidence.START

    def update(self, ctx, right):
        v = self.value(ctx)
        self.d[ctx] = min(Confidence.MAX, v + 1) if right else max(0, v - 2)
        self.d.move_to_end(ctx)
        if len(self.d) > self.entries:
            self.d.popitem(last=False)


def test_confidence_counters_keep_the_lru_order_and_evictions():
    rng = random.Random(1)
    c, plain = Confidence(entries=16), PlainConfidence(16)
    for _ in range(5000):
        ctx = ("p", rng.randrange(40))
        if rng.random() < 0.5:
            assert c.value(ctx) == plain.value(ctx)
        else:
            right = rng.random() < 0.6
            c.update(ctx, right)
            plain.update(ctx, right)
        assert list(c.table._d.items()) == list(plain.d.items())


def test_one_windows_page_vector_is_its_row_of_a_batch():
    rng = np.random.default_rng(3)
    keys = [rng.integers(0, 1 << 40, n, dtype=np.uint64) << np.uint64(12) for n in (40, 1, 300)]
    counts = [rng.integers(1, 9, len(k)).astype(np.uint64) for k in keys]
    batch = PageTracker(preset("sampled"))
    rows, totals = batch.footprints(keys, counts)
    for i, (k, c) in enumerate(zip(keys, counts)):
        one = PageTracker(preset("sampled"))
        one.shift = batch.shift
        row, total = one.footprints([k], [c])
        assert row.shape == (1, batch.config.buckets)
        assert np.array_equal(row[0], rows[i]) and total[0] == totals[i]
