"""bench/quality/generalize.py's pure parts: settings written PRESET:FIELD=VALUE, and labels
renumbered as if every folded phase had had its final ID."""

import importlib.util
import os

import numpy as np
import pytest

from phasescope.engine.tracker import PRESETS

HERE = os.path.dirname(os.path.abspath(__file__))


def _generalize():
    spec = importlib.util.spec_from_file_location(
        "generalize", os.path.join(HERE, "..", "bench", "quality", "generalize.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generalize()


def test_a_setting_is_a_preset_with_fields_overridden():
    c = gen.tracker_config("paper:buckets=128:bits=none:threshold=0.15:projection=true", 10_000_000)
    assert (c.buckets, c.bits, c.threshold, c.projection) == (128, None, 0.15, True)
    assert (c.table_size, c.evict_policy, c.update_policy) == (64, "lru", "none")  # the rest: the paper's
    assert gen.tracker_config("coarse", 10_000_000).full_policy == PRESETS["coarse"]["full_policy"]
    with pytest.raises(TypeError):
        gen.tracker_config("paper:no_such_field=1", 10_000_000)


def test_renumbered_labels_follow_each_fold_to_its_end():
    labels = np.array([0, 1, 2, 1, 3, 0, 4])
    # 1 folded into 2, later 2 into 0: both end as 0; 3 into 4
    assert gen.renumbered(labels, [(1, 2), (3, 4), (2, 0)]).tolist() == [0, 0, 0, 0, 4, 0, 4]
