"""The one wiring (pipeline/flow.py) on streams whose phases are known by construction: the live
path (one interval at a time) and the replay path (batches) classify alike, and the final
summary is the same whatever the order of the sinks (each sink writes only its own outputs)."""

import contextlib
import json
import os
import stat

import numpy as np
import pytest

from phasescope.engine import EngineConfig
from phasescope.engine.interval import Interval
from phasescope.engine.phase_table import settled
from phasescope.engine.segments import SegmentConfig
from phasescope.pipeline.flow import Flow
from phasescope.sinks.base import write_json_atomically
from phasescope.sinks.log import JsonlLog
from phasescope.sinks.phase_db import PhaseDb
from phasescope.sinks.summary import SummaryWriter

CODE = {"A": np.arange(1, 40, dtype=np.uint64) * 64, "B": np.arange(500, 540, dtype=np.uint64) * 64}


def stream(pattern="AAABBBAAABBB", threads=(1, 2)):
    """Each thread runs ``pattern``: A and B touch disjoint code, so two phases, A first."""
    out = []
    for t in threads:
        for seq, p in enumerate(pattern):
            keys = CODE[p]
            out.append(Interval(thread=t, seq=seq, instructions=1000 * len(keys), keys=keys,
                                counts=np.full(len(keys), 1000, dtype=np.uint64)))
    return out


def run(tmp_path, name, sinks_of, live, segments=SegmentConfig()):
    config = EngineConfig(segments=segments)
    sinks = sinks_of(tmp_path / name, config)
    flow = Flow(config, sinks)
    results = []
    flow.subscribe(lambda r, iv: results.append(r))
    flow.start({"target": name, "mode": "replay", "config": config.to_dict()})
    if live:
        for iv in stream():
            flow.feed(iv)
        flow.flush()
    else:
        flow.feed_many(list(flow.units(stream())))
    summary = flow.engine.summary()
    summary["end"] = {"how": "replayed"}
    flow.end(summary)
    flow.close()
    return [(r.thread, p) for r, p in zip(results, settled(results))], summary  # the phases the log settles


def log_and_summary(d, config):
    d.mkdir()
    return [JsonlLog(str(d / "log.jsonl")), SummaryWriter(str(d / "summary.json"))]


def test_live_and_replay_paths_classify_alike(tmp_path):
    for segments in (SegmentConfig(), SegmentConfig(mode="variable", threshold=0.5, min_units=1, max_units=8)):
        tag = segments.mode
        live, _ = run(tmp_path, f"live-{tag}", log_and_summary, live=True, segments=segments)
        batch, _ = run(tmp_path, f"batch-{tag}", log_and_summary, live=False, segments=segments)
        assert live == batch
        assert (tmp_path / f"live-{tag}" / "log.jsonl").read_bytes() == (tmp_path / f"batch-{tag}" / "log.jsonl").read_bytes()
    fixed, _ = run(tmp_path, "phases", log_and_summary, live=True)
    assert [p for t, p in fixed if t == 1] == [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1]  # A, B, A, B by construction


def test_the_summary_does_not_depend_on_the_sinks_order(tmp_path):
    def db_first(d, config):
        d.mkdir()
        return [PhaseDb(str(d / "db.json"), config), SummaryWriter(str(d / "summary.json"))]

    def db_last(d, config):
        d.mkdir()
        return [SummaryWriter(str(d / "summary.json")), PhaseDb(str(d / "db.json"), config)]

    _, first = run(tmp_path, "first", db_first, live=True)
    _, last = run(tmp_path, "last", db_last, live=True)
    files = [json.loads((tmp_path / d / "summary.json").read_text()) for d in ("first", "last")]
    for f, d in zip(files, ("first", "last")):
        assert f["phase_db"] == {"path": str(tmp_path / d / "db.json"), "saved": True}
        del f["phase_db"]
    assert files[0] == files[1]


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_summary_to_a_device_is_written_in_place_not_replaced(tmp_path):
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's own device
    write_json_atomically(str(null), {"a": 1}, ".phasescope-summary-")  # as --summary /dev/null as root did
    assert stat.S_ISCHR(os.stat(null).st_mode)  # replaced, /dev/null became a regular file machine-wide
    assert os.listdir(tmp_path) == ["null"]  # no temporary file left either


