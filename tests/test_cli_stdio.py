"""A tracer changes nothing it traces: the target's stdout is byte-identical to an untraced run,
it reads its stdin through phasescope, and phasescope reads its options anywhere on the line as
frida-tools does (the target's arguments are positionals, after -- when they start with a dash)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess

import pytest

from conftest import cli_command, read_records

pytestmark = pytest.mark.slow  # every test here starts a real process


def _data(tmp_path, words: int = 250_000):
    """Compressible but not trivial input: 2 MB of text (by default) with a pseudo-random stream in it."""
    path = tmp_path / "input.txt"
    rng = __import__("random").Random(7)
    vocabulary = ["phase", "interval", "stalker", "footprint", "markov", "bucket", "thread", "0x7f3a"]
    path.write_text(" ".join(rng.choice(vocabulary) + str(rng.randrange(1000)) for _ in range(words)))
    return path


def _traced(*args, stdin=subprocess.DEVNULL):
    return subprocess.run(cli_command("--no-dashboard", *args), stdin=stdin, capture_output=True, timeout=180)


@pytest.mark.parametrize("program", ["gzip", "bzip2", "xz"])
def test_binary_stdout_is_byte_identical(tmp_path, program):
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")
    data = _data(tmp_path, words=60_000)  # 0.5 MB: xz's traced run took 26 s of a loaded suite at 2 MB
    native = subprocess.run([program, "-c", str(data)], capture_output=True, check=True, timeout=300).stdout
    r = _traced("-f", program, "--", "-c", str(data))
    assert r.returncode == 0, r.stderr
    assert r.stdout == native  # phasescope's own lines went to stderr
    assert b"exited with code 0" in r.stderr


def test_stdin_through_a_pipe(tmp_path):
    data = _data(tmp_path).read_bytes() + bytes(range(256))
    r = _traced("-f", "/bin/cat", stdin=open(tmp_path / "input.txt", "rb"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == data[:-256]
    proc = subprocess.Popen(cli_command("--no-dashboard", "-f", "gzip", "--", "-c"), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(data, timeout=180)
    assert proc.returncode == 0, err
    assert subprocess.run(["gzip", "-dc"], input=out, capture_output=True, check=True, timeout=300).stdout == data


def test_options_after_the_target_are_phasescope_s(tmp_path):
    log = tmp_path / "run.jsonl"
    r = _traced("-f", "/bin/echo", "first", "second", "--log", str(log), "--interval", "100000")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"first second\n"  # --log was not handed to the program
    records = read_records(log)
    assert records and sum(rec["instructions"] for rec in records) > 0


def test_dash_arguments_after_double_dash_go_to_the_target(tmp_path):
    log = tmp_path / "run.jsonl"
    r = _traced("--log", str(log), "-f", "/bin/echo", "--", "-n", "--log", "x")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"--log x"  # echo took -n; the arguments after -- were the target's
    assert log.exists() and log.read_text()


def test_output_option_takes_phasescope_s_lines(tmp_path):
    report = tmp_path / "report.txt"
    r = _traced("-o", str(report), "-f", "/bin/echo", "hello")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello\n" and r.stderr == b""
    text = report.read_text()
    assert "start -> P0 (new)" in text and text.rstrip().endswith("exited with code 0")
    assert os.path.getsize(report) > 0


def test_pipe_mode_gives_the_target_our_stdin_to_the_end_and_keeps_stderr_apart(tmp_path):
    """The dashboard's default stdio (pipe): sqlite3 and xz read stdin to end of file; their
    stdout is byte-identical to an untraced run, and their stderr stays stderr."""
    script = tmp_path / "q.sql"
    script.write_text("create table t(a);\ninsert into t values (1),(2),(3);\nselect sum(a), count(*) from t;\n"
                      "select 'done';\nselect nosuchfunction(1);\n")
    for argv, data in ((["sqlite3", ":memory:"], script.read_bytes()), (["xz", "-c"], os.urandom(1 << 20))):
        if shutil.which(argv[0]) is None:
            continue
        native = subprocess.run(argv, input=data, capture_output=True, timeout=300)
        r = subprocess.run(cli_command("--stdio", "pipe", "--no-dashboard", "-f", argv[0], "--", *argv[1:]),
                           input=data, capture_output=True, timeout=120)
        assert r.returncode == native.returncode, r.stderr[-2000:]
        assert r.stdout == native.stdout
        if native.stderr:
            assert native.stderr in r.stderr and native.stderr not in r.stdout


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_a_closed_pipe_on_phasescope_own_lines_does_not_end_the_run(build, tmp_path, mode):
    """``phasescope ... 2>&1 >out | head -1``: phasescope's lines have lost their reader, but the
    run goes on: before stop 45 it detached at the next line (exit 0, the log cut short)."""
    summary, log = tmp_path / "s.json", tmp_path / "run.jsonl"
    proc = subprocess.Popen(cli_command("--no-dashboard", "--mode", mode, "--status-every", "0.05", "--summary",
                                        str(summary), "--log", str(log), "-f", build("phased.c"), "12", "2"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    proc.stderr.readline()  # the first line: tracing has started
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0
    end = json.loads(summary.read_text())["end"]
    assert end["how"] == "exited" and end["code"] == 0, end
    assert len(read_records(log)) > 0


def _ignored(status: bytes) -> int:
    """The SigIgn mask of a ``grep SigIgn /proc/self/status`` run's output."""
    return int(status.split()[1], 16)


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_the_spawned_program_does_not_inherit_python_s_ignored_sigpipe(mode):
    """A spawned program gets SIGPIPE and SIGXFSZ at their defaults, as a shell gives them:
    sampled mode forked it from python3, which ignores both, so ``phasescope --mode sampled -f
    seq 1 1e9 | head -1`` ran seq to its end (EPIPE on every write, no SIGPIPE), where natively
    the first write after head left killed it."""
    argv = ["grep", "SigIgn", "/proc/self/status"]
    native = subprocess.run(argv, capture_output=True, check=True, timeout=60).stdout
    r = _traced("--mode", mode, "-f", *argv)
    assert r.returncode == 0, r.stderr
    dropped = (1 << (signal.SIGPIPE - 1)) | (1 << (signal.SIGXFSZ - 1))
    assert not _ignored(native) & dropped  # subprocess restores both, as a shell has them
    assert _ignored(r.stdout) & dropped == _ignored(native) & dropped, r.stdout
