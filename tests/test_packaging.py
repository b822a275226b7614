"""The wheel ships every host package and the agent sources (pyproject lists packages explicitly)."""

from __future__ import annotations

import pytest
import subprocess
import sys
import zipfile
from pathlib import Path

pytestmark = pytest.mark.slow  # every test here starts a real process

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contains_every_package_and_the_agent(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=300)
    wheel = next(tmp_path.glob("phasescope-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    host = ROOT / "host"
    for init in host.rglob("__init__.py"):
        assert str(init.relative_to(host)) in names, init
    for source in list((ROOT / "js").glob("*.js")) + list((ROOT / "agent").glob("*.[ch]")):
        assert f"phasescope/{source.parent.name}/{source.name}" in names, source
    assert "phasescope/workloads/phased.py" in names
