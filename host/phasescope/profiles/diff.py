"""``profile --diff A B``: how two phases' code differs. Each side is a phase of a log (two
phases of one run, or one phase in two runs that shared a ``--phase-db``, so their phase IDs
agree); the functions are compared by their share of each side's weight (self, by leaf)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from phasescope.errors import InputError
from phasescope.profiles.model import Profile


@dataclass
class Change:
    function: str
    share_a: float
    share_b: float

    @property
    def delta(self) -> float:
        return self.share_b - self.share_a


def parse_side(text: str, default_log: str):
    """``(log, phase)`` of ``PHASE`` or ``LOG:PHASE``."""
    log, _, phase = text.rpartition(":")
    try:
        return (log or default_log), int(phase)
    except ValueError:
        raise InputError(f"--diff takes PHASE or LOG:PHASE, got {text!r}") from None


def changes(a: Profile, phase_a: int, b: Profile, phase_b: int) -> List[Change]:
    """Every function of either side, the largest change of share first."""
    fa, fb = a.by_function(phase_a), b.by_function(phase_b)
    ta, tb = sum(fa.values()), sum(fb.values())
    for prof, phase, total in ((a, phase_a, ta), (b, phase_b, tb)):
        if not total:
            raise InputError(f"phase {phase} has no samples in this log (its phases: "
                             f"{', '.join(map(str, prof.phases))})")
    out = [Change(f, fa.get(f, 0) / ta, fb.get(f, 0) / tb) for f in set(fa) | set(fb)]
    out.sort(key=lambda c: (-abs(c.delta), c.function))
    return out
