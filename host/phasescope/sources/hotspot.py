"""HotSpot's JIT code keyed by its Java method, read by the host from the JVM's memory (issues 27, 32).

HotSpot recompiles a method again and again (C1, C2, OSR, deoptimized and compiled anew), each time
at other code-cache addresses, and writes no perf map by default: a Java activity's samples then
land on other raw addresses each time it comes back, and the page tracker sees a new phase. So a
sample in an nmethod is keyed by the Java method it runs, as exact mode keys it (agent/jit_keys.c):
the method of the innermost scope of the nmethod's first debug point (PcDesc) after the sampled
instruction, so code inlined into a caller counts as its own method's. Where that point has no
scope, or there is none, the last point at or before the instruction is taken instead (on
JavaWork, an OSR compile's hot loop lies between a scoped point and one without a scope: keyed by
the nmethod's method alone, it took a key of its own); where neither has a scope, the nmethod's
own ``_method``. Everything is read through ``/proc/PID/mem`` (as root) with offsets from
HotSpot's VMStructs tables (``gHotSpotVMStructs``, ``gHotSpotVMTypes`` and their layout words, in
libjvm.so's dynamic symbols), as the serviceability agent reads a JVM:

- the code heaps (``CodeCache::_heaps``), each with its memory, segment map and segment size;
- the blob holding a PC: the segment map's entry of the PC's segment is 0xFF (free) or the number
  of segments to hop back towards the block's first segment (0); the block is a HeapBlock header
  (free or used), the blob right after it (:func:`block_start`);
- an nmethod is a blob whose first word is nmethod's vtable (``_ZTV7nmethod`` + 16, libjvm's
  symbol table), as exact mode checks it.

The key is :func:`~phasescope.sources.perf_map.jit_tag` of ``"java " + holder.name + signature``:
a string, not the ``Method*``, so a method keeps its key across runs (logs compared, like a
module's pages) and two methods never share a code page of the page tracker (``Method*``s lie
tens of bytes apart in metaspace). Where its name cannot be read the string is ``java method
0xADDR`` (the ``Method*``: metaspace, stable while the class lives, never moved by a GC). In the
method's own code (its debug point's scope is the nmethod's root) the key's low bits are that
point's bytecode index << 12, a page of its own: two loops of one method (JavaWork's ``ints`` and
``floats``, both in ``work``) stay apart, as their addresses kept them before; code inlined from
another method has its method alone (each tier inlines and places debug points differently).
On the tuning workloads this beat the method alone (docs/quality.md). C2's counted loops carry
no debug point at all (no safepoint poll with ``-XX:+UseSerialGC``), so a loop's key still
depends on which points the compile placed around it; no key from the debug points alone
stays the same across every recompilation (docs/quality.md, stop 42).

PCs are cached with their blob; a blob is checked again once per :meth:`HotSpotCode.keys` call
(its HeapBlock still used, its vtable and compile id the same: code HotSpot freed and reused gets
another compile id), so freed and reused code is read anew. A process without libjvm.so is never
read; a libjvm.so without the tables or symbols keys nothing (raw addresses, as before).
"""

from __future__ import annotations

import os
import struct
import time
from typing import Dict, List, Optional, Tuple

import numpy as np

from phasescope.sources.elf_symbols import symbol_values
from phasescope.sources.modules import ModuleMap
from phasescope.sources.perf_map import jit_tag

#: libjvm.so's exported VMStructs tables and layout words.
STRUCT_WORDS = ("gHotSpotVMStructs", "gHotSpotVMStructEntryArrayStride", "gHotSpotVMStructEntryTypeNameOffset",
                "gHotSpotVMStructEntryFieldNameOffset", "gHotSpotVMStructEntryOffsetOffset",
                "gHotSpotVMStructEntryIsStaticOffset", "gHotSpotVMStructEntryAddressOffset")
TYPE_WORDS = ("gHotSpotVMTypes", "gHotSpotVMTypeEntryArrayStride", "gHotSpotVMTypeEntryTypeNameOffset",
              "gHotSpotVMTypeEntrySizeOffset")