def test_a_summary_through_a_symbolic_link_replaces_its_file_and_keeps_the_link(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "db.json").write_text("{}\n")
    os.chmod(shared / "db.json", 0o640)
    link = tmp_path / "db.json"
    link.symlink_to(shared / "db.json")  # a phase database shared through a link
    write_json_atomically(str(link), {"a": 1}, ".phasescope-db-")
    assert link.is_symlink() and json.loads((shared / "db.json").read_text()) == {"a": 1}  # the link replaced was a copy of its own
    assert stat.S_IMODE(os.stat(shared / "db.json").st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["db.json", "shared"] and os.listdir(shared) == ["db.json"]


def open_a_reader_later(fifo):
    """A timer that opens ``fifo`` for reading in 5 s: it ends a writer's wait that a failing test
    would otherwise never see end."""
    import threading
    t = threading.Timer(5, lambda: os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)))
    t.start()
    return t


def test_a_summary_to_a_fifo_is_written_once_at_the_end(tmp_path):
    """A checkpoint to a FIFO would wait for a reader in the middle of the live loop: only the end
    writes it, and its reader gets one document."""
    import threading
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    w = SummaryWriter(str(fifo))
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    w.on_checkpoint({"end": {"how": "running"}})  # nothing: this used to be the document the reader got
    late_reader = open_a_reader_later(fifo)
    w.on_end({"end": {"how": "exited"}})
    late_reader.cancel()
    reader.join(10)
    assert [json.loads(g) for g in got] == [{"end": {"how": "exited"}}]


def test_a_stop_signal_ends_the_wait_for_a_fifos_reader_in_one_line(tmp_path):
    """With the run over, the first SIGTERM only set a flag that the blocked open never looked at."""
    import signal
    import threading
    from phasescope.commands.runner import StopRequest
    from phasescope.errors import PhasescopeError
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    with StopRequest():
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
        late_reader = open_a_reader_later(fifo)
        with pytest.raises(PhasescopeError, match="not written: no reader opened it before the stop signal"):
            write_json_atomically(str(fifo), {"a": 1}, ".phasescope-summary-")
    late_reader.cancel()


def test_stop_signals_while_the_run_finishes_are_kept_and_a_fifo_wait_still_ends(tmp_path, capfd):
    """A second and third stop signal during the final writes used to raise where the write was
    (half a profile, no summary); now they are said once and kept (the command exits 130). A wait
    for a FIFO's reader there still ends at the next one."""
    import signal
    import threading
    from phasescope.commands.runner import StopRequest
    from phasescope.errors import PhasescopeError
    fifo = tmp_path / "summary"
    os.mkfifo(fifo)
    with StopRequest() as stop:
        os.kill(os.getpid(), signal.SIGINT)  # the first: the run is asked to stop
        assert stop.requested == "SIGINT" and stop.again is None
        stop.finishing()
        for sig in (signal.SIGINT, signal.SIGTERM):
            os.kill(os.getpid(), sig)
        write_json_atomically(str(tmp_path / "s.json"), {"a": 1}, ".phasescope-summary-")
        assert stop.again == "SIGTERM"
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
        late_reader = open_a_reader_later(fifo)
        with pytest.raises(PhasescopeError, match="not written: no reader opened it before the stop signal"):
            write_json_atomically(str(fifo), {"a": 1}, ".phasescope-summary-")
    late_reader.cancel()
    assert json.loads((tmp_path / "s.json").read_text()) == {"a": 1}
    assert capfd.readouterr().err.count("finishing the outputs first") == 1


