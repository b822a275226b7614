"""The event stream (--events) against a real traced target: clients connecting mid-run, a
client that never reads, a client that vanishes, bad addresses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading

import pytest

from conftest import cli_command, log_lines, read_records, run_cli, wait_for


def try_connect(address):
    """A socket connected to ``address`` (a unix path or a (host, port) pair), None while nobody listens."""
    s = socket.socket(socket.AF_UNIX if isinstance(address, str) else socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.connect(address)
        return s
    except OSError:
        s.close()
        return None


def connect(address, timeout=20.0) -> socket.socket:
    return wait_for(lambda: try_connect(address), timeout, f"a server on {address}", every=0.02)


def read_events(sock, out):
    f = sock.makefile("r", encoding="utf-8")
    for line in f:
        out.append(json.loads(line))


def serve_synthetic(tmp_path):
    """An event server on a unix socket with one client reading it, hello served: (server, the
    events the client got, its reader thread)."""
    from phasescope.sinks.events import EventServer
    path = str(tmp_path / "ev.sock")
    server = EventServer(f"unix:{path}")
    client, got = connect(path), []
    reader = threading.Thread(target=read_events, args=(client, got))
    reader.start()
    server.on_start({"target": "synthetic", "pid": None, "mode": "replay", "config": {}})
    wait_for(lambda: server.served, 10, "the client to be served hello", every=0.01)
    return server, got, reader


def end_serving(server, reader) -> None:
    server.on_end({"end": {"how": "replayed"}})
    server.close()
    reader.join(10)


@pytest.mark.slow
def test_clients_mid_run_slow_and_vanishing(build, tmp_path):
    """A reader connecting mid-run gets hello then ordered events; a client that never reads and
    one that disconnects abruptly cost neither tracing nor the log a record; drops are counted."""
    prog = build("phased.c")
    sock_path, log, summary = str(tmp_path / "ev.sock"), str(tmp_path / "run.jsonl"), str(tmp_path / "s.json")
    proc = subprocess.Popen(cli_command("-f", prog, "12", "4", "--no-dashboard",
                                        "--events", f"unix:{sock_path}", "--events-queue", "16",
                                        "--log", log, "--summary", summary),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        silent = connect(sock_path)  # never reads
        silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        wait_for(lambda: log_lines(log) >= 5, 20, "5 records logged")  # the run is well under way
        vanishing = connect(sock_path)
        vanishing.recv(100)
        vanishing.close()  # abruptly, with events still coming
        reader, events = connect(sock_path), []
        t = threading.Thread(target=read_events, args=(reader, events), daemon=True)
        t.start()
        _, err = proc.communicate(timeout=40)
        t.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert not os.path.exists(sock_path)  # removed on close
    assert events[0]["event"] == "hello" and events[0]["schema"] == 1 and events[0]["mode"] == "exact"
    assert events[0]["config"]["tracker"]["buckets"] == 32
    assert events[-1]["event"] == "end" and events[-1]["how"] == "exited" and events[-1]["code"] == 0
    intervals = [e for e in events if e["event"] == "interval"]
    seqs = [e["seq"] for e in events if "seq" in e]
    assert intervals and intervals[0]["seq"] > 0  # joined mid-run
    assert seqs == sorted(seqs)
    assert all(e["sent_ns"] >= e.get("end_ns", 0) for e in events)
    for e in events:
        if e["event"] == "prediction":
            assert set(e) >= {"thread", "phase", "confidence", "expected_remaining"}
        if e["event"] == "phase_change":
            assert e["from"] != e["to"] and e["time"] > 0
    # the log has every record, contiguous, whatever the clients did
    records = read_records(log)
    assert [r["seq"] for r in records] == list(range(len(records)))
    threads = {}
    for r in records:
        assert r["thread_seq"] == threads.get(r["thread"], -1) + 1
        threads[r["thread"]] = r["thread_seq"]
    with open(summary) as f:
        s = json.load(f)
    assert s["whole"]["intervals"] == len(records)
    assert s["events"]["clients"] == 3 and s["events"]["dropped"] > 0  # the silent client's
    dropped = sum(e["count"] for e in events if e["event"] == "dropped")
    # the reader saw every interval from its first one on, or was told how many events it missed
    assert len(intervals) == len(records) - intervals[0]["seq"] or dropped > 0
    silent.close()


@pytest.mark.slow
@pytest.mark.parametrize("address,words", [
    ("unix:/nonexistent-dir/x.sock", "cannot bind"),
    ("bogus", "expected unix:PATH or tcp:HOST:PORT"),
    ("tcp:9999", "give the host"),
    ("tcp:127.0.0.1:notaport", "bad port"),
    ("tcp:8.8.8.8:9999", "not a loopback address"),
    ("PORT_IN_USE", "port in use"),
])
def test_bad_address_fails_before_attaching(address, words):
    busy = None
    if address == "PORT_IN_USE":
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        address = f"tcp:127.0.0.1:{busy.getsockname()[1]}"
    try:
        # pid 999999 does not exist: the address must be refused before the target is looked up
        r = run_cli("-p", "999999", "--no-dashboard", "--events", address, timeout=30)
    finally:
        if busy is not None:
            busy.close()
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr


@pytest.mark.slow
def test_replay_serves_events(tmp_path):
    """replay takes --events too (the replay is over before a client could connect here: the
    socket is served and removed)."""
    log = tmp_path / "in.jsonl"
    recs = []
    for i in range(6):
        key = 1000 if i < 3 else 2000
        recs.append({"seq": i, "thread": 1, "thread_seq": i, "instructions": 100000, "blocks": [[key, 100000]]})
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    sock_path = str(tmp_path / "r.sock")
    proc = subprocess.Popen(cli_command("replay", str(log), "--events", f"unix:{sock_path}"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert not os.path.exists(sock_path)


@pytest.mark.slow
def test_tcp_loopback_client(build, tmp_path):
    """tcp:127.0.0.1:PORT: a client gets hello, the intervals and end."""
    prog = build("phased.c")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    proc = subprocess.Popen(cli_command("-f", prog, "3", "4", "--no-dashboard", "--events", f"tcp:127.0.0.1:{port}"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        s = wait_for(lambda: try_connect(("127.0.0.1", port)) or proc.poll() is not None, 20,
                     f"the event server on port {port}", every=0.02)
        assert isinstance(s, socket.socket), f"phasescope ended before serving events: {proc.stderr.read()}"
        events = []
        read_events(s, events)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    kinds = [e["event"] for e in events]
    assert kinds[0] == "hello" and kinds[-1] == "end" and "interval" in kinds and "phase_change" in kinds


def test_stale_socket_replaced_and_other_files_refused(tmp_path):
    from phasescope.errors import InputError
    from phasescope.sinks.events import EventServer
    stale = str(tmp_path / "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(stale)
    s.close()  # the file stays, nobody listens: a run that died
    server = EventServer(f"unix:{stale}")
    server.close()
    assert not os.path.exists(stale)
    plain = tmp_path / "file"
    plain.write_text("keep")
    with pytest.raises(InputError, match="not a socket"):
        EventServer(f"unix:{plain}")
    assert plain.read_text() == "keep"
    live = EventServer(f"unix:{tmp_path / 'live.sock'}")
    try:
        with pytest.raises(InputError, match="in use"):
            EventServer(f"unix:{tmp_path / 'live.sock'}")
    finally:
        live.close()


def test_a_merge_is_announced_before_the_new_phase_it_made_room_for(tmp_path):
    """The default table folds its two closest phases when a new one needs room: policies hear
    ``phase_merge`` (the ID that is gone, the one that stays), and the summary keeps the history."""
    import numpy as np
    from phasescope.engine.interval import Interval
    from phasescope.engine.phase_engine import EngineConfig, PhaseEngine
    from phasescope.engine.tracker import PRESETS, TrackerConfig

    def iv(seq, keys):
        return Interval(1, seq, 800, np.array(keys, np.uint64), np.full(len(keys), 100, np.uint64))
    a1, a2 = list(range(1, 9)), list(range(1, 7)) + [1001, 1002]  # one quarter of the code differs
    b, c = list(range(2001, 2009)), list(range(3001, 3009))  # nothing in common
    engine = PhaseEngine(EngineConfig(TrackerConfig(**dict(PRESETS["coarse"], table_size=3))))
    server, got, reader = serve_synthetic(tmp_path)
    results = []
    for i, keys in enumerate([a1, a2, b, c]):
        r = engine.feed(iv(i, keys))
        results.append(r)
        server.on_interval(r, iv(i, keys))
    end_serving(server, reader)
    assert [r.phase for r in results] == [0, 1, 2, 3] and results[3].merged == (1, 0)
    kinds = [(e["event"], e.get("phase", e.get("from"))) for e in got if e["event"] in ("phase_merge", "phase_new")]
    assert kinds == [("phase_new", 0), ("phase_new", 1), ("phase_new", 2), ("phase_merge", 1), ("phase_new", 3)]
    assert [e for e in got if e["event"] == "phase_merge"][0]["into"] == 0
    phases = {p["phase"]: p for p in engine.summary()["phases"]}
    assert phases[1]["merged_into"] == 0 and phases[0]["merged_into"] is None and phases[1]["intervals"] == 1


def test_an_interval_event_carries_the_relabel_of_the_log(tmp_path):
    """The default tracker confirms a new phase on its second interval: that interval's event says,
    as its log record does, which earlier interval belongs to the new phase after all."""
    import numpy as np
    from phasescope.engine.interval import Interval
    from phasescope.engine.phase_engine import PhaseEngine

    def iv(seq, base):
        return Interval(1, seq, 800, np.arange(base, base + 8, dtype=np.uint64), np.full(8, 100, np.uint64))
    engine = PhaseEngine()
    server, got, reader = serve_synthetic(tmp_path)
    for i, base in enumerate([1, 1, 2001, 1, 2001]):  # A A B A B: B's first interval waits (labelled A)
        server.on_interval(engine.feed(iv(i, base)), iv(i, base))
    end_serving(server, reader)
    intervals = [e for e in got if e["event"] == "interval"]
    assert [e["phase"] for e in intervals] == [0, 0, 0, 0, 1]
    assert (intervals[4]["relabel"], intervals[4]["relabel_seq"]) == (1, [2])
    assert all("relabel" not in e for e in intervals[:4])
