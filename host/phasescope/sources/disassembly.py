"""Disassembly of hot blocks on the host, with capstone.

The agent ships each block's branch PC (the address of its last instruction), not its start, so
the block is recovered backwards: x86 decoding re-synchronises within a few instructions, so
decoding from a window of bytes before the branch at successive start offsets finds the earliest
start whose instruction stream lands exactly on the branch; the block is what follows the last
control transfer before it, or the last jump target inside it (a loop head).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
from typing import Callable, List, Optional, Tuple

WINDOW = 96  # bytes read before the branch
_MODES = {"x64": 1 << 3, "ia32": 1 << 2}  # CS_MODE_64, CS_MODE_32 of CS_ARCH_X86 (3)
_ARCH_X86, _OPT_DETAIL, _OPT_ON = 3, 2, 3
_JUMP, _CALL, _RET, _INT = 1, 2, 3, 4  # CS_GRP_*: groups an instruction that transfers control is in
_IMMEDIATE = re.compile(r"(0x[0-9a-f]+|[0-9]+)")  # capstone's text of an immediate operand

Instruction = Tuple[int, str]  # address, "mnemonic operands"


class _Detail(ctypes.Structure):  # the head of capstone's cs_detail: the groups (the rest is per arch)
    _fields_ = (("regs_read", ctypes.c_uint16 * 20), ("regs_read_count", ctypes.c_ubyte),
                ("regs_write", ctypes.c_uint16 * 20), ("regs_write_count", ctypes.c_ubyte),
                ("groups", ctypes.c_ubyte * 8), ("groups_count", ctypes.c_ubyte))


class _Insn(ctypes.Structure):  # capstone's cs_insn
    _fields_ = (("id", ctypes.c_uint), ("address", ctypes.c_uint64), ("size", ctypes.c_uint16),
                ("bytes", ctypes.c_ubyte * 24), ("mnemonic", ctypes.c_char * 32), ("op_str", ctypes.c_char * 160),
                ("detail", ctypes.POINTER(_Detail)))


_lib = None


def _capstone():
    """The capstone library the ``capstone`` package ships, through ctypes, loaded on the first
    block named. The package's own import loads the modules of all its 18 architectures (about
    75 ms of CPU, in every run that names a hot block); x86 needs none of them."""
    global _lib
    if _lib is None:
        spec = importlib.util.find_spec("capstone")  # finds the package without running it
        path = os.path.join(spec.submodule_search_locations[0], "lib", "libcapstone.so") if spec else ""
        if not os.path.exists(path):  # a package built against the system's library
            from ctypes.util import find_library
            path = find_library("capstone")
        lib = ctypes.CDLL(path)
        lib.cs_open.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t))
        lib.cs_option.argtypes = (ctypes.c_size_t, ctypes.c_int, ctypes.c_size_t)
        lib.cs_disasm.restype = ctypes.c_size_t
        lib.cs_disasm.argtypes = (ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64,
                                  ctypes.c_size_t, ctypes.POINTER(ctypes.POINTER(_Insn)))
        lib.cs_free.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        lib.cs_close.argtypes = (ctypes.POINTER(ctypes.c_size_t),)
        _lib = lib
    return _lib


class _Decoded:
    """One decoded instruction: where, its text, whether it transfers control, a direct jump's target."""

    __slots__ = ("address", "size", "text", "transfers", "target")

    def __init__(self, insn: _Insn):
        self.address, self.size = insn.address, insn.size
        mnemonic, ops = insn.mnemonic.decode(), insn.op_str.decode()
        self.text = f"{mnemonic} {ops}".strip()
        d = insn.detail.contents
        groups = set(d.groups[:d.groups_count])
        self.transfers = bool(groups & {_JUMP, _CALL, _RET, _INT})
        self.target = int(ops, 0) if _JUMP in groups and _IMMEDIATE.fullmatch(ops) else None


class _Disassembler:
    """A capstone handle for x86 (64- or 32-bit) with details (the groups); one per block, closed
    after it (a handle is not for two threads at once)."""

    def __init__(self, mode: int):
        self.lib, self._handle = _capstone(), ctypes.c_size_t()
        if self.lib.cs_open(_ARCH_X86, mode, ctypes.byref(self._handle)) != 0:
            raise OSError("capstone: cs_open failed")
        self.handle = self._handle.value
        self.lib.cs_option(self.handle, _OPT_DETAIL, _OPT_ON)

    def __enter__(self) -> "_Disassembler":
        return self

    def __exit__(self, *exc) -> None:
        self.lib.cs_close(ctypes.byref(self._handle))

    def disasm(self, code: bytes, address: int, until: int) -> List[_Decoded]:
        """The instructions ``code`` at ``address`` decodes to, up to the first at or past ``until``."""
        insns = ctypes.POINTER(_Insn)()
        n = self.lib.cs_disasm(self.handle, code, len(code), address, 0, ctypes.byref(insns))
        out: List[_Decoded] = []
        try:
            for i in range(n):
                out.append(_Decoded(insns[i]))
                if out[-1].address >= until:
                    break
            return out
        finally:
            if n:
                self.lib.cs_free(insns, n)


def block_ending_at(read: Callable[[int, int], Optional[bytes]], pc: int, arch: str = "x64",
                    max_instructions: int = 12) -> List[Instruction]:
    """The instructions of the block whose last instruction is at ``pc`` (at most
    ``max_instructions``, the last ones); empty when the bytes cannot be read or decoded.
    ``read(address, size)`` returns the target's bytes or None."""
    if arch not in _MODES:
        return []
    lo = max(0, pc - WINDOW)
    data = read(lo, pc - lo + 16)
    if not data:
        return []
    with _Disassembler(_MODES[arch]) as md:
        for start in range(0, pc - lo + 1):
            insns = md.disasm(data[start:], lo + start, pc)
            if not insns or insns[-1].address != pc:
                continue
            # A block starts after the last control transfer before the branch, or at the last
            # direct jump target inside it (a loop head, for a backward branch).
            start_at = max((i.address + i.size for i in insns[:-1] if i.transfers), default=lo + start)
            targets = [i.target for i in insns if i.target is not None and start_at < i.target <= pc]
            start_at = max(targets, default=start_at)
            return [(i.address, i.text) for i in insns if i.address >= start_at][-max_instructions:]
    return []