#: an nmethod's vtable symbol (its objects' first word is this + 16), as agent/jit_keys.c checks
NMETHOD_VTABLE = "_ZTV7nmethod"
#: VMStructs fields read: name -> (type, field). The first nine are exact mode's (agent/jit_keys.c).
FIELDS = {
    "size": ("CodeBlob", "_size"), "code": ("CodeBlob", "_code_begin"), "method": ("CompiledMethod", "_method"),
    "meta": ("nmethod", "_metadata_offset"), "scopes": ("CompiledMethod", "_scopes_data_begin"),
    "pcs": ("nmethod", "_scopes_pcs_offset"), "deps": ("nmethod", "_dependencies_offset"),
    "pc_offset": ("PcDesc", "_pc_offset"), "decode": ("PcDesc", "_scope_decode_offset"),
    "compile_id": ("nmethod", "_compile_id"),
    "heaps": ("CodeCache", "_heaps"), "len": ("GrowableArrayBase", "_len"), "data": ("GrowableArray<int>", "_data"),
    "memory": ("CodeHeap", "_memory"), "segmap": ("CodeHeap", "_segmap"),
    "log2_segment": ("CodeHeap", "_log2_segment_size"), "low": ("VirtualSpace", "_low"),
    "high": ("VirtualSpace", "_high"), "header": ("HeapBlock", "_header"), "used": ("HeapBlock::Header", "_used"),
    "const_method": ("Method", "_constMethod"), "constants": ("ConstMethod", "_constants"),
    "name_index": ("ConstMethod", "_name_index"), "signature_index": ("ConstMethod", "_signature_index"),
    "holder": ("ConstantPool", "_pool_holder"), "klass_name": ("Klass", "_name"),
    "symbol_length": ("Symbol", "_length"), "symbol_body": ("Symbol", "_body"),
}
SIZES = ("HeapBlock", "ConstantPool")  # sizeof, from gHotSpotVMTypes
PC_DESC = 16  # sizeof (PcDesc): four ints
KNOWN_PCS, KNOWN_BLOBS = 200_000, 20_000  # PCs and nmethods remembered, at most (then forgotten at once)
TRIES = 10  # reads of a mapped libjvm.so's tables before it is taken for one without them
FREE_SEGMENT = 0xFF  # CodeHeap's free_sentinel
GONE = (-1, -1)  # what identifies a blob of a process that has exited


def block_start(segmap: bytes, index: int) -> Optional[int]:
    """The first segment of the block holding segment ``index`` of ``segmap`` (the part of a code
    heap's segment map that ends at ``index``): None when that segment is free, -1 when the hops
    lead before the bytes given (read more of the map)."""
    if not 0 <= index < len(segmap) or segmap[index] == FREE_SEGMENT:
        return None
    while segmap[index] > 0:
        index -= segmap[index]
        if index < 0:
            return -1
        if segmap[index] == FREE_SEGMENT:
            return None  # a map being written
    return index


def read_int(data: bytes, at: int) -> Tuple[int, int]:
    """HotSpot's compressed int at ``data[at]`` (CompressedReadStream::read_int, UNSIGNED5: a byte
    below 192 ends it, each next one counts 64 times more) and where the next begins; -1 past the end."""
    total = shift = 0
    for _ in range(5):
        if at >= len(data):
            return -1, at
        b = data[at]
        at += 1
        total += b << shift
        shift += 6
        if b < 192:
            break
    return total, at


