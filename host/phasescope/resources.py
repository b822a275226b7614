"""Locate the agent sources shipped with phasescope (wheel: ``phasescope/js``; source tree: ``js/``)."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Directory ``js`` or ``agent``, installed beside the package or in the source checkout."""
    for candidate in (_HERE / name, _HERE.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"phasescope installation is incomplete: no {name}/ directory near {_HERE}")


def read_text(name: str, filename: str) -> str:
    """Text of a shipped agent file, e.g. ``read_text("js", "agent.js")``."""
    return (data_dir(name) / filename).read_text()
