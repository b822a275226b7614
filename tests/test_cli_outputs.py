"""Every output option means the same in every command: ``-`` is standard output only where
phasescope writes nothing else there, and is refused (one line, exit 2, no file named ``-``)
elsewhere; a file written once is written whole (a failure midway keeps the old one); a write that
fails is one line and exit 1 (issue: stop 46, h46d)."""

from __future__ import annotations

import json
import os
import resource
import subprocess

import pytest

from conftest import cli_command, run_cli, synthetic_log
from phasescope.cli import main

#: (argv, the output given "-"): each must be refused, since standard output carries something else
REFUSED = [(["-f", "/bin/true", option, "-"], option)
           for option in ("-o", "--log", "--summary", "--bbv", "--events", "--phase-db", "--profile")] + [
    (["replay", "{log}", option, "-"], option) for option in ("--log", "--summary", "--profile", "--phase-db")] + [
    (["plot", "{log}", "-o", "-"], "-o"),
    (["profile", "{log}", "--diff", "0", "1", "-o", "-"], "-o"),
    (["locality-model", "{log}", "--plot", "-"], "--plot"),
]


@pytest.mark.parametrize("argv, option", REFUSED, ids=[" ".join(a[:1] + a[2:]) for a, _ in REFUSED])
def test_a_dash_where_standard_output_is_taken_is_refused_not_a_file_named_dash(tmp_path, monkeypatch, capsys,
                                                                                 argv, option):
    """``--log -`` wrote a file named ``-`` (stop 45); a run that starts a process here fails the
    fast lane's guard, so the refusal must come before anything runs."""
    monkeypatch.chdir(tmp_path)
    log = synthetic_log(tmp_path / "run.jsonl")
    assert main([a.format(log=log) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{option} -: " in err, err
    assert not (tmp_path / "-").exists()


@pytest.mark.slow
@pytest.mark.parametrize("argv, compare", [
    (["reference", "{log}", "-o", "-"], ["reference", "{log}", "-o", "{file}"]),
    (["export-bbv", "{log}", "-"], ["export-bbv", "{log}", "{file}"]),
    (["export-bbv", "{log}", "{file}.bb", "--pc-out-file", "-"], ["export-bbv", "{log}", "{file}.bb", "--pc-out-file", "{file}"]),
    (["profile", "{log}", "--format", "folded", "-o", "-"], ["profile", "{log}", "-o", "{file}.folded"]),
])
def test_a_dash_is_standard_output_where_nothing_else_is_written_there(tmp_path, argv, compare):
    log = synthetic_log(tmp_path / "run.jsonl")
    file = tmp_path / "out"
    r = run_cli(*[a.format(log=log, file=file) for a in argv], timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "-").exists()
    want = run_cli(*[a.format(log=log, file=file) for a in compare], timeout=120, cwd=tmp_path)
    assert want.returncode == 0, want.stderr
    written = file.with_suffix(".folded") if argv[0] == "profile" else file
    assert r.stdout and r.stdout == written.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["reference", "{log}", "-o", "-"], ["export-bbv", "{log}", "-"]])
@pytest.mark.parametrize("append", [False, True], ids=["after-a-header", "appended"])
def test_standard_output_is_written_where_the_shell_left_it(tmp_path, argv, append):
    """``{ echo header; phasescope reference LOG -o -; } > FILE`` and ``>> FILE``: a reopening of
    /dev/stdout truncated FILE, losing what was there."""
    log = synthetic_log(tmp_path / "run.jsonl")
    out = tmp_path / "out.txt"
    out.write_text("header\n")
    with open(out, "a" if append else "r+") as f:
        f.seek(0, os.SEEK_END)
        r = subprocess.run(cli_command(*[a.format(log=log) for a in argv]), stdout=f, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.startswith("header\n") and len(text.splitlines()) > 2, text[:200]


def _limited(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.slow
@pytest.mark.parametrize("argv, name", [(["reference", "{log}", "-o", "{out}"], "labels.txt"),
                                        (["plot", "{log}", "-o", "{out}"], "run.png"),
                                        (["profile", "{log}", "-o", "{out}"], "run.pb.gz")])
def test_a_write_that_fails_midway_keeps_the_old_file_and_is_exit_1(tmp_path, argv, name):
    """Past a file size limit (as a Ctrl-C or a full disk midway): ``reference`` and ``plot`` wrote
    in place, so the old file was lost and half a new one left, with exit 2 (bad input)."""
    if argv[0] == "plot":
        pytest.importorskip("matplotlib")
    log = synthetic_log(tmp_path / "run.jsonl")
    out = tmp_path / name
    out.write_bytes(b"old\n")
    r = subprocess.run(cli_command(*[a.format(log=log, out=out) for a in argv]), capture_output=True, text=True,
                       timeout=120, preexec_fn=_limited(64))
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip().splitlines() == [f"phasescope {argv[0]}: error: {out}: cannot write: File too large"]
    assert out.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["run.jsonl", name])  # no temporary file left


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["reference", "{log}", "-o", "/dev/full"],
                                  ["profile", "{log}", "--format", "pprof", "-o", "/dev/full"]])