class _Blob:
    """One nmethod as read: what identifies it (``check``), its code's start, its own method,
    and its debug points (PcDescs: code offsets, and where each one's scope is in ``scopes``, the
    nmethod's metadata and scope data); a point's method is decoded when a PC first asks."""
    __slots__ = ("check", "code", "method", "pc_offsets", "decodes", "scopes", "scope_at", "_places")

    def __init__(self, check: Tuple[int, int], code: int, method: int, pc_offsets=(), decodes=(),
                 scopes: bytes = b"", scope_at: int = 0):
        self.check, self.code, self.method = check, code, method
        self.pc_offsets, self.decodes = np.asarray(pc_offsets, np.int64), list(decodes)
        self.scopes, self.scope_at = scopes, scope_at  # the metadata (words), then scope data from scope_at
        self._places: Dict[int, Tuple[int, int]] = {}

    def place_at(self, pc: int) -> Tuple[int, int]:
        """``(method, bci)`` of the code at ``pc``: :meth:`scope_of` the first debug point past
        ``pc`` (agent/jit_keys.c's ps_jit_read_key), or of the last one at or before it where that
        one has no scope or there is none; else the nmethod's method and 0."""
        i = int(np.searchsorted(self.pc_offsets, pc - self.code, side="right"))
        if i not in self._places:
            self._places[i] = self.scope_of(i) or self.scope_of(i - 1) or (self.method, 0)
        return self._places[i]

    def scope_of(self, i: int) -> Optional[Tuple[int, int]]:
        """``(method, bci)`` of debug point ``i``: the method of its innermost scope, and its
        bytecode index + 1 where that scope is the nmethod's own method (0 in code inlined from
        another method, whose debug points each tier places elsewhere); None where it has none."""
        if not 0 <= i < len(self.decodes):
            return None
        s = self.scope_at + self.decodes[i]
        if not self.scope_at < s < len(self.scopes):  # 0: no scope (serialized_null)
            return None
        sender, s = read_int(self.scopes, s)
        index, s = read_int(self.scopes, s)
        bci, s = read_int(self.scopes, s)  # ScopeDesc::decode_body: the bci + 1
        if sender < 0 or not 1 <= index <= self.scope_at // 8:
            return None
        return struct.unpack_from("<Q", self.scopes, 8 * (index - 1))[0], max(bci, 0) if sender == 0 else 0


