"""speedscope's file format (https://www.speedscope.app/file-format-schema.json): one ``sampled``
profile per phase (named ``phase N``, or ``phase N COMM PID`` for ``-a`` logs), each stack its
frames outermost first, weighted by samples (or instructions for exact logs), so the counts
are the log's."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Dict, List, Optional

from phasescope.profiles.model import Profile

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def document(prof: Profile, phase: Optional[int] = None, name: str = "phasescope") -> dict:
    frames: List[dict] = []
    index: Dict[int, int] = {}
    by_profile: Dict[tuple, Dict[tuple, int]] = defaultdict(lambda: defaultdict(int))
    for (ph, _, _, pid, comm), stacks in prof.weights.items():
        if phase is None or ph == phase:
            for stack, w in stacks.items():
                by_profile[(ph, pid, comm)][stack] += w
    profiles = []
    for (ph, pid, comm), stacks in sorted(by_profile.items()):
        samples, weights = [], []
        for stack, w in stacks.items():
            ids = []
            for key in reversed(stack):
                if key not in index:
                    index[key] = len(frames)
                    module = prof.module(key)
                    frames.append({"name": prof.name(key), **({"file": module} if module else {})})
                ids.append(index[key])
            samples.append(ids)
            weights.append(w)
        total = sum(weights)
        profiles.append({"type": "sampled", "name": f"phase {ph}" + (f" {comm} {pid}" if pid else ""),
                         "unit": "none", "startValue": 0, "endValue": total, "samples": samples,
                         "weights": weights})
    return {"$schema": SCHEMA, "name": name, "exporter": "phasescope", "activeProfileIndex": 0,
            "shared": {"frames": frames}, "profiles": profiles}


def write(prof: Profile, path: str, phase: Optional[int] = None, name: str = "phasescope") -> None:
    with open(path, "w") as f:
        json.dump(document(prof, phase, name), f, separators=(",", ":"))
