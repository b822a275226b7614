"""What phasescope refuses, through the real CLI: one line on stderr, exit 2, and nothing written,
spawned or harmed. Outputs that name the traced program; targets Frida cannot inject into
(scripts, text and empty files, static binaries, kernel threads); a -H service that is no
frida-server; bad -a filters; a log with no record; and a closed stdout pipe, which ends quietly."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PROGRAMS, cli_command, end_process, loopback_http_server, run_cli

pytestmark = pytest.mark.slow


def one_line_refusal(r: subprocess.CompletedProcess, *words: str) -> str:
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def victim(build, tmp_path):
    """A copy of a compiled program, to be named as an output."""
    exe = tmp_path / "victim"
    shutil.copy(build("counted.c"), exe)
    return exe


@pytest.mark.parametrize("mode", ["exact", "sampled"])
@pytest.mark.parametrize("option", ["-o", "--log", "--summary", "--bbv", "--events", "--phase-db"])
def test_an_output_naming_the_spawned_program_is_refused_before_anything_is_written(victim, mode, option):
    before = digest(victim)
    value = f"unix:{victim}" if option == "--events" else str(victim)
    r = run_cli("--no-dashboard", "--mode", mode, option, value, "-f", str(victim), "1", timeout=60)
    one_line_refusal(r, str(victim), "never writes over")
    assert digest(victim) == before and os.access(victim, os.X_OK)


def test_an_output_naming_the_program_found_on_path_is_refused(victim):
    before = digest(victim)
    env = dict(os.environ, PATH=f"{victim.parent}:{os.environ['PATH']}")
    r = subprocess.run(cli_command("--no-dashboard", "--summary", str(victim), "-f", "victim", "1"),
                       capture_output=True, text=True, timeout=60, env=env)
    one_line_refusal(r, "never writes over")
    assert digest(victim) == before


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_an_output_naming_a_file_the_spawned_program_is_given_is_refused(tmp_path, mode):
    """``--summary data -f sort data``: before stop 45 sort sorted its data and the summary then
    replaced it."""
    data = tmp_path / "data.txt"
    data.write_text("".join(f"{(i * 7919) % 1000}\n" for i in range(1000)))
    before = digest(data)
    r = run_cli("--no-dashboard", "--mode", mode, "--summary", "data.txt", "-f", "sort", "--", "-n", str(data),
                timeout=60, cwd=tmp_path)
    one_line_refusal(r, "data.txt", f"-f PROGRAM's argument {data}", "never writes over")  # as the user spelled it
    assert digest(data) == before


def test_a_program_whose_loader_fails_is_said_to_have_ended_not_to_be_unattachable(tmp_path):
    """A program linked to a library that is gone exits 127 in the loader before Frida attaches:
    exact mode said "cannot attach to pid N: target exited with status 127" (stop 47)."""
    (tmp_path / "lib.c").write_text("void gone(void) {}\n")
    (tmp_path / "main.c").write_text("void gone(void);\nint main(void) { gone(); return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libgone.so"), str(tmp_path / "lib.c")], check=True)
    subprocess.run(["cc", "-o", str(tmp_path / "needs"), str(tmp_path / "main.c"), f"-L{tmp_path}", "-lgone"], check=True)
    (tmp_path / "libgone.so").unlink()
    r = run_cli("--no-dashboard", "-f", str(tmp_path / "needs"), timeout=90)
    assert r.returncode == 1 and "libgone.so" in r.stderr, r.stderr  # the loader's own line, kept
    assert r.stderr.strip().splitlines()[-1] == (f"phasescope: error: {tmp_path / 'needs'} exited with code 127 during "
                                                 "its start-up, before it could be traced"), r.stderr


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_phasescope_refuses_to_trace_itself(mode):
    """``-p`` of phasescope's own pid: before stop 45 exact mode followed its own threads and hung,
    deaf to SIGTERM (only SIGKILL ended it)."""
    r = subprocess.run(["sh", "-c", 'exec "$@" -p $$', "sh",
                        *cli_command("--no-dashboard", "--mode", mode, "--duration", "1")],
                       capture_output=True, text=True, timeout=60)
    one_line_refusal(r, "is this phasescope itself")


def test_a_name_matches_other_processes_than_phasescope_itself(monkeypatch):
    """``-n python3.11`` named phasescope's own interpreter among the matches (pgrep leaves itself out)."""
    from phasescope.sources import device
    monkeypatch.setattr(device, "local_processes", lambda: [(os.getpid(), "twin"), (os.getpid() + 1, "twin")])
    assert device.resolve_target(None, name="twin").pid == os.getpid() + 1


