"""The profile formats by name and file extension: one table for ``phasescope profile`` and the
live ``--profile`` output."""

from __future__ import annotations

from typing import Optional

from phasescope.errors import InputError
from phasescope.profiles import folded, perfetto, pprof, speedscope
from phasescope.profiles.model import Profile
from phasescope.sinks.base import write_whole

WRITERS = {"pprof": pprof.write, "speedscope": speedscope.write, "folded": folded.write, "perfetto": perfetto.write}
EXTENSIONS = ((".pb.gz", "pprof"), (".pprof", "pprof"), (".json", "speedscope"), (".folded", "folded"),
              (".collapsed", "folded"), (".perfetto-trace", "perfetto"), (".pftrace", "perfetto"))


def format_of(path: str, given: Optional[str] = None, hint: str = "") -> str:
    """``given``, else the format of ``path``'s extension (InputError, one line, ending with
    ``hint``, when unknown)."""
    if given:
        return given
    for ext, fmt in EXTENSIONS:
        if path.endswith(ext):
            return fmt
    raise InputError(f"cannot tell the profile format of {path} from its name: use one of "
                     f"{', '.join(e for e, _ in EXTENSIONS)}{hint}")


def write_profile(fmt: str, prof: Profile, path: str, phase: Optional[int] = None) -> None:
    """``prof`` to ``path`` in format ``fmt``, whole (:func:`~phasescope.sinks.base.write_whole`):
    a stop signal during the write (which ends ``phasescope profile`` and ``replay`` at once)
    leaves the old file, not an empty or half one. A failed write is exit 1, one line."""
    write_whole(path, lambda p: WRITERS[fmt](prof, p, phase), ".phasescope-profile-")
