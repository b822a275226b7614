"""SimPoint basic-block-vector files (``.bb``), as valgrind ``exp-bbv`` writes and SimPoint reads.

One interval per line: ``T:id:count :id:count ...`` where ``count`` is the instructions block
``id`` executed in the interval; ``#`` comment lines and blank lines are skipped. exp-bbv's
``--pc-out-file`` map has lines ``F:id:hexaddr:function``; with it a block's key is its address,
without it the block id itself. A ``.bb`` file holds one stream, read as thread 0.
"""

from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from phasescope.errors import InputError
from phasescope.engine.interval import Interval
from phasescope.formats.lines import numbered_lines

_LINE = re.compile(r"T(?:\s*:\d{1,19}:\d{1,19})+\s*")
_TOKEN = re.compile(r":\d{1,19}:\d{1,19}")


def _lines(path: str) -> Iterator[Tuple[int, str]]:
    """(line number, stripped text) of the non-blank, non-comment lines."""
    for lineno, line in numbered_lines(path):
        text = line.strip()
        if text and not text.startswith("#"):
            yield lineno, text


def read_pc_map(path: str) -> Dict[int, int]:
    """Block id -> address, from an exp-bbv ``--pc-out-file``."""
    out = {}
    for lineno, text in _lines(path):
        parts = text.split(":", 3)
        try:
            if parts[0] != "F" or len(parts) < 3:
                raise ValueError
            out[int(parts[1])] = int(parts[2], 16)
        except ValueError:
            raise InputError(f"{path}:{lineno}: malformed pc map line: expected 'F:id:hexaddr:function'") from None
    return out


def parse_line(text: str, where: str) -> Tuple[np.ndarray, np.ndarray]:
    """(block ids, counts) of one ``T:`` line; ``where`` (``FILE:LINE``) prefixes any error."""
    if not _LINE.fullmatch(text):
        bad = next((t for t in text[1:].split() if not _TOKEN.fullmatch(t)), text[:20]) \
            if text.startswith("T") else text[:20]
        raise InputError(f"{where}: malformed interval near {bad!r}: expected 'T:id:count :id:count ...'")
    nums = np.fromstring(text[1:].replace(":", " "), dtype=np.uint64, sep=" ")  # validated above: exact
    return nums[0::2], nums[1::2]


def read_bb(path: str, pc_map: Optional[Dict[int, int]] = None, pc_path: str = "") -> Iterator[Interval]:
    """Intervals of a ``.bb`` file in order (thread 0); keys are addresses when ``pc_map`` is given."""
    if pc_map is not None:
        map_ids = np.array(sorted(pc_map), dtype=np.uint64)
        map_pcs = np.array([pc_map[i] for i in sorted(pc_map)], dtype=np.uint64)
    seq = 0
    for lineno, text in _lines(path):
        where = f"{path}:{lineno}"
        ids, counts = parse_line(text, where)
        pcs = None
        keys = ids
        if pc_map is not None:
            pos = np.minimum(np.searchsorted(map_ids, ids), max(len(map_ids) - 1, 0))
            missing = (map_ids[pos] != ids) if len(map_ids) else np.ones(len(ids), bool)
            if missing.any():
                raise InputError(f"{where}: block id {int(ids[missing.argmax()])} is not in {pc_path or 'the pc map'}")
            pcs = keys = map_pcs[pos]
        yield Interval(thread=0, seq=seq, instructions=int(counts.sum()), keys=keys, counts=counts, pcs=pcs)
        seq += 1


class BbvEncoder:
    """Dense 1-based block ids for stable keys, in order of first appearance, and ``.bb`` lines."""

    def __init__(self):
        self.ids: Dict[int, int] = {}

    def encode(self, keys: np.ndarray, counts: np.ndarray) -> Tuple[str, List[Tuple[int, int]]]:
        """``(line, new)``: the ``T:`` line (with newline; duplicate keys merged, ids ascending)
        and the ``(id, key)`` pairs first seen in it."""
        uniq, inverse = np.unique(np.asarray(keys, dtype=np.uint64), return_inverse=True)
        sums = np.bincount(inverse, weights=np.asarray(counts, dtype=np.float64), minlength=len(uniq))
        new = []
        ids = []
        for key in uniq.tolist():
            i = self.ids.get(key)
            if i is None:
                i = self.ids[key] = len(self.ids) + 1
                new.append((i, key))
            ids.append(i)
        order = np.argsort(ids)
        pairs = " ".join(f":{ids[j]}:{int(sums[j])}" for j in order.tolist() if sums[j] > 0)
        return f"T{pairs}\n", new


def pc_map_line(block_id: int, key: int) -> str:
    """A ``--pc-out-file`` line mapping a block id to its stable key (read back by :func:`read_pc_map`)."""
    return f"F:{block_id}:{key:x}:\n"