class HotSpotCode:
    """The JIT code of process ``pid``, if it is a HotSpot JVM: :meth:`keys` and :meth:`names`."""

    def __init__(self, pid: int):
        self.pid = pid
        self._state = "unseen"  # until libjvm.so is mapped and its tables read; then "on" or "off"
        self._tries, self._retry_at = 0, 0.0
        self._mem: Optional[int] = None
        self._at: Dict[str, int] = {}
        self._sizes: Dict[str, int] = {}
        self._vtable = 0
        self._heaps: List[Tuple[int, int, int, int]] = []  # (low, high, segmap, log2 segment size)
        self._blobs: Dict[int, _Blob] = {}  # by start
        self._pcs: Dict[int, tuple] = {}  # pc -> (its blob's start, the blob's check, method, bci)
        self._keys: Dict[int, Tuple[int, str]] = {}  # Method* -> (key, name)

    # -- memory ---------------------------------------------------------------------------
    def _read(self, address: int, size: int) -> bytes:
        """``size`` bytes at ``address`` (fewer where unmapped; empty once the process is gone)."""
        if self._mem is None or size <= 0:
            return b""
        try:
            return os.pread(self._mem, size, address)
        except (OSError, OverflowError, ValueError):
            return b""

    def _word(self, address: int, fmt: str = "<Q") -> Optional[int]:
        data = self._read(address, struct.calcsize(fmt))
        return struct.unpack(fmt, data)[0] if len(data) == struct.calcsize(fmt) else None

    def _string(self, address: int, cache: Dict[int, str]) -> Optional[str]:
        if address not in cache:
            data = self._read(address, 96)
            cache[address] = data.split(b"\0", 1)[0].decode("latin-1") if b"\0" in data else None
        return cache[address]

    # -- setup ----------------------------------------------------------------------------
    def _start(self, modules: ModuleMap) -> None:
        """Turned on when libjvm.so is mapped and its tables are read; off for good when it has
        not the symbols, or its tables still cannot be read after :data:`TRIES` tries, half a
        second apart (libjvm.so can be mapped before the loader has relocated its pointers)."""
        jvm = next((m for m in modules.modules if os.path.basename(m.path or m.name).startswith("libjvm.so")), None)
        if jvm is None or time.monotonic() < self._retry_at:
            return
        got = symbol_values(jvm.path or jvm.name, STRUCT_WORDS + TYPE_WORDS + (NMETHOD_VTABLE,))
        if got is None or len(got[1]) < len(STRUCT_WORDS + TYPE_WORDS) + 1:
            self._state = "off"
            return
        low, values = got
        bias = jvm.base - low
        try:
            self._mem = self._mem if self._mem is not None else os.open(f"/proc/{self.pid}/mem", os.O_RDONLY)
        except OSError:
            self._state = "off"
            return
        words = {name: self._word(bias + v) for name, v in values.items() if name != NMETHOD_VTABLE}
        self._at, self._sizes = {}, {}
        try:
            read = None not in words.values() and self._tables(words)
        except (struct.error, ValueError, OverflowError, MemoryError):  # a libjvm.so on disk not the one mapped
            read = False
        if not read:
            self._tries += 1
            self._retry_at = time.monotonic() + 0.5
            if self._tries >= TRIES:
                self._state = "off"
            return
        self._vtable = bias + values[NMETHOD_VTABLE] + 16
        self._state = "on"

    def _rows(self, table: int, stride: int, name_at: int):
        """``(name, row)`` of each entry of a VMStructs table until its end (a null name),
        read 256 entries at a time."""
        strings: Dict[int, str] = {}
        if not 8 <= stride <= 4096 or not 0 <= name_at <= stride - 8:  # not a VMStructs layout
            return
        while True:
            rows = self._read(table, stride * 256)
            for at in range(0, len(rows) - stride + 1, stride):
                name = struct.unpack_from("<Q", rows, at + name_at)[0]
                if name == 0:
                    return
                yield self._string(name, strings), rows[at:at + stride]
            if len(rows) < stride * 256:
                return
            table += stride * 256

    def _tables(self, w: Dict[str, int]) -> bool:
        """Reads the offsets of :data:`FIELDS` (static fields: their address) and sizes of :data:`SIZES`."""
        wanted = {pair: key for key, pair in FIELDS.items()}
        types, strings = {t for t, _ in FIELDS.values()}, {}
        for name, row in self._rows(w["gHotSpotVMStructs"], w["gHotSpotVMStructEntryArrayStride"],
                                    w["gHotSpotVMStructEntryTypeNameOffset"]):
            field = struct.unpack_from("<Q", row, w["gHotSpotVMStructEntryFieldNameOffset"])[0]
            key = wanted.get((name, self._string(field, strings))) if name in types and field else None
            if key is not None:
                static = struct.unpack_from("<i", row, w["gHotSpotVMStructEntryIsStaticOffset"])[0]
                self._at[key] = struct.unpack_from("<Q", row, w["gHotSpotVMStructEntryAddressOffset"] if static
                                                   else w["gHotSpotVMStructEntryOffsetOffset"])[0]
        for name, row in self._rows(w["gHotSpotVMTypes"], w["gHotSpotVMTypeEntryArrayStride"],
                                    w["gHotSpotVMTypeEntryTypeNameOffset"]):
            if name in SIZES:
                self._sizes[name] = struct.unpack_from("<Q", row, w["gHotSpotVMTypeEntrySizeOffset"])[0]
        return set(self._at) == set(FIELDS) and set(self._sizes) == set(SIZES)

    def _read_heaps(self) -> None:
        """The code heaps: ``(low, high, segment map, log2 segment size)`` each (none until the
        code cache is made)."""
        at = self._at
        array = self._word(at["heaps"])
        n = self._word(array + at["len"], "<i") if array else None
        data = self._word(array + at["data"]) if array else None
        heaps = []
        for i in range(n if n and data and 0 < n < 16 else 0):
            heap = self._word(data + 8 * i)
            if heap is None:
                return
            low, high, segmap = (self._word(heap + at[space] + at[end]) for space, end in (
                ("memory", "low"), ("memory", "high"), ("segmap", "low")))
            log2 = self._word(heap + at["log2_segment"], "<i")
            if None in (low, high, segmap, log2) or not 0 < log2 < 16:
                return
            heaps.append((low, high, segmap, log2))
        self._heaps = heaps

    # -- blobs ----------------------------------------------------------------------------
    def _blob_at(self, pc: int) -> Optional[int]:
        """The start of the blob holding ``pc`` (from the segment map), None where none is."""
        for low, high, segmap, log2 in self._heaps:
            if low <= pc < high:
                index = (pc - low) >> log2
                back = min(index, 1023)
                while True:
                    got = block_start(self._read(segmap + index - back, back + 1), back)
                    if got != -1 or back == index:
                        break
                    back = min(index, back * 16)  # the block begins before what was read
                if got is None or got < 0:
                    return None
                return low + ((index - back + got) << log2) + self._sizes["HeapBlock"]
        return None

    def _checked(self, start: int) -> Optional[Tuple[int, int]]:
        """What identifies the nmethod at ``start`` now: its size and compile id (code HotSpot
        frees and reuses gets another), None when it is no nmethod in use (its HeapBlock free, or
        another vtable); :data:`GONE` when nothing can be read (the process has exited: the last
        windows, cut after its end, keep the methods last seen)."""
        at, hb = self._at, self._sizes["HeapBlock"]
        data = self._read(start - hb, hb + max(at["compile_id"], at["size"]) + 4)
        if not data:
            return GONE
        if len(data) < hb + max(at["compile_id"], at["size"]) + 4 or not data[at["header"] + at["used"]]:
            return None
        if struct.unpack_from("<Q", data, hb)[0] != self._vtable:
            return None
        return (struct.unpack_from("<i", data, hb + at["size"])[0],
                struct.unpack_from("<i", data, hb + at["compile_id"])[0])

    def _read_blob(self, start: int, check: Tuple[int, int]) -> Optional[_Blob]:
        at = self._at
        head = self._read(start, max(at[k] for k in ("size", "code", "method", "meta", "scopes", "pcs", "deps")) + 8)
        if len(head) < 8:
            return None
        size = struct.unpack_from("<i", head, at["size"])[0]
        data = self._read(start, size) if 0 < size < 1 << 26 else b""
        if len(data) < size or data[:len(head)] != head:
            return None
        u64 = lambda k: struct.unpack_from("<Q", data, at[k])[0]  # noqa: E731
        i32 = lambda k: struct.unpack_from("<i", data, at[k])[0]  # noqa: E731
        code, method, meta = u64("code"), u64("method"), i32("meta")
        scopes, pcs, deps = u64("scopes") - start, i32("pcs"), i32("deps")
        if not (code >= start and 0 < meta <= scopes <= pcs <= deps <= size):
            return _Blob(check, code, method)
        table = np.frombuffer(data[pcs:pcs + (deps - pcs) // PC_DESC * PC_DESC], np.int32).reshape(-1, PC_DESC // 4)
        return _Blob(check, code, method, table[:, at["pc_offset"] // 4], table[:, at["decode"] // 4].tolist(),
                     data[meta:pcs], scopes - meta)

    # -- keys and names -------------------------------------------------------------------
    def keys(self, pcs: np.ndarray, keys: np.ndarray, modules: ModuleMap) -> np.ndarray:
        """``keys`` (stable keys of ``pcs``) with each raw address in an nmethod keyed by its Java
        method (and bytecode index, in the method's own code)."""
        if self._state == "unseen":
            self._start(modules)
        if self._state != "on":
            return keys
        outside = np.flatnonzero(keys == pcs)
        if not len(outside):
            return keys
        out, checked = keys.copy(), {}
        for i, pc in zip(outside.tolist(), pcs[outside].tolist()):
            method, bci = self._place(pc, checked)
            if method:
                out[i] = self._key(method)[0] | bci << 12
        return out

    def _place(self, pc: int, checked: Dict[Optional[int], Optional[_Blob]]) -> Tuple[int, int]:
        """:meth:`_Blob.place_at` of the code at ``pc`` (method 0: none), blobs checked (and the
        heaps read again for a PC outside them) once per ``checked``."""
        got = self._pcs.get(pc)
        if got is not None:
            blob = self._blob(got[0], checked)
            if blob is not None and blob.check == got[1]:  # the same nmethod: not freed and reused
                return got[2:]
            del self._pcs[pc]
        if not any(low <= pc < high for low, high, _, _ in self._heaps) and None not in checked:
            checked[None] = None  # once per call: the heaps grow (their committed part) and are made at start-up
            self._read_heaps()
        start = self._blob_at(pc)
        blob = self._blob(start, checked) if start is not None else None
        if blob is None or not blob.code <= pc < start + blob.check[0]:
            return 0, 0
        if len(self._pcs) >= KNOWN_PCS:
            self._pcs.clear()
        self._pcs[pc] = (start, blob.check, *blob.place_at(pc))
        return self._pcs[pc][2:]

    def _blob(self, start: int, checked: Dict[int, Optional[_Blob]]) -> Optional[_Blob]:
        """The nmethod at ``start``, checked once per ``checked``: the one read before while it
        is the same, else read anew; None where none is now."""
        if start not in checked:
            now, blob = self._checked(start), self._blobs.pop(start, None)
            if now is None or (now != GONE and (blob is None or blob.check != now)):
                blob = self._read_blob(start, now) if now is not None else None
            if blob is not None:
                if len(self._blobs) >= KNOWN_BLOBS:
                    self._blobs.clear()
                self._blobs[start] = blob
            checked[start] = blob
        return checked[start]

    def _key(self, method: int) -> Tuple[int, str]:
        """The key and name of Java method ``method`` (a ``Method*``), read once."""
        got = self._keys.get(method)
        if got is None:
            name, signature = self._method_name(method)
            text = f"java {name}{signature}" if name else f"java method {method:#x}"
            got = self._keys[method] = (jit_tag(text), f"java {name}" if name else text)
        return got

    def _method_name(self, method: int) -> Tuple[Optional[str], str]:
        """``Holder.name`` (dotted) and the signature of ``method``, (None, "") where unreadable."""
        at = self._at
        const = self._word(method + at["const_method"])
        cp = self._word(const + at["constants"]) if const else None
        holder = self._word(cp + at["holder"]) if cp else None
        klass = self._word(holder + at["klass_name"]) if holder else None
        if not klass:
            return None, ""
        parts = [self._symbol(klass)]
        for index in ("name_index", "signature_index"):
            i = self._word(const + at[index], "<H")
            entry = self._word(cp + self._sizes["ConstantPool"] + 8 * i) if i else None
            parts.append(self._symbol(entry) if entry else None)
        if None in parts:
            return None, ""
        return f"{parts[0].replace('/', '.')}.{parts[1]}", parts[2]

    def _symbol(self, symbol: int) -> Optional[str]:
        n = self._word(symbol + self._at["symbol_length"], "<H")
        data = self._read(symbol + self._at["symbol_body"], n) if n else b""
        return data.decode("utf-8", "replace") if n and len(data) == n else None

    def names(self, pcs: List[int]) -> List[Optional[str]]:
        """``java Holder.name`` of each address in an nmethod seen by :meth:`keys` (else None)."""
        out: List[Optional[str]] = []
        for pc in pcs:
            got = self._pcs.get(pc)
            out.append(self._key(got[2])[1] if got is not None else None)
        return out

    def method_names(self, methods: List[int], modules: ModuleMap) -> List[Optional[str]]:
        """``java Holder.name`` of each ``Method*`` (exact mode's method keys), None where
        unreadable: not a JVM, its tables not read yet, or the process gone."""
        if self._state == "unseen":
            self._start(modules)
        if self._state != "on":
            return [None] * len(methods)
        named = [self._key(m)[1] for m in methods]
        return [name if not name.startswith("java method ") else None for name in named]

    def close(self) -> None:
        if self._mem is not None:
            os.close(self._mem)
            self._mem = None
