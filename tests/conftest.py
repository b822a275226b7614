"""Shared fixtures: compile test programs with the system cc, run the real CLI."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parent / "programs"


@pytest.fixture(scope="session")
def build(tmp_path_factory):
    """build("name.c", *flags) -> path of tests/programs/name.c compiled with cc (cached per flags)."""
    out_dir = tmp_path_factory.mktemp("bin")
    cache = {}

    def _build(source: str, *flags: str, name: str = None) -> str:
        key = (source, flags, name)
        if key not in cache:
            exe = out_dir / (name or (Path(source).stem + ("_" + str(abs(hash(flags))) if flags else "")))
            cmd = ["cc", "-O1", "-g", "-o", str(exe), str(PROGRAMS / source), *flags]
            subprocess.run(cmd, check=True, capture_output=True)
            cache[key] = str(exe)
        return cache[key]

    return _build


def cli_command(*args: str) -> list:
    """The command line running phasescope's CLI from this interpreter."""
    return [sys.executable, "-m", "phasescope.cli", *args]


def run_cli(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """Run phasescope to completion, capturing text output."""
    env = dict(os.environ, COLUMNS="120")
    return subprocess.run(cli_command(*args), capture_output=True, text=True, timeout=timeout, env=env, **kw)


class Tmux:
    """A real terminal: phasescope runs in a tmux pane; tests read its screen."""

    def __init__(self, width: int, height: int, command: list):
        self.name = f"psq-{uuid.uuid4().hex[:8]}"
        # the shell outlives a Ctrl-C sent to the pane (trap), so that the exit status can be read
        shell = "trap : INT; " + " ".join(shlex.quote(c) for c in command) + "; echo EXIT=$?; sleep 60"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
                        "env", "-u", "COLUMNS", "-u", "LINES", "TERM=xterm-256color", "sh", "-c", shell], check=True)

    def screen(self) -> str:
        """The visible pane; -J joins lines the terminal wrapped (long paths in the final message)."""
        return subprocess.run(["tmux", "capture-pane", "-p", "-J", "-t", self.name], capture_output=True,
                              text=True, check=True).stdout

    def wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        end = time.monotonic() + timeout
        text = ""
        while time.monotonic() < end:
            text = self.screen()
            if re.search(pattern, text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"{pattern!r} never appeared on screen; last screen:\n{text}")

    def close(self):
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


@pytest.fixture
def tmux():
    sessions = []

    def start(width, height, command):
        sessions.append(Tmux(width, height, command))
        return sessions[-1]

    yield start
    for s in sessions:
        s.close()