def test_a_full_device_is_exit_1_with_one_line_as_every_output(tmp_path, argv):
    """``reference -o /dev/full`` was exit 2 (bad input), ``profile`` named no file."""
    r = run_cli(*[a.format(log=synthetic_log(tmp_path / "run.jsonl")) for a in argv], timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [f"phasescope {argv[0]}: error: /dev/full: cannot write: "
                                             "No space left on device"]


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["export-bbv", "{log}", "{out}"], ["reference", "{log}", "-o", "{out}"],
                                  ["profile", "{log}", "-o", "{out}.folded"]])
def test_a_dash_as_the_input_is_standard_input(tmp_path, argv):
    """``export-bbv - out.bb < run.jsonl`` read a file named ``-`` (no such file, exit 2)."""
    log = synthetic_log(tmp_path / "run.jsonl")
    out = tmp_path / "out"
    want = run_cli(*[a.format(log=log, out=out) for a in argv], timeout=120)
    assert want.returncode == 0, want.stderr
    wanted = out.with_suffix(".folded") if argv[0] == "profile" else out
    expected = wanted.read_text()
    wanted.unlink()
    with open(log) as stdin:
        r = run_cli(*[a.format(log="-", out=out) for a in argv], timeout=120, stdin=stdin)
    assert r.returncode == 0, r.stderr
    assert wanted.read_text() == expected


def test_two_inputs_cannot_both_be_standard_input(capsys):
    assert main(["replay", "-", "--pc-out-file", "-"]) == 2
    assert "FILE and --pc-out-file are both - (standard input)" in capsys.readouterr().err


@pytest.mark.parametrize("reference", ["labels", "log"])
def test_a_reference_through_a_pipe_is_refused_not_read_from_its_middle(tmp_path, capsys, reference):
    """``score LOG --reference - < pipe``: the first open read the pipe's first chunk to see its
    format, the second read the rest: a SimPoint labels file was "no labels", a log a record cut
    in the middle ("not a JSON record")."""
    log = synthetic_log(tmp_path / "run.jsonl")
    text = open(log).read() if reference == "log" else "".join(f"{i % 2} 0\n" for i in range(60))
    r, w = os.pipe()
    os.write(w, text.encode())  # within a pipe's buffer
    os.close(w)
    saved = os.dup(0)
    os.dup2(r, 0)
    try:
        assert main(["score", log, "--reference", "-"]) == 2
    finally:
        os.dup2(saved, 0)
        os.close(saved), os.close(r)
    assert capsys.readouterr().err.strip().splitlines() == [
        "phasescope score: error: - (standard input): a pipe; its format is read from its first line before the whole is "
        "read: give a file"]


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["export-bbv", "{log}", "-"], ["reference", "{log}", "-o", "-"],
                                  ["profile", "{log}", "--format", "folded", "-o", "-"]])
