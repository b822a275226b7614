"""Bad input on every entry point: options, pids, names and replay files give one line on stderr and
exit 2; the replay parsers, fuzzed with hypothesis, either yield intervals or raise InputError."""

from __future__ import annotations

import json
import os
import threading

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import run_cli
from phasescope.formats.bbv import parse_line, read_bb, read_pc_map
from phasescope.errors import InputError
from phasescope.formats.log import parse_record, read_log

GOOD = {"seq": 0, "thread": 7, "thread_seq": 0, "instructions": 30, "partial": False,
        "blocks": [[4096, 10], [8192, 20]]}


def one_line_error(r, exit_code=2):
    assert r.returncode == exit_code, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["-p", "abc"], "invalid int value"),
    (["-p", "-5"], "no such process"),
    (["-p", "0"], "no such process"),
    (["-p", "4194305"], "no such process"),             # above pid_max
    (["-n", ""], "no process named"),
    (["-n", "a\nb"], "no process named"),
    (["-p", "1", "-n", "x"], "exactly one target"),
    (["--interval", "12x", "-f", "/bin/true"], "invalid int value"),
    (["--interval", "999", "-f", "/bin/true"], "interval"),
    (["--duration", "nan", "-f", "/bin/true"], "--duration"),
    (["--duration", "-inf", "-f", "/bin/true"], "--duration"),
    (["--duration", "inf", "-f", "/bin/true"], "--duration must be a positive, finite number"),  # was "positive (got inf)"
    (["--duration", "1e400", "-f", "/bin/true"], "--duration must be a positive, finite number"),
    (["--status-every", "nan", "-f", "/bin/true"], "--status-every"),
    (["--refresh", "0", "-f", "/bin/true"], "--refresh"),
    (["--threshold", "nan", "-f", "/bin/true"], "threshold"),
    (["--bogus"], "unrecognized arguments"),
    (["-f"], "argument -f/--file: expected one argument"),
    (["-f", "/bin/echo", "--bogus"], "put -- before a spawned program's arguments"),
    (["-p", "1", "stray"], "only a program spawned with -f takes arguments"),
    (["-f", "/tmp"], "not executable"),
    (["-f", "no-such-program-xyz"], "no such program"),
    (["-D", "no-such-device", "-f", "/bin/true"], "no such device"),
])
def test_live_options(args, message):
    assert message in one_line_error(run_cli("--no-dashboard", *args, timeout=60))


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    good = json.dumps(GOOD)
    files = {
        "empty.jsonl": b"",
        "blank.jsonl": b"\n\n  \n",
        "garbage.bin": bytes(range(256)) * 8,
        "nul.jsonl": b"\x00\x01\x02\n",
        "latin1.jsonl": b"{\"thread\": \"\xe9\"}\n",
        "truncated.jsonl": (good + "\n" + good[:40] + "\n").encode(),  # a cut record, not the last line
        "notobject.jsonl": b"{\"a\": 1}\n[1, 2]\n",
        "badfield.jsonl": json.dumps(dict(GOOD, thread=-1)).encode() + b"\n",
        "badblocks.jsonl": json.dumps(dict(GOOD, blocks=[[1, 2, 3]])).encode() + b"\n",
        "hugekey.jsonl": json.dumps(dict(GOOD, blocks=[[2 ** 64, 1]])).encode() + b"\n",
        "hugeline.jsonl": (good[:-1] + ', "pad": "' + "x" * (8 << 20) + '"}\n' + good[:30] + "\n").encode(),
        "bad.bb": b"T:1:2 :3:x\n",
        "bb-then-garbage.bb": b"T:1:2\n\xff\xfe\n",
        "bighuge.bb": b"T:1:" + b"9" * 25 + b"\n",
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


@pytest.mark.slow
@pytest.mark.parametrize("name, message", [
    ("empty.jsonl", "empty input"),
    ("blank.jsonl", "empty input"),
    ("garbage.bin", "neither a phasescope log record nor a .bb interval"),
    ("nul.jsonl", "neither"),
    ("latin1.jsonl", "not UTF-8"),
    ("truncated.jsonl", "truncated.jsonl:2: not a JSON record"),
    ("notobject.jsonl", "missing field"),
    ("badfield.jsonl", "'thread' must be a non-negative integer"),
    ("badblocks.jsonl", "'blocks' must be a list"),
    ("hugekey.jsonl", "'blocks' must be a list"),
    ("hugeline.jsonl", "hugeline.jsonl:2: not a JSON record"),
    ("bad.bb", "malformed interval"),
    ("bb-then-garbage.bb", "bb-then-garbage.bb:2"),
    ("bighuge.bb", "malformed interval"),
])
def test_replay_bad_files(bad_files, name, message):
    line = one_line_error(run_cli("replay", str(bad_files / name), timeout=60))
    assert message in line and len(line) < 400, line  # one short line, even for a huge input line


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["/nonexistent.jsonl"], "cannot read"),
    (["/"], "cannot read"),
    (["--format", "xx", "f"], "invalid choice"),
    (["--top", "-1", "f"], "--top"),
    (["--interval", "0", "f"], "interval"),
    (["--format", "log", "--pc-out-file", "/x", "{good}"], "--pc-out-file applies to .bb"),
    (["--pc-out-file", "/nonexistent", "{bb}"], "cannot read"),
])
def test_replay_bad_options(tmp_path, args, message):
    (tmp_path / "good.jsonl").write_text(json.dumps(GOOD) + "\n")
    (tmp_path / "good.bb").write_text("T:1:5 :2:7\n")
    args = [a.format(good=tmp_path / "good.jsonl", bb=tmp_path / "good.bb") for a in args]
    assert message in one_line_error(run_cli("replay", *args, timeout=60))


