"""Collapsed stacks (``.folded``), as flamegraph.pl, inferno and speedscope read them: one line per
stack, ``frame;frame;...;leaf weight``, outermost first. The first frame is ``phase N`` and, for a
log of several processes (``-a``), the second ``COMM PID``: one flame graph shows every phase
side by side, and ``grep '^phase 3;'`` keeps one."""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Optional

from phasescope.profiles.model import Profile


def _clean(name: str) -> str:
    return name.replace(";", ":").replace("\n", " ")


def lines(prof: Profile, phase: Optional[int] = None) -> List[str]:
    """The folded lines of ``prof`` (of one ``phase`` or all), sorted."""
    out: Dict[str, int] = defaultdict(int)
    for (ph, _, _, pid, comm), stacks in prof.weights.items():
        if phase is not None and ph != phase:
            continue
        root = [f"phase {ph}"] + ([_clean(f"{comm} {pid}")] if pid else [])
        for stack, w in stacks.items():
            out[";".join(root + [_clean(prof.name(k)) for k in reversed(stack)])] += w
    return [f"{k} {v}" for k, v in sorted(out.items())]


def write(prof: Profile, path: str, phase: Optional[int] = None) -> None:
    with open(path, "w") as f:
        f.writelines(line + "\n" for line in lines(prof, phase))
