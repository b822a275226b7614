"""phasescope profile's pure parts on logs whose right answer is known by construction: the log's
stacks fields, the protobuf encoding, and each format's counts, checked with readers we did not
write (Perfetto's own protos from PyPI's ``perfetto``; speedscope's schema is in the slow tests,
with the npm package)."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import run_cli
from phasescope.engine.interval import Interval
from phasescope.engine.phase_engine import IntervalResult
from phasescope.errors import InputError
from phasescope.formats.log import dumps, interval_of, to_record
from phasescope.profiles import folded, perfetto, pprof, protobuf, speedscope
from phasescope.profiles.diff import changes
from phasescope.profiles.model import read_profile

import numpy as np

MAIN, PA, PB, X, Y, Z = (0xA1 << 32 | off for off in (0x10, 0x20, 0x30, 0x40, 0x50, 0x60))
NAMES = {MAIN: "main", PA: "phase_a", PB: "phase_b", X: "work_x", Y: "work_y", Z: "work_z"}
#: (phase, stacks) of each interval of one thread: phase 0 runs work_x and work_y under phase_a,
#: phase 1 work_z under phase_b; 100 samples each
PLAN = [(0, [[60, X, PA, MAIN], [40, Y, PA, MAIN]]),
        (0, [[55, X, PA, MAIN], [45, Y, PA, MAIN]]),
        (1, [[100, Z, PB, MAIN]]),
        (1, [[99, Z, PB, MAIN], [1, MAIN]]),
        (0, [[70, X, PA, MAIN], [30, Y, PA, MAIN]])]
TRUTH = {0: {"work_x": 185, "work_y": 115}, 1: {"work_z": 199, "main": 1}}


def _record(seq: int, phase: int, stacks, thread: int = 7, prediction: int = 0, **extra) -> dict:
    leaves = {}
    for s in stacks:
        leaves[s[1]] = leaves.get(s[1], 0) + s[0]
    n = sum(leaves.values())
    return {"seq": seq, "thread": thread, "thread_seq": seq, "mode": "sampled", "instructions": None, "samples": n,
            "cpu_ns": n * 1_000_000, "partial": False, "phase": phase, "prediction": prediction, "confidence": 0.5,
            "start_ns": 10**18 + seq * 10**8, "end_ns": 10**18 + (seq + 1) * 10**8,
            "blocks": [[k, c] for k, c in leaves.items()], "stacks": stacks,
            "frames": [[k, "prog", NAMES[k]] for k in sorted({k for s in stacks for k in s[1:]})], **extra}


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "run.log"
    path.write_text("".join(dumps(_record(i, ph, st, prediction=ph)) + "\n" for i, (ph, st) in enumerate(PLAN)))
    return str(path)


def test_varints_and_fields_match_the_protobuf_encoding():
    assert protobuf.varint(0) == b"\x00" and protobuf.varint(300) == b"\xac\x02"
    assert protobuf.varint(-1) == b"\xff" * 9 + b"\x01"  # int64 -1: ten bytes
    assert protobuf.uint(1, 150) == b"\x08\x96\x01"  # the protobuf documentation's example
    assert protobuf.text(2, "testing") == b"\x12\x07testing"
    assert protobuf.packed(4, [3, 270, 86942]) == b"\x22\x06\x03\x8e\x02\x9e\xa7\x05"


def test_stacks_round_trip_through_the_log_and_old_logs_still_read():
    iv = Interval(thread=1, seq=0, instructions=None, keys=np.array([X, Z], np.uint64),
                  counts=np.array([3, 1], np.uint64), mode="sampled", samples=4, period_ns=1000,
                  stacks=[[3, X, PA, MAIN], [1, Z]], frames={X: ("prog", "work_x"), PA: ("prog", None),
                                                              MAIN: (None, None), Z: ("prog", "work_z")})
    r = IntervalResult(seq=0, thread=1, thread_seq=0, instructions=0, phase=0, distance=None, new_phase=True,
                       evicted=None, previous_phase=None, predictions={}, footprint=np.zeros(0), predicted=None)
    rec = json.loads(dumps(to_record(iv, r)))
    back = interval_of(rec, "x:1")
    assert back.stacks == iv.stacks and back.frames == iv.frames
    old = {k: v for k, v in rec.items() if k not in ("stacks", "frames")}
    assert interval_of(old, "x:1").stacks is None


@pytest.mark.parametrize("stacks, frames, message", [
    ([[3, X]], [[X, "prog", "f"]], "add up to 'samples'"),
    ([[4]], [], "'stacks' must be"),
    ([[4, -1]], [], "'stacks' must be"),
    ([[4, X]], [[X, 3, "f"]], "'frames' must be"),
    ([[4, X]], None, "'frames' must be"),
])
def test_bad_stacks_are_one_line_input_errors(stacks, frames, message):
    rec = {"thread": 1, "thread_seq": 0, "mode": "sampled", "instructions": None, "samples": 4, "cpu_ns": 4000,
           "blocks": [[X, 4]], "stacks": stacks, "frames": frames}
    with pytest.raises(InputError, match=message):
        interval_of(rec, "x:1")


def test_counts_per_function_and_phase_equal_the_log_in_every_format(log, tmp_path):
    prof = read_profile(log)
    assert {ph: prof.by_function(ph) for ph in prof.phases} == TRUTH
    # folded: the first frame is the phase, the last the leaf
    got = {}
    for line in folded.lines(prof):
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        got.setdefault(int(frames[0].split()[1]), {}).setdefault(frames[-1], 0)
        got[int(frames[0].split()[1])][frames[-1]] += int(n)
    assert got == TRUTH
    assert "phase 0;main;phase_a;work_x 185" in folded.lines(prof)
    # speedscope: one profile per phase, stacks outermost first
    doc = speedscope.document(prof)
    names = [f["name"] for f in doc["shared"]["frames"]]
    got = {int(p["name"].split()[1]): {} for p in doc["profiles"]}
    for p in doc["profiles"]:
        for stack, w in zip(p["samples"], p["weights"]):
            leaf = names[stack[-1]]
            got[int(p["name"].split()[1])][leaf] = got[int(p["name"].split()[1])].get(leaf, 0) + w
    assert got == TRUTH


def test_perfetto_trace_decodes_with_perfettos_protos(log, tmp_path):
    trace_pb2 = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    trace = trace_pb2.Trace()
    trace.ParseFromString(perfetto.encode(read_profile(log)))
    tracks = {p.track_descriptor.uuid: p.track_descriptor for p in trace.packet if p.HasField("track_descriptor")}
    threads = [t for t in tracks.values() if t.HasField("thread")]
    assert [t.thread.tid for t in threads] == [7]
    events = [(p.timestamp, p.track_event) for p in trace.packet if p.HasField("track_event")]
    slices = [e.name for _, e in events if e.type == e.TYPE_SLICE_BEGIN]
    assert slices == ["phase 0", "phase 1", "phase 0"]  # runs of one phase are one slice
    assert sum(e.type == e.TYPE_SLICE_END for _, e in events) == 3
    assert [e.name for _, e in events if e.type == e.TYPE_INSTANT] == ["phase change to 1", "phase change to 0"]
    counters = {tracks[e.track_uuid].name: [] for _, e in events if e.type == e.TYPE_COUNTER}
    for _, e in events:
        if e.type == e.TYPE_COUNTER:
            counters[tracks[e.track_uuid].name].append(e.double_counter_value)
    assert counters == {"predicted phase 7": [0, 0, 1, 1, 0], "confidence 7": [0.5] * 5}
    assert all(tracks[e.track_uuid].parent_uuid == threads[0].uuid for _, e in events if e.type == e.TYPE_COUNTER)


def test_pprof_labels_and_predicted_phase(log):
    prof = read_profile(log)
    # the prediction of an interval is its thread's previous record's: -1, 0, 0, 1, 1
    assert {labels[:2]: sum(s.values()) for labels, s in prof.weights.items()} == {
        (0, -1): 100, (0, 0): 100, (1, 0): 100, (1, 1): 100, (0, 1): 100}
    data = pprof.encode(prof, phase=1)
    assert b"work_z" in data and b"work_x" not in data


def test_diff_lists_the_largest_changes_first(log):
    prof = read_profile(log)
    rows = changes(prof, 0, prof, 1)
    assert rows[0].function == "work_z" and rows[0].delta == pytest.approx(199 / 200)
    assert rows[1].function == "work_x" and rows[1].delta == pytest.approx(-185 / 300)
    assert {r.function for r in rows} == {"work_x", "work_y", "work_z", "main"}
    with pytest.raises(InputError, match="no samples"):
        changes(prof, 0, prof, 9)


def test_exact_logs_give_instruction_weights_by_block(tmp_path):
    path = tmp_path / "exact.log"
    recs = [{"thread": 1, "thread_seq": i, "mode": "exact", "instructions": 1000, "phase": i % 2,
             "blocks": [[X, 600 + i], [Y, 400 - i]]} for i in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    prof = read_profile(str(path))
    assert prof.unit == "instructions"
    assert prof.by_function(0) == {f"{X:#x}": 1202, f"{Y:#x}": 798}


@pytest.mark.slow  # runs the CLI
def test_cli_refuses_bad_input_in_one_line(log, tmp_path):
    for args, message in [(("-o", str(tmp_path / "x.txt")), "cannot tell the profile format"),
                          (("-o", str(tmp_path / "x.pb.gz"), "--phase", "9"), "no phase 9"),
                          (("-o", str(tmp_path / "x.perfetto-trace"), "--phase", "0"), "does not apply"),
                          (("--diff", "0", "x"), "PHASE or LOG:PHASE"),
                          ((), "needs -o")]:
        r = run_cli("profile", log, *args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr, (args, r.stderr)
    named_like_a_base = tmp_path / "d.base.pb.gz"  # a log whose name --diff -o d.pb.gz would take for its base
    named_like_a_base.write_text(open(log).read())
    r = run_cli("profile", str(named_like_a_base), "--diff", "0", "1", "-o", str(tmp_path / "d.pb.gz"))
    assert r.returncode == 2 and "its base over an input" in r.stderr
    assert named_like_a_base.read_text() == open(log).read()
    empty = tmp_path / "empty.log"
    empty.write_text("")
    r = run_cli("profile", str(empty), "-o", str(tmp_path / "e.folded"))
    assert r.returncode == 2 and "no intervals" in r.stderr and r.stderr.count("\n") == 1
    r = run_cli("profile", log, "-o", log + ".pb.gz")
    assert r.returncode == 0 and gzip.decompress(open(log + ".pb.gz", "rb").read())


def test_merged_sampled_intervals_keep_their_stacks():
    from phasescope.engine.segments import merge
    pieces = [Interval(thread=1, seq=i, instructions=None, keys=np.array([X], np.uint64), counts=np.array([n], np.uint64),
                       mode="sampled", samples=n, period_ns=1000, stacks=[[n, X, PA]],
                       frames={X: ("prog", "work_x"), PA: ("prog", "phase_a")}) for i, n in enumerate((3, 5))]
    iv = merge(pieces, 0)
    assert iv.samples == 8 and sum(s[0] for s in iv.stacks) == 8 and set(iv.frames) == {X, PA}
    r = IntervalResult(seq=0, thread=1, thread_seq=0, instructions=0, phase=0, distance=None, new_phase=True,
                       evicted=None, previous_phase=None, predictions={}, footprint=np.zeros(0), predicted=None)
    assert interval_of(json.loads(dumps(to_record(iv, r))), "x:1").stacks == iv.stacks


@pytest.mark.parametrize("name, module, step", [("p.pb.gz", pprof, "encode"), ("p.json", speedscope, "document"),
                                                ("p.folded", folded, "lines"), ("p.perfetto-trace", perfetto, "encode")])
def test_a_stop_signal_during_the_write_leaves_the_old_profile_whole(log, tmp_path, monkeypatch, name, module, step):
    """A stop signal ends ``phasescope profile`` at once (stop 45), also while it writes (a third
    of a large log's time for a Perfetto trace): the output had been opened, so emptied, first, and
    the old profile was lost for an empty or half-written one."""
    from phasescope.commands.profile import ProfileCommand

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt  # what the stop signal's handler raises there

    out = tmp_path / name
    out.write_bytes(b"the old profile")
    monkeypatch.setattr(module, step, stopped)
    assert ProfileCommand("phasescope profile").main([log, "-o", str(out)]) == 130
    assert out.read_bytes() == b"the old profile"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["run.log", name])  # no temporary file left


@pytest.mark.slow  # runs the CLI
def test_a_profile_to_standard_output_through_a_pipe(log):
    """``-o /dev/stdout | ...``: its link names a pipe (``pipe:[N]``), written in place, not
    replaced through a temporary file beside it (which failed: no such directory)."""
    r = run_cli("profile", log, "-o", "/dev/stdout", "--format", "folded", timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("phase ") and r.stdout.endswith("\n"), r.stdout
