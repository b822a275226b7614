"""Locate the agent sources shipped with phasescope (wheel: ``phasescope/js``, ``phasescope/agent``;
source tree: ``js/``, ``agent/``) and join each language's parts into the one text Frida takes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Optional

_HERE = Path(__file__).resolve().parent

#: The agent's parts, by concern, in the order they are joined: ``agent`` into the one C source
#: Frida's CModule compiles (each part after a ``#line`` directive, so compiler errors name the
#: part and its line), ``js`` into the one script Frida loads. The one list of them.
PARTS = {
    "agent": ("core.c", "near.c", "intervals.c", "locality.c", "threads.c", "faults.c", "jit.c", "jit_keys.c",
              "portable.c", "x86_emit.c", "x86_memslots.c", "x86_loop_plan.c", "x86_loop_emit.c",
              "x86_rep.c", "x86_flags.c", "x86_transform.c"),
    "js": ("state.js", "near.js", "threads.js", "bursts.js", "drain.js", "faults.js", "jit.js", "hooks.js", "rpc.js"),
}


def data_dir(name: str) -> Path:
    """Directory ``js`` or ``agent``, installed beside the package or in the source checkout."""
    for candidate in (_HERE / name, _HERE.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"phasescope installation is incomplete: no {name}/ directory near {_HERE}")


def read_text(name: str, filename: str) -> str:
    """Text of a shipped agent file, e.g. ``read_text("js", "rpc.js")``."""
    return (data_dir(name) / filename).read_text()


def joined(name: str, read: Optional[Callable[[str], str]] = None) -> str:
    """The agent's ``name`` (``agent`` or ``js``) as one source: its :data:`PARTS` in order, each
    ending in a newline; C parts each after ``#line 1 "agent/PART"``. ``read(part)`` gives a
    part's text (default: the shipped file; ``bench/counter_ab.py`` reads a git revision's)."""
    read = read or (lambda part: read_text(name, part))
    texts = [read(part) for part in PARTS[name]]
    if name == "agent":
        texts = [f'#line 1 "agent/{part}"\n{text}' for part, text in zip(PARTS[name], texts)]
    return "".join(text if text.endswith("\n") else text + "\n" for text in texts)


def js_place(line: int) -> str:
    """Where line ``line`` (from 1) of the joined script comes from: ``js/PART:LINE``."""
    for part in PARTS["js"]:
        lines = read_text("js", part).count("\n")
        if line <= lines:
            return f"js/{part}:{line}"
        line -= lines
    return f"js:{line}"


def with_js_places(text: str) -> str:
    """``text``, a Frida error about the joined script, with its ``line N`` as ``js/PART:LINE``."""
    return re.sub(r"\bline (\d+)", lambda m: js_place(int(m.group(1))), text)
