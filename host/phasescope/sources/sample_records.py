"""What a :class:`~phasescope.sources.sampler.Sampler` keeps of the records it reads from its rings:
the target's (and followed children's) samples, as a structured array in ring order. The LOST,
FORK, EXIT, MMAP and COMM records of all the rings read at once are handled first, in time order
(tests/test_ring_order.py), then the samples are kept or dropped. :class:`SampleRecords` is mixed
into the Sampler, whose state it reads and counts in.

Two ways, one result. With call chains (``stacks``) a sample record's size varies, so the records
are walked one by one in Python. Without them (the default: only ``--log`` and ``--profile`` keep
chains) every sample is 40 bytes, and a wake-up brings whole windows of them: runs of samples are
decoded with numpy a run at a time, and any other record ends a run (about a tenth of the loop's
CPU a sample; tests/test_ring_parse.py checks both ways on the same records).
"""

from __future__ import annotations

import heapq
from operator import itemgetter
from typing import List, Optional

import numpy as np

from phasescope.sources.modules import KERNEL_KEY
from phasescope.sources.perf_event import (CHAIN_AT, LOST_RECORD, PERF_RECORD_COMM, PERF_RECORD_EXIT,
                                          PERF_RECORD_FORK, PERF_RECORD_LOST, PERF_RECORD_MISC_COMM_EXEC,
                                          PERF_RECORD_MISC_CPUMODE_MASK, PERF_RECORD_MISC_USER, PERF_RECORD_MMAP,
                                          PERF_RECORD_SAMPLE, RECORD_HEADER, SAMPLE_ID, SAMPLE_RECORD, TASK_RECORD,
                                          comm_record, mmap_record)
from phasescope.sources.procfs import process_comm

#: An accepted sample: its IP (or KERNEL_KEY), thread, time and raw user call chain (the record's
#: bytes from :data:`~phasescope.sources.perf_event.CHAIN_AT` on).
SAMPLE_DTYPE = np.dtype([("ip", "<u8"), ("tid", "<u4"), ("time", "<u8"), ("chain", "O")])
#: An accepted sample without a call chain (no object field: cheap to make, sort and cut).
LEAF_DTYPE = np.dtype([("ip", "<u8"), ("tid", "<u4"), ("time", "<u8")])
#: A sample record without a call chain, as the kernel writes it (:data:`SAMPLE_RECORD`).
RAW_LEAF = np.dtype([("type", "<u4"), ("misc", "<u2"), ("size", "<u2"), ("ident", "<u8"), ("ip", "<u8"),
                     ("pid", "<u4"), ("tid", "<u4"), ("time", "<u8")])
assert RAW_LEAF.itemsize == SAMPLE_RECORD.size


def leaves(samples: np.ndarray) -> np.ndarray:
    """:data:`SAMPLE_DTYPE` samples as :data:`LEAF_DTYPE` (their chains left out)."""
    out = np.empty(len(samples), dtype=LEAF_DTYPE)
    for name in LEAF_DTYPE.names:
        out[name] = samples[name]
    return out


def _sorted(table: dict, cache: list):
    """``table``'s keys and values as sorted arrays; ``cache`` ([table, its size, keys, values])
    keeps them while ``table`` is the same dict of the same size (entries are only ever added)."""
    if cache[0] is not table or cache[1] != len(table):
        keys = np.fromiter(table, dtype=np.uint64, count=len(table))
        vals = np.fromiter(table.values(), dtype=np.int64, count=len(table))
        order = np.argsort(keys)
        cache[:] = [table, len(table), keys[order], vals[order]]
    return cache[2], cache[3]