def test_an_output_naming_an_attached_process_executable_is_refused(build, tmp_path):
    exe = tmp_path / "ticker"
    shutil.copy(build("robust.c", "-pthread"), exe)
    before = digest(exe)
    proc = subprocess.Popen([str(exe), "ticker"], stdout=subprocess.DEVNULL)
    try:
        r = run_cli("--no-dashboard", "--log", str(exe), "-p", str(proc.pid), "--duration", "1", timeout=60)
        one_line_refusal(r, "never writes over")
        assert proc.poll() is None  # never touched
    finally:
        proc.kill()
        proc.wait()
    assert digest(exe) == before


def test_an_output_naming_the_demo_workload_is_refused():
    from phasescope.workloads import phased
    script = Path(phased.__file__).resolve()
    before = digest(script)
    r = run_cli("demo", "--no-dashboard", "--log", str(script), timeout=60)
    one_line_refusal(r, "never writes over")
    assert digest(script) == before


@pytest.fixture
def untraceable(tmp_path, build):
    """Files exact mode cannot spawn: {what: path}."""
    script, text, empty = tmp_path / "script.sh", tmp_path / "notes.txt", tmp_path / "empty"
    script.write_text("#!/bin/sh\necho hi\n")
    text.write_text("hello\n")
    empty.write_text("")
    static = tmp_path / "static"
    subprocess.run(["cc", "-static", "-O1", "-o", str(static), str(PROGRAMS / "counted.c")], check=True,
                   capture_output=True)
    for p in (script, text, empty):
        p.chmod(0o755)
    return {"a script": script, "not an ELF": text, "an empty file": empty, "statically linked": static}


@pytest.mark.parametrize("what", ["a script", "not an ELF", "an empty file", "statically linked"])
def test_exact_mode_says_in_one_line_what_it_cannot_spawn_and_that_sampled_mode_can(untraceable, what):
    r = run_cli("--no-dashboard", "-f", str(untraceable[what]), timeout=60)
    one_line_refusal(r, what, "--mode sampled")


def test_sampled_mode_runs_a_script_and_a_static_binary(untraceable):
    r = run_cli("--no-dashboard", "--mode", "sampled", "-f", str(untraceable["a script"]), timeout=60)
    assert r.returncode == 0 and r.stdout == "hi\n", r.stderr
    r = run_cli("--no-dashboard", "--mode", "sampled", "-f", str(untraceable["statically linked"]), "1",
                timeout=60)
    assert r.returncode == 0, r.stderr


def test_sampled_mode_on_an_empty_file_is_bad_input(untraceable):
    one_line_refusal(run_cli("--no-dashboard", "--mode", "sampled", "-f", str(untraceable["an empty file"]),
                             timeout=60), "cannot run")


def test_attaching_to_a_static_binary_in_exact_mode_is_refused_and_leaves_it_running(tmp_path):
    src = tmp_path / "spin.c"
    src.write_text("#include <unistd.h>\nint main(){for(;;)pause();}\n")
    exe = tmp_path / "spin"
    subprocess.run(["cc", "-static", "-o", str(exe), str(src)], check=True, capture_output=True)
    proc = subprocess.Popen([str(exe)])
    try:
        time.sleep(0.2)
        one_line_refusal(run_cli("--no-dashboard", "-p", str(proc.pid), "--duration", "1", timeout=60),
                         "statically linked", "--mode sampled")
        assert proc.poll() is None  # Frida's attach would have aborted it
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_a_kernel_thread_is_refused(mode):
    one_line_refusal(run_cli("--no-dashboard", "--mode", mode, "-p", "2", "--duration", "1", timeout=60),
                     "kernel thread")


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_a_process_whose_main_thread_left_is_not_taken_for_a_zombie(build, mode):
    """Its main thread's state is Z while a worker runs: both modes refused it as a zombie. Sampled
    mode traces it (and names its code from a live thread's maps); exact mode says why Frida cannot."""
    target = subprocess.Popen([build("leader_exit.c", "-pthread")], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().startswith("ready")
        r = run_cli("--no-dashboard", "--mode", mode, "-p", str(target.pid), "--duration", "2", timeout=120)
        assert target.poll() is None  # left running
    finally:
        end_process(target)
    if mode == "exact":
        one_line_refusal(r, "main thread has exited", "--mode sampled")
    else:
        assert r.returncode == 0, r.stderr
        assert "left running" in r.stderr.strip().splitlines()[-1] and "leader_exit" in r.stderr, r.stderr
        assert "!spin" in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="as root, the kernel refuses ptrace of init: the case to check")
def test_init_is_bad_input_as_the_readme_says():
    one_line_refusal(run_cli("--no-dashboard", "-p", "1", "--duration", "1", timeout=60), "pid 1")


