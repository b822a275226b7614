"""Every way a user stops phasescope ends the same way: the summary written, the report and one end
line, no traceback. Real processes: a compiled three-phase program, the demo in a real terminal."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import pytest

from conftest import cli_command, wait_for

pytestmark = pytest.mark.slow  # every test here starts a real process


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_mid_run_keeps_the_summary_and_the_report(build, tmp_path, sig):
    """As under perf record: the spawned target gets the signal, ends of it, and the run reports
    and exits 130."""
    exe = build("phased.c")
    summary, lines = tmp_path / "s.json", tmp_path / "out.txt"
    # the target inherits stdio: phasescope's own lines go to -o
    proc = subprocess.Popen(cli_command("--no-dashboard", "--summary", str(summary), "-o", str(lines),
                                        "-f", exe, "0", "2"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: lines.exists() and "#0 thread" in lines.read_text(), 60, "the first interval classified")
        time.sleep(0.5)
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 130
        s = json.loads(summary.read_text())
    finally:
        proc.kill()
        if summary.exists():
            subprocess.run(["kill", "-9", str(json.loads(summary.read_text())["target"]["pid"])], timeout=300)
    text = lines.read_text()
    assert "Traceback" not in text
    assert s["end"]["how"] in ("killed", "crashed") and s["end"]["reason"] == f"{sig.name} passed on to it"
    assert "phases (mean (CV) per interval)" in text  # the report
    last = text.strip().splitlines()[-1]
    assert last.startswith("phasescope: target ") and "left running" not in last and sig.name in last


def test_ctrl_c_during_start_up_is_one_line(tmp_path):
    # From phasescope's first line on (imports, parsing, spawn); a Ctrl-C inside CPython's own
    # start-up (its site module, before any phasescope code runs: ~30 ms idle, seen at 50 ms on a
    # loaded host) is reported by CPython itself, which phasescope cannot change.
    for delay in (0.3, 1.0):
        proc = subprocess.Popen(cli_command("--no-dashboard", "-f", "/bin/sleep", "5"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        # a traceback is CPython's own only if no phasescope file is in it (its start-up took
        # more than the delay: seen at 0.3 s at load 12); from cli.py's first line on, one line
        ours = re.search(r"phasescope/(\w+/)?\w+\.py", err)  # a frame in the package's code
        assert "Traceback" not in err or not ours, err
        assert proc.returncode in (0, 130) or not ours, (proc.returncode, err)


@pytest.mark.parametrize("duration", ["2", "5"])
def test_demo_with_a_duration_in_a_real_terminal_ends_with_the_report(tmux, duration):
    t = tmux(100, 30, cli_command("demo", "--duration", duration))
    final = t.wait_for(r"EXIT=\d+", timeout=90)
    assert "EXIT=0" in final and "Traceback" not in final, final
    assert "detached" in final and f"--duration {duration}s reached" in final


def test_ctrl_c_in_the_dashboard_ends_with_the_report(tmux):
    t = tmux(100, 30, cli_command("demo"))
    t.wait_for(r"intervals \d+")
    t.send_keys("C-c")
    final = t.wait_for(r"EXIT=\d+", timeout=60)
    assert "EXIT=130" in final and "Traceback" not in final, final  # the workload ended of the Ctrl-C
    assert "SIGINT passed on to it" in final


def test_ctrl_c_again_and_again_while_the_run_finishes_leaves_every_output_whole(build, tmp_path):
    """Exact mode, attached: Ctrl-C pressed every 20 ms from the first on. The second one used to
    raise inside the detach or a final write: no summary and no phase database (seen 3 of 3), or
    a profile cut off as "not written: no reader". Now the run finishes first and exits 130, the
    target running on."""
    import gzip
    proc = subprocess.Popen([build("phased.c"), "0", "1"], stdout=subprocess.DEVNULL)
    files = {name: tmp_path / name for name in ("s.json", "db.json", "p.pb.gz", "out.txt")}
    try:
        ps = subprocess.Popen(cli_command("--no-dashboard", "-p", str(proc.pid), "--summary", str(files["s.json"]),
                                          "--phase-db", str(files["db.json"]), "--profile", str(files["p.pb.gz"]),
                                          "-o", str(files["out.txt"])),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        out = files["out.txt"]
        wait_for(lambda: out.exists() and re.search(r"#\d+ thread", out.read_text()), 60, "a phase change")
        deadline = time.monotonic() + 60
        while ps.poll() is None and time.monotonic() < deadline:
            ps.send_signal(signal.SIGINT)
            time.sleep(0.02)
        err = ps.communicate(timeout=60)[1]
        assert ps.returncode == 130 and "Traceback" not in err and "not written" not in err, (ps.returncode, err)
        assert json.loads(files["s.json"].read_text())["end"] == {
            "how": "detached", "code": None, "signal": None, "reason": "stopped by SIGINT"}
        assert json.loads(files["db.json"].read_text())["runs"] == 1
        assert gzip.decompress(files["p.pb.gz"].read_bytes())  # a whole gzip stream, not an empty file
        assert "left running" in files["out.txt"].read_text().splitlines()[-1]
        assert proc.poll() is None  # running on
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow  # starts a real process (sampled mode: about 2 s)
def test_a_second_stop_signal_before_the_loop_saw_the_first_still_detaches_in_sampled_mode(build, tmp_path):
    """Sampled mode, attached: SIGINT and SIGTERM handled together (held pending while phasescope
    is stopped), so the second cut the loop short before it read the session's end. The summary
    said "aborted" and the end line that the target "ended" (it runs on), where exact mode says
    "detached"; now the loop's last events are read first (3 of 3 aborted before, 3 of 3 detached)."""
    proc = subprocess.Popen([build("phased.c"), "0", "1"], stdout=subprocess.DEVNULL)
    summary, out = tmp_path / "s.json", tmp_path / "out.txt"
    try:
        ps = subprocess.Popen(cli_command("--mode", "sampled", "--no-dashboard", "-p", str(proc.pid),
                                          "--summary", str(summary), "-o", str(out)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: out.exists() and "thread" in out.read_text(), 60, "a status line")
        for sig in (signal.SIGSTOP, signal.SIGINT, signal.SIGTERM, signal.SIGCONT):
            ps.send_signal(sig)
        err = ps.communicate(timeout=60)[1]
        assert ps.returncode in (130, 143) and "Traceback" not in err, (ps.returncode, err)
        # either signal may be handled first: a process-directed signal goes to any of phasescope's
        # threads, so SIGTERM's handler ran first once in a CI (the run said "stopped by SIGTERM")
        end = json.loads(summary.read_text())["end"]
        assert end["how"] == "detached" and end["reason"] in ("stopped by SIGINT", "stopped by SIGTERM"), end
        assert "detached; target left running" in out.read_text().splitlines()[-1]
        assert proc.poll() is None  # running on
    finally:
        proc.kill()
        proc.wait()


def _ignoring(*sigs):
    """A preexec_fn: the child starts with ``sigs`` ignored (nohup, a script's ``cmd &``, a parent
    that ignores SIGCHLD), as the spawned program then inherits them."""
    return lambda: [signal.signal(s, signal.SIG_IGN) for s in sigs]


@pytest.mark.parametrize("mode", ["exact", "sampled"])
def test_a_spawned_program_inherits_the_ignored_signals_an_untraced_one_would(tmp_path, mode):
    # review of stop 47: phasescope caught what it was told to ignore, so the program got SIGINT,
    # SIGHUP at their defaults (a script's Ctrl-C killed its `phasescope -f ./prog &`); with SIGCHLD
    # ignored the kernel reaped the sampled child itself and the run waited for ever (ECHILD)
    ignored = _ignoring(signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGCHLD, signal.SIGUSR1)
    prog = ["/bin/grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"]
    untraced = subprocess.run(prog, capture_output=True, text=True, preexec_fn=ignored, check=True).stdout
    assert "SigIgn:\t0000000000010207" in untraced, untraced  # the signals above, nothing else
    traced = subprocess.run(cli_command("--mode", mode, "--no-dashboard", "-o", str(tmp_path / "out"), "-f", prog[0],
                                        "--", *prog[1:]), capture_output=True, text=True, preexec_fn=ignored, timeout=120)
    assert traced.returncode == 0 and traced.stdout == untraced, (traced.stdout, traced.stderr)
    assert "Traceback" not in traced.stderr, traced.stderr
