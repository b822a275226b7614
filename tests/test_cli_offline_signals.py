"""A stop signal ends an offline subcommand at once (exit 130, one line): they have nothing to
finish, and before stop 45 a first Ctrl-C or SIGTERM only set a flag none of them looked at, so a
replay ran on to its end with exit 0, and one blocked on a FIFO's writer never ended."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from conftest import cli_command, wait_for
from test_replay import recorded_stream
from phasescope.formats.log import dumps, to_record
from phasescope.engine.phase_engine import PhaseEngine

pytestmark = pytest.mark.slow  # every test here starts phasescope


def _handles_stop_signals(pid: int) -> bool:
    """phasescope has installed its stop-signal handlers (SIGTERM caught)."""
    with open(f"/proc/{pid}/status") as f:
        caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    return bool(caught & (1 << (signal.SIGTERM - 1)))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("command", [["replay", "--format", "log", "{in}"], ["export-bbv", "{in}", "{out}.bb"],
                                     ["profile", "{in}", "-o", "{out}.folded"]])
def test_a_stop_signal_ends_an_offline_command_reading_a_pipe(tmp_path, command, sig):
    fifo, out = tmp_path / "log.fifo", tmp_path / "out"
    os.mkfifo(fifo)
    argv = [a.format(**{"in": fifo, "out": out}) for a in command]
    proc = subprocess.Popen(cli_command(*argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        engine = PhaseEngine()
        with open(fifo, "w") as writer:  # held open: the command waits for the rest of the log
            for iv in recorded_stream(8):
                writer.write(dumps(to_record(iv, engine.feed(iv))) + "\n")
            writer.flush()
            wait_for(lambda: _handles_stop_signals(proc.pid), 60, "phasescope's stop-signal handlers")
            proc.send_signal(sig)
            code = proc.wait(timeout=20)
        err = proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    assert code == 130, err
    assert err.strip().splitlines() == [f"phasescope {command[0]}: interrupted"], err
