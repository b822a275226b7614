"""pprof's ``profile.proto`` (github.com/google/pprof/proto/profile.proto), gzipped: one sample per
(labels, stack) with numeric labels ``phase``, ``predicted_phase``, ``thread``, ``pid`` (``-a``)
and the string label ``comm``, so ``go tool pprof -tagfocus phase=3 -top FILE`` shows phase 3.
Values: ``samples``/count and ``cpu``/nanoseconds (sampled logs), or ``instructions``/count
(exact logs). Numeric labels carry the unit ``id``: Go's reader drops a numeric label of value 0
without a unit (phase 0 would vanish), and ``-tagfocus phase=0`` still matches (a unit it does
not know scales to itself). Locations are stable keys (one per key), functions their names (one per name and
module)."""

from __future__ import annotations

import gzip
from typing import Dict, Optional

from phasescope.profiles import protobuf as pb
from phasescope.profiles.model import Profile


class _Strings:
    def __init__(self):
        self.index: Dict[str, int] = {"": 0}

    def __call__(self, s: str) -> int:
        return self.index.setdefault(s, len(self.index))


def encode(prof: Profile, phase: Optional[int] = None) -> bytes:
    """The (uncompressed) profile message of ``prof``, of one ``phase`` or all."""
    s = _Strings()
    out = []
    if prof.unit == "samples":
        types = [("samples", "count"), ("cpu", "nanoseconds")]
        out.append(pb.blob(11, pb.uint(1, s("cpu")) + pb.uint(2, s("nanoseconds"))))
        out.append(pb.uint(12, prof.period_ns))
    else:
        types = [("instructions", "count")]
    for t, u in types:
        out.append(pb.blob(1, pb.uint(1, s(t)) + pb.uint(2, s(u))))
    locations: Dict[int, int] = {}
    functions: Dict[tuple, int] = {}
    for (ph, guess, thread, pid, comm), stacks in prof.weights.items():
        if phase is not None and ph != phase:
            continue
        labels = [pb.blob(3, pb.uint(1, s(k)) + pb.uint(3, v) + pb.uint(4, s("id"))) for k, v in
                  (("phase", ph), ("predicted_phase", guess), ("thread", thread)) + ((("pid", pid),) if pid else ())]
        if comm:
            labels.append(pb.blob(3, pb.uint(1, s("comm")) + pb.uint(2, s(comm))))
        for stack, w in stacks.items():
            ids = []
            for key in stack:
                loc = locations.get(key)
                if loc is None:
                    fkey = (prof.name(key), prof.module(key) or "")
                    fid = functions.get(fkey)
                    if fid is None:
                        fid = functions[fkey] = len(functions) + 1
                        out.append(pb.blob(5, pb.uint(1, fid) + pb.uint(2, s(fkey[0])) + pb.uint(3, s(fkey[0]))
                                           + pb.uint(4, s(fkey[1]))))
                    loc = locations[key] = len(locations) + 1
                    out.append(pb.blob(4, pb.uint(1, loc) + pb.uint(3, key) + pb.blob(4, pb.uint(1, fid))))
                ids.append(loc)
            values = [w, w * prof.period_ns] if prof.unit == "samples" else [w]
            out.append(pb.blob(2, pb.packed(1, ids) + pb.packed(2, values) + b"".join(labels)))
    if prof.start_ns:
        out.append(pb.uint(9, prof.start_ns))
        out.append(pb.uint(10, max(0, prof.end_ns - prof.start_ns)))
    strings = b"".join(pb.text(6, t) for t in s.index)
    return strings + b"".join(out)


def write(prof: Profile, path: str, phase: Optional[int] = None) -> None:
    with open(path, "wb") as f:
        f.write(gzip.compress(encode(prof, phase), compresslevel=6, mtime=0))
