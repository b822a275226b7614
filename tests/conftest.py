"""Shared fixtures: compile test programs with the system cc, run the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
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
