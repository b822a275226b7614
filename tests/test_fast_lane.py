"""The fast lane's guard (tests/conftest.py): a test not marked slow cannot start a process, by any
of the ways the suite starts them, and says which marker it lacks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("start", [
    lambda: subprocess.run([sys.executable, "-c", "pass"], timeout=10),
    lambda: subprocess.Popen(["true"]),
    lambda: os.fork(),
])
def test_an_unmarked_test_cannot_start_a_process(start):
    with pytest.raises(AssertionError, match="mark it @pytest.mark.slow"):
        start()


def test_nor_reach_a_frida_device():
    frida = pytest.importorskip("frida")
    with pytest.raises(AssertionError, match="mark it @pytest.mark.slow"):
        frida.get_local_device()


@pytest.mark.slow
def test_a_slow_test_can():
    assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True,
                          timeout=60).stdout == "42\n"