def test_a_dash_whose_reader_has_gone_is_a_quiet_end_as_for_every_report(tmp_path, argv):
    """``export-bbv run.jsonl - | head -1``: the reader that has all it wanted was "error:
    /dev/stdout: cannot write: Broken pipe", exit 1, where ``replay run.jsonl | head -1`` ends
    quietly, exit 0 (docs/reference.md, exit codes)."""
    log = synthetic_log(tmp_path / "run.jsonl")
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first write
    try:
        p = subprocess.run(cli_command(*[a.format(log=log) for a in argv]), stdout=w, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    finally:
        os.close(w)
    assert (p.returncode, p.stderr) == (0, "")


def _with_fd(fd: int, path: str, flags: int, argv) -> int:
    """``main(argv)`` with file descriptor ``fd`` opened on ``path`` (``> /dev/full``, ``>> LOG``)."""
    saved, f = os.dup(fd), os.open(path, flags)
    os.dup2(f, fd)
    os.close(f)
    try:
        return main(argv)
    finally:
        os.dup2(saved, fd)
        os.close(saved)


@pytest.mark.parametrize("case", ["full", "input", "stdin"])
def test_messages_name_a_dash_as_the_user_typed_it_not_dev_stdout(tmp_path, capsys, case):
    """``export-bbv LOG - > /dev/full`` said "/dev/stdout: cannot write", ``export-bbv LOG - >> LOG``
    "OUT.bb /dev/stdout is the input LOG", ``replay - < /dev/null`` "/dev/stdin: empty input": the
    user wrote ``-`` (stop 47)."""
    log = synthetic_log(tmp_path / "run.jsonl")
    if case == "stdin":
        assert _with_fd(0, os.devnull, os.O_RDONLY, ["replay", "-"]) == 2
        want = "- (standard input): empty input"
    else:
        path, flags = ("/dev/full", os.O_WRONLY) if case == "full" else (log, os.O_WRONLY | os.O_APPEND)
        assert _with_fd(1, path, flags, ["export-bbv", log, "-"]) == (1 if case == "full" else 2)
        want = "- (standard output)" + (": cannot write" if case == "full" else " is the input LOG")
    err = capsys.readouterr().err
    assert want in err and "/dev/std" not in err, err


def test_a_summary_records_an_input_dash_as_typed(tmp_path):
    """``replay - --summary S < LOG`` recorded ``input.path`` ``/dev/stdin``, a path the user never
    wrote and that names nothing once the run is over (stop 47)."""
    log, summary = synthetic_log(tmp_path / "run.jsonl"), tmp_path / "s.json"
    assert _with_fd(0, log, os.O_RDONLY, ["replay", "-", "--format", "log", "--summary", str(summary)]) == 0
    assert json.loads(summary.read_text())["input"]["path"] == "-"


def test_a_log_cut_short_is_said_once_where_a_command_reads_it_twice(tmp_path, capsys):
    """``score CUT --reference CUT`` (and ``plot CUT``) read the log twice and said the cut-short
    last line twice (stop 47)."""
    log = synthetic_log(tmp_path / "run.jsonl")
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(open(log, "rb").read()[:-40])
    assert main(["score", str(cut), "--reference", str(cut)]) == 0
    assert capsys.readouterr().err.count("the last line is cut short") == 1


@pytest.mark.parametrize("output", ["d.folded", "run.base.pb.gz"])
def test_profile_diff_refuses_its_output_before_it_prints_the_table(tmp_path, monkeypatch, capsys, output):
    """``profile LOG --diff 0 1 -o d.folded`` printed the comparison, then refused -o (stop 47)."""
    monkeypatch.chdir(tmp_path)
    synthetic_log(tmp_path / "run.base.pb.gz")  # the log is where -o's base would go
    target = "run.pb.gz" if output == "run.base.pb.gz" else output
    assert main(["profile", "run.base.pb.gz", "--diff", "0", "1", "-o", target]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, (out, err)


KERNEL_FILES = [(["-f", "/bin/true", "--log", "/proc/self/status"], "--log"),
                (["replay", "{log}", "--log", "/proc/self/comm"], "--log"),
                (["replay", "{log}", "--profile", "/sys/kernel/mm/transparent_hugepage/enabled"], "--profile")]


@pytest.mark.parametrize("argv, option", [k for k in KERNEL_FILES if k[1]], ids=lambda v: str(v))
def test_a_file_of_proc_or_sys_is_refused_before_the_target_runs(tmp_path, monkeypatch, capsys, argv, option):
    """``--log /proc/self/status`` opened, and its first write failed (EINVAL) after the target had
    started: the trace stopped after one interval and the run ended in exit 1 (stop 47). A run that
    starts a process here fails the fast lane's guard, so the refusal comes before anything runs."""
    path = argv[-1]
    if not os.path.exists(path):
        pytest.skip(f"{path} is not on this machine")
    log = synthetic_log(tmp_path / "run.jsonl")
    assert main([a.format(log=log) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{option} {path}: a file of the kernel's /proc or /sys" in err, err


@pytest.mark.parametrize("argv", [["replay", "/dev/zero"], ["replay", "/dev/zero", "--format", "log"],
                                  ["export-bbv", "/dev/zero", "{out}"], ["score", "/dev/zero", "--reference", "auto"]])
def test_an_input_of_no_lines_is_refused_not_read_into_memory(tmp_path, monkeypatch, capsys, argv):
    """``replay /dev/zero`` read one endless line until the machine killed phasescope (exit 137)."""
    from phasescope.formats import lines
    monkeypatch.setattr(lines, "LONGEST_LINE", 1 << 20)
    assert main([a.format(out=tmp_path / "o.bb") for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("/dev/zero:1: a line longer than 1 MiB: not a file phasescope wrote"), err
