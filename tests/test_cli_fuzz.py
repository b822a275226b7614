"""A CLI fuzz test (hypothesis) over every subcommand and option, and one over targets and outputs
that name them: no traceback, no exit code outside 0-3, a refusal in one line, and no changed input.
(Apart from test_cli_never_surprises.py so that the two files run on two workers.)"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import cli_command, end_process, loopback_http_server, wait_for
from test_cli_never_surprises import digest, write_log

pytestmark = pytest.mark.slow  # every test here starts a real process


# -- the fuzz test ------------------------------------------------------------------------------

NUMBERS = st.sampled_from(["0", "-1", "1", "3", "1000", "2147483648", "18446744073709551616", "1e400", "nan",
                           "inf", "-inf", "0.5", "abc", ""])
OPTIONS = {  # option -> kind of value (None: a flag)
    "--threshold": "n", "--table-size": "n", "--buckets": "n", "--bits": "n", "--interval": "n", "--noise-z": "n",
    "--stay": "n", "--confirm": "n", "--rle-entries": "n", "--gpht-depth": "n", "--segment-min": "n",
    "--segment-max": "n", "--segment-threshold": "n", "--tracker": "tracker", "--segment-mode": "segment",
    "--log": "out", "--summary": "out", "--phase-db": "out", "--events": "events", "--top": "n",
    "--adaptive": None, "--transition": None, "--full-precision": None,
}


LIVE = {"--mode": st.sampled_from(["exact", "sampled", "x"]), "--rate": NUMBERS, "--window": NUMBERS,
        "--duration": NUMBERS, "--status-every": NUMBERS, "--refresh": NUMBERS, "--events-queue": NUMBERS,
        "--locality-window": NUMBERS, "--locality-every": NUMBERS, "--locality-size": NUMBERS,
        "--stdio": st.sampled_from(["inherit", "pipe", "tty"]), "--interval": NUMBERS}
LIVE_FLAGS = ["--locality", "--kernel-samples", "--bursts", "--no-dashboard"]


@st.composite
def live_command_lines(draw, paths):
    """The live monitor on /bin/true (it ends at once), with generated option values."""
    args = ["--no-dashboard"]
    for opt in draw(st.lists(st.sampled_from(sorted(LIVE)), max_size=3, unique=True)):
        args += [opt, draw(LIVE[opt])]
    args += draw(st.lists(st.sampled_from(LIVE_FLAGS), max_size=2, unique=True))
    for opt in draw(st.lists(st.sampled_from(["--log", "--summary", "--bbv", "-o"]), max_size=2, unique=True)):
        args += [opt, draw(st.sampled_from([paths["out"], paths["out2"], paths["log"], paths["dir"]]))]
    return args + ["-f", "/bin/true"]


@st.composite
def command_lines(draw, paths):
    sub = draw(st.sampled_from(["replay", "export-bbv", "score", "reference", "plot", "live"]))
    if sub == "live":
        return draw(live_command_lines(paths))
    args = [sub, draw(st.sampled_from([paths["log"], paths["sampled"], paths["dir"], paths["missing"]]))]
    if sub == "export-bbv":
        args.append(draw(st.sampled_from([paths["out"], paths["log"], paths["dir"], paths["readonly_dir"] + "/x"])))
    if sub == "score":
        args += ["--reference", draw(st.sampled_from(["auto", paths["log"], paths["missing"]]))]
    if sub in ("plot", "reference"):
        args += ["-o", draw(st.sampled_from([paths["png"], paths["log"], paths["dir"], paths["out"] + ".xyz"]))]
    for opt in draw(st.lists(st.sampled_from(sorted(OPTIONS)), max_size=3, unique=True)):
        if sub not in ("replay", "plot") and opt not in ("--interval",):
            continue
        kind = OPTIONS[opt]
        values = {"n": NUMBERS, "tracker": st.sampled_from(["paper", "default", "sampled", "x"]),
                  "segment": st.sampled_from(["fixed", "variable", "qphase"]),
                  "out": st.sampled_from([paths["out"], paths["out2"], paths["log"], paths["dir"],
                                          paths["readonly_dir"] + "/x"]),
                  "events": st.sampled_from(["tcp:127.0.0.1:0", "unix:" + paths["dir"], "tcp:8.8.8.8:9",
                                             "unix:" + paths["log"], "bogus"])}
        args += [opt] if kind is None else [opt, draw(values[kind])]
    return [str(a) for a in args]


@pytest.fixture(scope="module")
def fuzz_paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    ro = d / "readonly"
    ro.mkdir()
    paths = {"log": str(write_log(d / "run.jsonl")), "sampled": str(write_log(d / "s.jsonl", sampled=True)),
             "dir": str(d / "adir"), "missing": str(d / "missing.jsonl"), "out": str(d / "out.json"),
             "out2": str(d / "out2.json"), "png": str(d / "p.png"), "readonly_dir": str(ro)}
    os.mkdir(paths["dir"])
    ro.chmod(0o555)
    return paths


#: examples of the subcommand fuzz test: the live monitor's start phasescope (about a second), the
#: others run in this process; 30 in CI, PHASESCOPE_FUZZ_EXAMPLES=300 to look hard
COMMAND_EXAMPLES = int(os.environ.get("PHASESCOPE_FUZZ_EXAMPLES", "30"))


def run_in_process(argv, capsys):
    """``phasescope ARGV`` called in this process (a subcommand on files: no target to start), as
    ``(exit code, stderr)``; an exception that escapes main() fails the test as a traceback would."""
    from phasescope.cli import main
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    return code, capsys.readouterr().err


@settings(max_examples=COMMAND_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_every_subcommand_ends_in_a_known_way(fuzz_paths, capsys, data):
    argv = data.draw(command_lines(fuzz_paths))
    live = argv[0] == "--no-dashboard"
    named = ([] if live else [argv[1]]) + [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--reference"]
    inputs = {p: digest(p) for p in named if os.path.isfile(p)}  # this command line's inputs
    if live:  # a real target: a process of its own
        r = subprocess.run(cli_command(*argv), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        code, err = r.returncode, r.stderr
    else:  # a subcommand on files, in this process: the same code path without ~0.5 s of start-up
        code, err = run_in_process(argv, capsys)
    assert code in (0, 1, 2, 3), (argv, code, err[-2000:])
    assert "Traceback" not in err, (argv, err[-3000:])
    if code == 2:
        assert len(err.strip().splitlines()) == 1, (argv, err)
    assert {p: digest(p) for p in inputs} == inputs, argv
    for p in (fuzz_paths["log"], fuzz_paths["sampled"]):  # an output elsewhere may have replaced it
        if p not in inputs:
            write_log(p, sampled=p == fuzz_paths["sampled"])


# -- the fuzz test of targets (issue 26): what is traced, and outputs that name it ---------------

#: examples of the target fuzz test: small in CI, PHASESCOPE_FUZZ_EXAMPLES=300 to look hard
TARGET_EXAMPLES = int(os.environ.get("PHASESCOPE_FUZZ_EXAMPLES", "12"))


@pytest.fixture(scope="module")
def fuzz_targets(tmp_path_factory, build):
    """Programs and processes to aim at, each named: a compiled program (its copy is also named as
    an output), a shell script, a text file, an empty file, a static binary, a kernel thread, a
    stopped and a zombie process, and a loopback HTTP server posing as a frida-server."""
    from conftest import PROGRAMS
    d = tmp_path_factory.mktemp("targets")
    prog = d / "prog"
    prog.write_bytes(open(build("counted.c"), "rb").read())
    script, text, empty, static = d / "script.sh", d / "notes.txt", d / "empty", d / "static"
    script.write_text("#!/bin/sh\necho hi\n")
    text.write_text("hello\n")
    empty.write_text("")
    subprocess.run(["cc", "-static", "-O1", "-o", str(static), str(PROGRAMS / "counted.c")], check=True,
                   capture_output=True)
    (d / "originals").mkdir()
    for p in (prog, script, text, empty, static):
        p.chmod(0o755)
        shutil.copy(p, d / "originals" / p.name)
    stopped = subprocess.Popen(["sleep", "600"])
    os.kill(stopped.pid, 19)  # SIGSTOP
    zombie = subprocess.Popen(["true"])
    wait_for(lambda: "Z" in open(f"/proc/{zombie.pid}/stat").read().split()[2], 10, "a zombie")
    try:
        with loopback_http_server() as port:
            yield {"files": {"prog": str(prog), "script": str(script), "text": str(text), "empty": str(empty),
                             "static": str(static)},
                   "pids": {"kernel thread": "2", "stopped": str(stopped.pid), "zombie": str(zombie.pid),
                            "init": "1", "none": "4194303"},
                   "host": f"127.0.0.1:{port}", "dir": str(d)}
    finally:
        end_process(stopped)
        zombie.wait()


@st.composite
def target_command_lines(draw, targets):
    files, pids = targets["files"], targets["pids"]
    args = ["--no-dashboard", "--duration", "2"]
    args += ["--mode", draw(st.sampled_from(["exact", "sampled"]))]
    if draw(st.booleans()):
        args += ["-H", draw(st.sampled_from([targets["host"], "127.0.0.1:1"]))]
    for opt in draw(st.lists(st.sampled_from(["-o", "--log", "--summary", "--bbv", "--phase-db", "--events"]),
                             max_size=2, unique=True)):
        path = draw(st.sampled_from(list(files.values()) + [targets["dir"] + "/out"]))
        args += [opt, ("unix:" + path) if opt == "--events" else path]
    if draw(st.booleans()):
        args += ["-f", draw(st.sampled_from(sorted(files.values()))), "1"]
    else:
        args += ["-p", draw(st.sampled_from(sorted(pids.values())))]
    return args


@pytest.mark.slow
@settings(max_examples=TARGET_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_targets_and_outputs_that_name_them(fuzz_targets, data):
    argv = data.draw(target_command_lines(fuzz_targets))
    files = fuzz_targets["files"]
    before = {p: digest(p) for p in files.values()}
    r = subprocess.run(cli_command(*argv), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode in (0, 1, 2, 3), (argv, r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, (argv, r.stderr[-3000:])
    if r.returncode == 2:
        assert len(r.stderr.strip().splitlines()) == 1, (argv, r.stderr)
    target = argv[argv.index("-f") + 1] if "-f" in argv else None
    changed = [p for p in files.values() if digest(p) != before[p]]
    for p in changed:  # an output naming a file that is no input of this run may replace it: restore it
        shutil.copy(os.path.join(fuzz_targets["dir"], "originals", os.path.basename(p)), p)
    assert target not in changed, argv  # the program traced is never written over
    for stale in ("out", "out.json"):
        try:
            os.unlink(os.path.join(fuzz_targets["dir"], stale))
        except FileNotFoundError:
            pass