def _lookup(table: dict, values: np.ndarray, cache: Optional[list] = None):
    """``(found, value)`` of each of ``values`` in the int -> int ``table`` (sorted search: numpy's
    ``isin`` costs more than the whole decode on a window's samples); ``cache``: see :func:`_sorted`."""
    keys, vals = _sorted(table, [None, 0, None, None] if cache is None else cache)
    if not len(keys):
        return np.zeros(len(values), dtype=bool), np.zeros(len(values), dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    return keys[at] == values, vals[at]


class SampleRecords:
    """Record reading for a sampler with ``pid``, ``stacks``, ``kernel``, ``children``, ``_own``
    (tids with their own events), ``_id_tid`` (event id -> its tid), ``_id_tid_sorted`` (its sorted
    cache), ``_kids``, ``_t`` and ``_thread``, and the counters ``samples``, ``lost``, ``foreign``,
    ``duplicates`` and ``kernel_samples``."""

    #: Samples of no followed process taken at or after :attr:`_unsure_from` (the read's start; the
    #: last read, and here: never) are not dropped but read again with the next read's records, as a
    #: ring of their own: the rings are read one after another, and a child forked once its parent's
    #: ring was read had its samples on another ring read before its FORK record was written.
    _unsure_from = (1 << 64) - 1
    _unsure = b""

    def _parse(self, chunks: List[bytes], exits: List[int]) -> np.ndarray:
        """Samples of the chunks read from the rings (one a ring), accepted (:data:`SAMPLE_DTYPE`, or
        :data:`LEAF_DTYPE` without ``stacks``); LOST/FORK/EXIT/MMAP/COMM handled first, in time order
        across the rings, exits added to ``exits``. The rings are read one after another: a child's
        samples on one CPU must find its FORK record from another, a library's MMAP records must be
        taken in the order they happened, however late the read (a batch of an unwatched run, stop 48)."""
        split = self._split_chains if self.stacks else self._split_leaves
        chunks, self._unsure = chunks + [self._unsure], b""
        parts = [split(data) for data in chunks if data]
        for _, data, rtype, misc, off, size in heapq.merge(*[others for _, others in parts], key=itemgetter(0)):
            self._record(data, rtype, misc, off, size, exits)
        raw = [run for runs, _ in parts for run in runs if isinstance(run, np.ndarray)]
        chained = [sample for runs, _ in parts for run in runs if isinstance(run, list) for sample in run]
        recs = [self._accept(raw[0] if len(raw) == 1 else np.concatenate(raw))] if raw else []
        if chained or self.stacks:
            with_chains = self._accept_chains(chained)
            recs.append(with_chains if self.stacks else leaves(with_chains))
        recs = recs[0] if len(recs) == 1 else np.concatenate(recs) if recs else np.zeros(0, dtype=LEAF_DTYPE)
        self.samples += len(recs)
        return recs

    @staticmethod
    def _other(data: bytes, rtype: int, misc: int, off: int, size: int) -> tuple:
        """A record other than a sample, as :meth:`_parse` orders them: its time first (FORK and EXIT
        carry it in their body, MMAP and COMM at their end, ``sample_id_all``; the rest: 0)."""
        if rtype in (PERF_RECORD_FORK, PERF_RECORD_EXIT):
            t = TASK_RECORD.unpack_from(data, off + 8)[4]
        elif rtype in (PERF_RECORD_MMAP, PERF_RECORD_COMM) and size >= 8 + SAMPLE_ID.size:
            t = SAMPLE_ID.unpack_from(data, off + size - SAMPLE_ID.size)[2]
        else:
            t = 0
        return t, data, rtype, misc, off, size

    def _split_chains(self, data: bytes) -> tuple:
        """``([samples], others)`` of a chunk with call chains: each sample as a tuple for
        :meth:`_accept_chains`, its other records for :meth:`_record`. The loop runs once per sample,
        so it is written out: one header and one body unpacked, the call chain kept as raw bytes."""
        samples: list = []
        others: list = []
        keep = samples.append
        header, sample = RECORD_HEADER.unpack_from, SAMPLE_RECORD.unpack_from
        off, n = 0, len(data)
        while off + 8 <= n:
            if off + SAMPLE_RECORD.size <= n:  # read as a sample (most are), the header checked first
                rtype, misc, size, ident, ip, spid, tid, t = sample(data, off)
            else:
                rtype, misc, size = header(data, off)
            if size < 8 or off + size > n:
                break
            if rtype == PERF_RECORD_SAMPLE:
                keep((ip, tid, t, data[off + CHAIN_AT: off + size], spid, ident, misc))
            else:
                others.append(self._other(data, rtype, misc, off, size))
            off += size
        return [samples], others

    def _accept_chains(self, samples: list) -> np.ndarray:
        """The samples :meth:`_split_chains` found that are kept, as :data:`SAMPLE_DTYPE`."""
        recs: list = []
        keep = recs.append
        own, id_tid, pid, kids = self._own, self._id_tid, self.pid, self._kids
        unsure: list = []
        for ip, tid, t, chain, spid, ident, misc in samples:
            if spid != pid and spid not in kids:
                if t >= self._unsure_from:
                    unsure.append(SAMPLE_RECORD.pack(PERF_RECORD_SAMPLE, misc, CHAIN_AT + len(chain), ident, ip,
                                                     spid, tid, t) + chain)
                else:
                    self.foreign += 1
            elif tid in own and id_tid.get(ident, tid) != tid:
                self.duplicates += 1
            elif misc & PERF_RECORD_MISC_CPUMODE_MASK == PERF_RECORD_MISC_USER:
                keep((ip, tid, t, chain))
            else:
                self._kernel_sample(recs, tid, t, chain)
        self._unsure += b"".join(unsure)
        return np.array(recs, dtype=SAMPLE_DTYPE)

    def _split_leaves(self, data: bytes) -> tuple:
        """``(runs, others)`` of a chunk without call chains: runs of 40-byte samples as numpy views
        (:data:`RAW_LEAF`, for :meth:`_accept`), found a run at a time; a record of another kind or
        size ends a run and is kept for :meth:`_record`."""
        runs, others, off, n, size = [], [], 0, len(data), RAW_LEAF.itemsize
        while off + 8 <= n:
            count = (n - off) // size
            if count:
                raw = np.frombuffer(data, dtype=RAW_LEAF, count=count, offset=off)
                fits = (raw["type"] == PERF_RECORD_SAMPLE) & (raw["size"] == size)
                run = count if fits.all() else int(fits.argmin())
                if run:
                    runs.append(raw[:run])
                    off += run * size
                    continue
            rtype, misc, rsize = RECORD_HEADER.unpack_from(data, off)
            if rsize < 8 or off + rsize > n:
                break
            if rtype == PERF_RECORD_SAMPLE:  # with chains (a ring recorded with stacks, replayed): the loop
                chained, rest = self._split_chains(data[off:])
                return runs + chained, others + rest
            others.append(self._other(data, rtype, misc, off, rsize))
            off += rsize
        return runs, others

    def _accept(self, raw: np.ndarray) -> np.ndarray:
        """The samples of runs of :data:`RAW_LEAF` that are kept, as :data:`LEAF_DTYPE` (the same
        tests as :meth:`_accept_chains`, on whole arrays)."""
        mine = raw["pid"] == self.pid
        if self._kids:
            mine |= _lookup(dict.fromkeys(self._kids, 0), raw["pid"])[0]
        keep = mine
        unsure = ~mine & (raw["time"] >= np.uint64(self._unsure_from))
        if unsure.any():
            self._unsure += raw[unsure].tobytes()
        self.foreign += len(raw) - int(mine.sum()) - int(unsure.sum())
        tid = raw["tid"]
        known, owner = _lookup(self._id_tid, raw["ident"], self._id_tid_sorted)
        other = known & (owner != tid) & mine  # sampled through another thread's event
        if other.any():
            dup = other & _lookup(dict.fromkeys(self._own, 0), tid)[0]  # ... and through its own too
            self.duplicates += int(dup.sum())
            keep = keep & ~dup
        user = (raw["misc"] & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_USER
        ticks = keep & ~user
        if ticks.any():
            self.kernel_samples += int(ticks.sum())
            if not self.kernel:
                keep = keep & user
        kept = raw[keep] if not keep.all() else raw
        out = np.empty(len(kept), dtype=LEAF_DTYPE)
        out["ip"] = kept["ip"]
        out["tid"] = kept["tid"]
        out["time"] = kept["time"]
        if self.kernel and ticks.any():
            out["ip"][~user[keep]] = np.uint64(KERNEL_KEY)
        return out

    def _is_followed(self, pid: int) -> bool:
        return pid == self.pid or pid in self._kids

    def _adopt(self, pid: int, ppid: int) -> None:
        """A child forked by a followed process (``children``): followed, with modules of its own."""
        if self.children and pid != ppid and self._is_followed(ppid) and not self._is_followed(pid):
            # a fork keeps its parent's name and modules: a child already gone when its record is read
            # (an unwatched run reads its rings at their batch, stop 47) is named and keyed all the same
            parent = self._kids.get(ppid) or [self.target_comm or process_comm(ppid), self.modules]
            self._kids[pid] = [process_comm(pid) or parent[0], parent[1], set()]

    def _record(self, data: bytes, rtype: int, misc: int, off: int, size: int, exits: List[int]) -> None:
        """A LOST, FORK, EXIT, MMAP or COMM record (the target's, or a followed child's)."""
        if rtype == PERF_RECORD_LOST:
            self.lost += LOST_RECORD.unpack_from(data, off + 8)[1]
        elif rtype == PERF_RECORD_FORK:
            rpid, ppid, tid, ptid, _ = TASK_RECORD.unpack_from(data, off + 8)
            self._adopt(rpid, ppid)
            if self._is_followed(rpid) and tid not in self._t:
                parent = self._t.get(ptid)
                self._thread(tid, parent.owner if parent is not None else ptid, rpid)
        elif rtype == PERF_RECORD_EXIT:
            rpid, _, tid, _, t = TASK_RECORD.unpack_from(data, off + 8)
            if self._is_followed(rpid):
                exits.append((tid, t))
        elif rtype == PERF_RECORD_MMAP:
            pid, addr, length, pgoff, path, t = mmap_record(data, off, size)
            if self._is_followed(pid) and path.startswith("/"):
                self._mapped(pid, t, addr, length, pgoff, path)
        elif rtype == PERF_RECORD_COMM and misc & PERF_RECORD_MISC_COMM_EXEC:
            rpid, name = comm_record(data, off, size)
            if rpid == self.pid:
                self.target_comm = name
            kid = self._kids.get(rpid)
            if kid is not None:  # a child's exec: another program, other modules
                kid[:] = [name, None, set()]

    def _kernel_sample(self, recs: list, tid: int, t: int, chain: bytes) -> None:
        """A tick that hit kernel mode: counted; kept as :data:`KERNEL_KEY` with ``kernel``
        (its chain is the user stack below the system call), dropped without."""
        self.kernel_samples += 1
        if self.kernel:
            recs.append((KERNEL_KEY, tid, t, chain))
