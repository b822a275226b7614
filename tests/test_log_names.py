"""An exact-mode log of a JVM names its compiled Java methods (stop 47): the live run names them
from the JVM's tables before the target ends, which no file names afterwards, so ``phasescope
profile LOG`` showed them as ``0x8000...`` keys. The log's ``names`` record keeps them; every other
reader skips it."""

from __future__ import annotations

import json

import numpy as np

from phasescope.engine import EngineConfig
from phasescope.engine.interval import Interval
from phasescope.formats.log import read_log
from phasescope.pipeline.flow import Flow
from phasescope.profiles.model import read_profile
from phasescope.sinks.log import JsonlLog
from phasescope.sources.modules import METHOD_KEY

SPIN, UNREAD, NATIVE = METHOD_KEY + 0x7F10, METHOD_KEY + 0x9A40, 0x1234 << 32 | 0x40


def _logged(tmp_path) -> str:
    log = str(tmp_path / "jvm.jsonl")
    flow = Flow(EngineConfig(), [JsonlLog(log)])
    flow.start({"target": "java", "mode": "exact", "config": EngineConfig().to_dict()})
    for seq in range(6):
        keys = np.array([NATIVE, SPIN] + ([UNREAD] if seq % 2 else []), dtype=np.uint64)
        flow.feed(Interval(thread=1, seq=seq, instructions=1000 * len(keys), keys=keys,
                           counts=np.full(len(keys), 1000, dtype=np.uint64)))
    flow.flush()
    # as live.py's _names_now names them: a method the JVM's tables no longer hold stays a key
    flow.sinks.before_end(lambda keys: ["[jit]!java Hot.spin" if k == SPIN else f"java method {k:#x}" for k in keys])
    summary = flow.engine.summary()
    summary["end"] = {"how": "exited"}
    flow.end(summary)
    flow.close()
    return log


def test_profile_of_an_exact_log_names_the_methods_the_live_run_named(tmp_path):
    log = _logged(tmp_path)
    last = json.loads(open(log).read().splitlines()[-1])
    assert last == {"names": [[SPIN, "[jit]", "java Hot.spin"]]}
    prof = read_profile(log)
    assert prof.name(SPIN) == "java Hot.spin"
    assert prof.name(UNREAD) == f"{UNREAD:#x}"  # not named by the run: still its key
    assert len(list(read_log(log))) == 6  # replay, export-bbv, reference, plot: the intervals only


def test_replay_carries_the_names_on_into_its_log_and_profile(tmp_path):
    """``replay LOG --log AGAIN`` dropped the record: AGAIN's methods were keys again."""
    from phasescope.cli import main
    log = _logged(tmp_path)
    again, folded = tmp_path / "again.jsonl", tmp_path / "again.folded"
    assert main(["replay", log, "--log", str(again), "--profile", str(folded)]) == 0
    assert read_profile(str(again)).name(SPIN) == "java Hot.spin"
    assert "java Hot.spin" in folded.read_text()