@pytest.fixture
def http_server():
    """A loopback HTTP server, which is no frida-server: its port."""
    with loopback_http_server() as port:
        yield port


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_a_host_that_is_no_frida_server_is_one_line(http_server, mode, build):
    r = run_cli("--no-dashboard", "--mode", mode, "-H", f"127.0.0.1:{http_server}", "-f", build("counted.c"),
                timeout=60)
    # sampled mode never connects: the kernel samples this machine only
    one_line_refusal(r, "frida-server" if mode == "exact" else "local device", f"127.0.0.1:{http_server}")


@pytest.mark.parametrize("args, words", [
    (["--cgroup", "/no/such/cgroup"], ["no such cgroup"]),
    (["--pids", "1,,2"], ["--pids"]),
    (["--pids", "1,-3"], ["--pids"]),
])
def test_system_wide_filters_that_match_nothing_by_mistake_are_refused(args, words):
    one_line_refusal(run_cli("-a", "--no-dashboard", "--duration", "1", *args, timeout=60), *words)


def test_system_wide_phase_db_that_names_a_json_file_is_refused(tmp_path):
    db = tmp_path / "dbs" / "new.json"
    one_line_refusal(run_cli("-a", "--no-dashboard", "--duration", "1", "--phase-db", str(db), timeout=60),
                     "directory")
    assert not db.exists() and not db.parent.exists()


def test_options_may_come_before_a_subcommand(tmp_path):
    r = run_cli("--no-dashboard", "demo", "--rounds", "1", "--duration", "1", timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


@pytest.fixture
def recorded_log(build, tmp_path):
    log = tmp_path / "run.jsonl"
    r = run_cli("--no-dashboard", "--log", str(log), "-f", build("counted.c"), "20", timeout=120)
    assert r.returncode == 0, r.stderr
    return log


def test_replay_into_a_closed_pipe_ends_quietly_with_0(recorded_log):
    cmd = " ".join(cli_command("replay", str(recorded_log))) + " | head -1; exit ${PIPESTATUS[0]}"
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and len(r.stdout.splitlines()) == 1


def test_a_log_with_no_complete_record_is_bad_input(recorded_log, tmp_path):
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(recorded_log.read_bytes()[:100])  # the first record, cut short
    r = run_cli("replay", str(cut), timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1].endswith("no complete interval record to replay")


def test_locality_size_takes_a_unit(build):
    r = run_cli("--no-dashboard", "--locality", "--locality-size", "128KiB", "-f", build("counted.c"), "5",
                timeout=120)
    assert r.returncode == 0, r.stderr
    one_line_refusal(run_cli("--locality", "--locality-size", "12parsecs", "-f", build("counted.c"), timeout=60),
                     "not a size")


def test_help_names_every_subcommand_and_exit_code_130():
    from phasescope.cli import SUBCOMMANDS
    r = run_cli("--help", timeout=60)
    epilog = " ".join(r.stdout[r.stdout.index("subcommands:"):].split())
    for name in SUBCOMMANDS:
        assert name in epilog, name
    assert "130" in epilog


@pytest.mark.parametrize("option", ["-o", "--log", "--summary", "--bbv", "--events", "--phase-db", "--profile",
                                    "--metrics"])
def test_an_empty_output_is_refused_not_dropped(build, tmp_path, option):
    """``--log "$UNSET"``: before stop 45 an empty value was taken as no option, and the run went on
    without the log the user asked for (exit 0, not a word)."""
    r = run_cli("--no-dashboard", option, "", "-f", build("counted.c"), "1", timeout=60, cwd=tmp_path)
    one_line_refusal(r, option)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, word", [(["replay", "{log}", "--summary", ""], "--summary"),
                                        (["export-bbv", "{log}", ""], "OUT.bb"), (["replay", ""], "FILE")])
def test_an_empty_file_argument_of_a_subcommand_is_refused(tmp_path, argv, word):
    log = tmp_path / "run.jsonl"
    log.write_text("")
    one_line_refusal(run_cli(*[a.format(log=log) for a in argv], timeout=60), f"{word}: an empty value")


@pytest.mark.parametrize("argv, word", [(["-H", "", "-f", "/bin/true"], "-H/--host"),
                                        (["-D", "", "-f", "/bin/true"], "-D/--device"),
                                        (["-a", "--comm", "", "--duration", "1"], "--comm")])
def test_an_empty_device_or_filter_is_refused(argv, word):
    """``-H "$UNSET"`` traced this machine instead, without a word; ``-a --comm ''`` matched nothing."""
    one_line_refusal(run_cli("--no-dashboard", *argv, timeout=60), f"{word}: an empty value")