@contextlib.contextmanager
def a_reader_that_stopped_reading_and_ctrl_c_again_and_again(fifo, finishing=True):
    """A stop request (the first SIGINT; as the run finishes: ``finishing``), a reader of ``fifo``
    that opened it and never reads, and SIGINT every 50 ms for 20 s; then the pipe is drained, so
    a write a failing test blocked in ends."""
    import signal
    import threading
    from phasescope.commands.runner import StopRequest
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    done = threading.Event()

    def signals():
        for _ in range(400):
            if done.wait(0.05):
                return
            os.kill(os.getpid(), signal.SIGINT)
        while not done.wait(0.05):
            with contextlib.suppress(BlockingIOError):
                os.read(reader, 1 << 16)
    presses = threading.Thread(target=signals)
    try:
        with StopRequest() as stop:
            try:
                os.kill(os.getpid(), signal.SIGINT)  # the first: the run is asked to stop
                if finishing:
                    stop.finishing()
                presses.start()
                yield stop
            finally:  # the presses end while their handler is still in place: one sent after
                done.set()  # it was restored was a KeyboardInterrupt that took the xdist worker down
                if presses.is_alive():
                    presses.join()
    finally:
        os.close(reader)


def test_a_log_to_a_pipe_whose_reader_stopped_reading_is_cut_off_by_a_stop_signal_as_the_run_finishes(tmp_path):
    """`--log FIFO` (or `>(consumer)`) whose reader opened it and then stopped reading: the final
    writes blocked, and with stop signals kept while the run finishes, SIGINT and SIGTERM no longer
    ended phasescope (alive after 5 of each; only SIGKILL). Now a stop signal then ends the write:
    the log is cut off there, said at close, and the run goes on to its other outputs."""
    from phasescope.errors import PhasescopeError
    config = EngineConfig()
    with a_reader_that_stopped_reading_and_ctrl_c_again_and_again(tmp_path / "log") as stop:
        flow = Flow(config, [JsonlLog(str(tmp_path / "log"))])
        flow.start({"target": "t", "mode": "replay", "config": config.to_dict()})
        for seq in range(600):  # the final writes: more than a pipe holds (~560 KB; a pipe, 64 KB)
            keys = CODE["AB"[seq // 3 % 2]]
            flow.feed(Interval(thread=1, seq=seq, instructions=1000 * len(keys), keys=keys,
                               counts=np.full(len(keys), 1000, dtype=np.uint64)))
        with pytest.raises(PhasescopeError, match="log: cut off: its reader stopped reading before the stop signal"):
            flow.close()
        assert stop.again == "SIGINT"


def test_a_second_stop_signal_during_the_run_still_stops_its_wait_from_inside_a_pipe_write(tmp_path):
    """Before the run finishes, a second signal stops the run's wait wherever it lands (exit 130):
    one inside a write to the log's pipe is not taken for a stalled reader's."""
    from phasescope.sinks.base import LineFile
    with a_reader_that_stopped_reading_and_ctrl_c_again_and_again(tmp_path / "log", finishing=False):
        log = LineFile(str(tmp_path / "log"))
        with pytest.raises(KeyboardInterrupt) as raised:
            log.write("x" * 300_000)
        assert type(raised.value) is KeyboardInterrupt
        log.close()  # not cut off


def test_a_summary_to_a_fifo_whose_reader_stopped_reading_is_cut_off_by_a_stop_signal(tmp_path):
    """The same for `--summary FIFO` (and a phase database) larger than a pipe holds."""
    from phasescope.errors import PhasescopeError
    with a_reader_that_stopped_reading_and_ctrl_c_again_and_again(tmp_path / "summary"):
        with pytest.raises(PhasescopeError, match="summary: cut off: its reader stopped reading before the stop signal"):
            write_json_atomically(str(tmp_path / "summary"), {"a": "x" * 300_000}, ".phasescope-summary-")


@pytest.mark.parametrize("opener", ["output", "phase_db", "locality_model"])
def test_a_stop_signal_ends_the_wait_for_a_fifo_at_the_start(tmp_path, opener):
    """`-o FIFO` waits for a reader, `--phase-db FIFO` (and `locality-model FIFO`) for a writer,
    before any work: a first SIGTERM only set a flag that the blocked open never looked at (the run
    went on waiting)."""
    import signal
    import threading
    from phasescope.commands.runner import StopRequest
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    if opener == "output":
        from phasescope.commands.monitor import _open_output as start
        late = threading.Timer(5, lambda: os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)))
    else:
        from phasescope.sinks.phase_db import read_locality_runs
        start = read_locality_runs if opener == "locality_model" else lambda path: PhaseDb(path, EngineConfig())
        late = threading.Timer(5, lambda: os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)))
    late.start()  # ends the wait should the signal not (the old code)
    with StopRequest():
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
        with pytest.raises(KeyboardInterrupt):
            start(str(fifo))
    late.cancel()