@pytest.mark.slow
def test_replay_huge_valid_lines(tmp_path):
    """Very large but valid records (300k blocks per interval) replay fine."""
    log = tmp_path / "huge.jsonl"
    rec = dict(GOOD, blocks=[[i * 16, 1] for i in range(300_000)], instructions=300_000)
    log.write_text(json.dumps(rec) + "\n" + json.dumps(dict(rec, thread_seq=1)) + "\n")
    bb = tmp_path / "huge.bb"
    bb.write_text("T" + "".join(f":{i}:1 " for i in range(1, 300_000)) + "\n")
    for path in (log, bb):
        r = run_cli("replay", str(path), timeout=120)
        assert r.returncode == 0, r.stderr


# -- fuzzing the parsers -----------------------------------------------------------------------

def _drain(iterator):
    n = 0
    for iv in iterator:
        assert len(iv.keys) == len(iv.counts)
        n += 1
    return n


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20)


@st.composite
def mutated_records(draw):
    rec = dict(GOOD)
    for key in draw(st.lists(st.sampled_from(sorted(GOOD) + ["os", "start_ns", "end_ns"]), max_size=3)):
        if draw(st.booleans()):
            rec.pop(key, None)
        else:
            rec[key] = draw(json_values)
    return json.dumps(rec)


@settings(max_examples=300, deadline=None)
@given(st.one_of(mutated_records(), st.text(max_size=200)))
def test_fuzz_parse_record(line):
    try:
        iv = parse_record(line, "f:1")
    except InputError as e:
        assert str(e).startswith("f:1: ") and "\n" not in str(e)
        return
    assert iv.thread >= 0 and iv.seq >= 0 and len(iv.keys) == len(iv.counts)


bb_text = st.text(alphabet="T:0123456789 #\n\t-x", max_size=120)


@settings(max_examples=300, deadline=None)
@given(bb_text)
def test_fuzz_parse_bb_line(text):
    text = text.strip()
    if not text:
        return
    try:
        ids, counts = parse_line(text, "f:1")
    except InputError as e:
        assert str(e).startswith("f:1: ") and "\n" not in str(e)
        return
    assert len(ids) == len(counts) >= 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400), kind=st.sampled_from(["log", "bb", "pc"]))
def test_fuzz_whole_files(tmp_path, data, kind):
    """Arbitrary bytes as a whole file: intervals or one InputError, never another exception."""
    path = tmp_path / f"fuzz.{kind}"
    path.write_bytes(data)
    try:
        if kind == "log":
            _drain(read_log(str(path)))
        elif kind == "bb":
            _drain(read_bb(str(path)))
        else:
            read_pc_map(str(path))
    except InputError as e:
        assert "\n" not in str(e)
    finally:
        os.unlink(path)



@pytest.mark.parametrize("argv", [["replay"], ["reference", "-o", "labels.txt"], ["plot", "-o", "p.png"]])
def test_a_pipe_read_more_than_once_is_one_line(tmp_path, monkeypatch, capsys, argv):
    # `replay <(zcat run.jsonl.gz)`: the format was told from the first line, and the second open of
    # the pipe started after it, so a good log was refused as "not a JSON record" (plot likewise).
    from phasescope.cli import main
    monkeypatch.chdir(tmp_path)
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR)  # the pipe's writer (an open never blocks), good records waiting
    os.write(fd, (json.dumps(GOOD) + "\n").encode() * 3)
    closed = []
    writer_ends = threading.Timer(5, lambda: closed.append(os.close(fd)))  # a reader left waiting gets EOF
    writer_ends.start()
    try:
        code = main([argv[0], str(fifo)] + argv[1:])
    except SystemExit as e:
        code = e.code
    finally:
        writer_ends.cancel()
        writer_ends.join()
        if not closed:
            os.close(fd)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"{fifo}: a pipe" in err, (code, err)
    assert not os.path.exists(tmp_path / "p.png") and not os.path.exists(tmp_path / "labels.txt")
