"""A wake-up's sampled windows keyed together (the sampler's one sort and key look-up for a
ring's several windows) and classified together (``Flow.feed_together``, the live loop's batch)
give every window, result, subscriber call and log line of doing it one window at a time."""

from __future__ import annotations

import dataclasses
import struct
import sys

import numpy as np
import pytest

from conftest import run_cli

from phasescope.commands.monitor import MonitorCommand
from phasescope.commands.options import engine_config_from_args
from phasescope.engine.interval import Interval
from phasescope.pipeline.flow import Flow
from phasescope.sinks.log import JsonlLog
from phasescope.workloads import phased
from phasescope.sources.modules import KERNEL_KEY
from test_ring_parse import BASE, IDENT, PID, USER, key, sampler

KERNEL_IP = 0xFFFF_FFFF_8100_0000

WINDOW = 100


def windows(seed: int = 7, n: int = 240, threads=(11, 12)):
    """Sampled windows of threads switching between four code regions (runs of 1-12 windows,
    some mixed), so phases are made, confirmed, relabelled and predicted."""
    rng = np.random.default_rng(seed)
    regions = [np.arange(base, base + 40, dtype=np.uint64) * 64 for base in (1000, 5000, 9000, 13000)]
    out, seqs, t = [], dict.fromkeys(threads, 0), 0
    while len(out) < n:
        tid = int(rng.choice(threads))
        region = int(rng.integers(len(regions)))
        for _ in range(int(rng.integers(1, 13))):
            pcs = rng.choice(regions[region], WINDOW)
            if rng.random() < 0.15:  # a window straddling two regions
                pcs[: WINDOW // 2] = rng.choice(regions[(region + 1) % len(regions)], WINDOW // 2)
            keys, counts = np.unique(pcs, return_counts=True)
            t += 100_000_000
            out.append(Interval(thread=tid, seq=seqs[tid], instructions=None, keys=keys, counts=counts.astype(np.uint64),
                                pcs=keys.copy(), start_ns=t - 100_000_000, end_ns=t, mode="sampled", samples=WINDOW,
                                period_ns=1_000_000))
            seqs[tid] += 1
    return out


def leaf(ip: int, t: int, misc: int = USER) -> bytes:
    """A chainless sample record of the target's main thread."""
    return struct.pack("<IHHQQIIQ", 9, misc, 40, IDENT, ip, PID, PID, t)


def cut(chunks, kernel: bool):
    s = sampler(chunks, stacks=False, kernel=kernel)
    s._last_scan = float("inf")  # PID has no /proc entry: no fallback scan may end its thread
    windows = []
    for _ in chunks:
        windows += s.poll(0)
    return [(w.thread, w.seq, w.keys.tolist(), w.counts.tolist(), w.counts.dtype, w.keys.dtype, w.pcs.tolist(),
             w.start_ns, w.end_ns, w.partial, w.samples) for w in windows + s.stop()]


@pytest.mark.parametrize("kernel", [False, True])
def test_a_rings_several_windows_keyed_together_are_keyed_as_one_at_a_time(kernel):
    rng = np.random.default_rng(9)
    ips = [int(BASE + 16 * rng.integers(0, 30 if i < 20 else 300)) for i in range(4 * 9 + 3)]  # new code later
    records = [leaf(KERNEL_IP if kernel and i % 5 == 0 else ip, 10 + i, 1 if kernel and i % 5 == 0 else USER)
               for i, ip in enumerate(ips)]
    one_a_read = cut([b"".join(records[i:i + 4]) for i in range(0, len(records), 4)], kernel)  # a window a read
    together = cut([b"".join(records[:7]), b"".join(records[7:])], kernel)  # one window, then eight at once
    assert together == one_a_read
    assert len(together) == 10 and together[-1][9]  # nine whole windows and a partial one
    assert all(k == key(pc) for w in together for k, pc in zip(w[2], w[6]) if pc != KERNEL_KEY)
    assert any(KERNEL_KEY in w[6] for w in together) == kernel


def classified(tmp_path, name, groups):
    """Every result (all fields, the footprint as a list) and the log's bytes, fed in ``groups``."""
    args = MonitorCommand("phasescope").parser().parse_args(["--mode", "sampled", "-f", "x"])
    config = engine_config_from_args(args, preset_default="sampled")
    log = tmp_path / f"{name}.jsonl"
    flow = Flow(config, [JsonlLog(str(log))])
    seen = []
    flow.subscribe(lambda r, iv: seen.append((iv.thread, iv.seq, {
        k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in dataclasses.asdict(r).items()})))
    flow.start({"target": name, "mode": "sampled", "config": config.to_dict()})
    for group in groups:
        if group is None:
            continue
        flow.feed_together(group) if isinstance(group, list) else flow.feed(group)
    flow.flush()
    summary = flow.engine.summary()
    summary["end"] = {"how": "replayed"}
    flow.end(summary)
    flow.close()
    return seen, summary, log.read_bytes()


def test_a_wake_ups_windows_classified_together_are_classified_as_one_at_a_time(tmp_path):
    ws = windows()
    one, one_summary, one_log = classified(tmp_path, "one", ws)
    assert len({r["phase"] for _, _, r in one}) >= 3 and any(r["relabel"] is not None for _, _, r in one)
    rng = np.random.default_rng(3)
    for trial, sizes in enumerate(([1], [2], [10], [3, 1, 7, 10, 5, 0])):
        groups, at = [], 0
        while at < len(ws):
            size = int(rng.choice(sizes))
            groups.append(ws[at:at + size])  # an empty wake-up (size 0) feeds nothing
            at += size
        seen, summary, log = classified(tmp_path, f"together{trial}", groups)
        assert seen == one
        assert summary == one_summary
        assert log == one_log


@pytest.mark.slow
def test_a_live_sampled_log_whose_wake_ups_brought_several_windows_replays_to_itself(tmp_path):
    """The live loop classifies each wake-up's windows together (two or more a wake-up with --log at
    1000 Hz); replay feeds the log one batch at a time: the same records, byte for byte."""
    live, again = tmp_path / "live.jsonl", tmp_path / "again.jsonl"
    r = run_cli("--mode", "sampled", "--no-dashboard", "--log", str(live), "-f", sys.executable, phased.__file__,
                "--", "--rounds", "4", "--no-thread", timeout=300)
    assert r.returncode == 0, r.stderr
    replayed = run_cli("replay", str(live), "--log", str(again))
    assert replayed.returncode == 0, replayed.stderr
    assert live.read_bytes().count(b"\n") >= 8
    assert again.read_bytes() == live.read_bytes()