def test_a_profile_to_a_fifo_reaches_its_first_reader(tmp_path):
    """`--profile FIFO`: the check at the start opened and closed the FIFO, so its first reader got
    an empty file and the profile waited for a second one."""
    import threading
    from types import SimpleNamespace
    from phasescope.sinks.profile import ProfileWriter
    fifo = tmp_path / "p.folded"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    w = ProfileWriter(str(fifo))
    for iv in stream("AB", threads=(1,)):
        w.on_interval(SimpleNamespace(phase=iv.seq, prediction=None, confidence=None), iv)
    late_reader = open_a_reader_later(fifo)
    w.close()
    late_reader.cancel()
    reader.join(10)
    assert len(got) == 1 and got[0].strip(), got  # the profile, not an empty file


def test_a_phase_database_that_cannot_be_written_does_not_cost_the_summary(tmp_path):
    # The database's directory is gone by the end (a disk unmounted, a directory removed): its write
    # fails first, and the summary after it, a sink of its own, was never written.
    import shutil
    from phasescope.errors import PhasescopeError
    gone = tmp_path / "gone"

    def db_first(d, config):
        d.mkdir()
        gone.mkdir()
        return [PhaseDb(str(gone / "db.json"), config), SummaryWriter(str(d / "summary.json"))]

    config = EngineConfig()
    flow = Flow(config, db_first(tmp_path / "run", config))
    flow.start({"target": "t", "mode": "replay", "config": config.to_dict()})
    for iv in stream():
        flow.feed(iv)
    shutil.rmtree(gone)
    summary = flow.engine.summary()
    summary["end"] = {"how": "replayed"}
    with pytest.raises(PhasescopeError, match="cannot write"):
        flow.end(summary)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["end"] == {"how": "replayed"}


def test_a_checkpoint_builds_the_summary_only_for_a_sink_that_reads_it(tmp_path):
    built = []

    def summary():
        built.append(1)
        return {"whole": {}}

    log_only = Flow(EngineConfig(), [JsonlLog(str(tmp_path / "log.jsonl"))])
    log_only.checkpoint(summary)
    log_only.close()
    assert built == []  # the log takes intervals, not checkpoints: nothing to build
    out = tmp_path / "summary.json"
    both = Flow(EngineConfig(), [JsonlLog(str(tmp_path / "log2.jsonl")), SummaryWriter(str(out))])
    both.checkpoint(summary)
    both.close()
    assert built == [1] and json.loads(out.read_text()) == {"whole": {}}


def test_a_profile_asks_names_of_java_method_keys_only(tmp_path):
    # Before the target goes, a live exact --profile names its compiled Java methods (METHOD_KEY |
    # Method* >> 3). A module key whose tag has its top bit set (fnv1a32 of half of all names) is
    # above METHOD_KEY too, but no method: asked as one, the JVM's memory was read at a garbage
    # Method* (review r46a)
    from phasescope.sinks.profile import ProfileWriter
    from phasescope.sources.modules import METHOD_KEY
    method, module = METHOD_KEY | (0x7F1234567890 >> 3), 0x9ABCDEF0 << 32 | 0x10
    w = ProfileWriter(str(tmp_path / "p.folded"))
    w.profile.weights[(0, -1, 1, 0, "")].update({(method,): 5, (module,): 7})
    asked = []
    w.before_end(lambda keys: asked.extend(keys) or ["[jit]!java A.b" if k == method else "?" for k in keys])
    assert asked == [method] and w.profile.name(method) == "java A.b" and w.profile.name(module) == f"{module:#x}"
