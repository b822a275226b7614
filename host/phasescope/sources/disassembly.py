"""Disassembly of hot blocks on the host, with capstone.

The agent ships each block's branch PC (the address of its last instruction), not its start, so
the block is recovered backwards: x86 decoding re-synchronises within a few instructions, so
decoding from a window of bytes before the branch at successive start offsets finds the earliest
start whose instruction stream lands exactly on the branch; the block is what follows the last
control transfer before it, or the last jump target inside it (a loop head).
"""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

WINDOW = 96  # bytes read before the branch
_ARCHES = ("x64", "ia32")

Instruction = Tuple[int, str]  # address, "mnemonic operands"


def _disassembler(arch: str):
    """A capstone disassembler with details, None for an architecture it is not set up for.
    capstone is imported here, on the first block named, not when a run starts."""
    if arch not in _ARCHES:
        return None
    import capstone
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64 if arch == "x64" else capstone.CS_MODE_32)
    md.detail = True
    return md


def _transfers(insn) -> bool:
    import capstone
    return any(insn.group(g) for g in (capstone.CS_GRP_JUMP, capstone.CS_GRP_CALL, capstone.CS_GRP_RET,
                                       capstone.CS_GRP_INT))


def _direct_target(insn) -> Optional[int]:
    """The target of a direct jump, None for anything else."""
    import capstone
    if not insn.group(capstone.CS_GRP_JUMP) or not insn.operands:
        return None
    op = insn.operands[0]
    return op.imm if op.type == capstone.CS_OP_IMM else None


def block_ending_at(read: Callable[[int, int], Optional[bytes]], pc: int, arch: str = "x64",
                    max_instructions: int = 12) -> List[Instruction]:
    """The instructions of the block whose last instruction is at ``pc`` (at most
    ``max_instructions``, the last ones); empty when the bytes cannot be read or decoded.
    ``read(address, size)`` returns the target's bytes or None."""
    md = _disassembler(arch)
    if md is None:
        return []
    lo = max(0, pc - WINDOW)
    data = read(lo, pc - lo + 16)
    if not data:
        return []
    for start in range(0, pc - lo + 1):
        insns = []
        for insn in md.disasm(data[start:], lo + start):
            insns.append(insn)
            if insn.address >= pc:
                break
        if not insns or insns[-1].address != pc:
            continue
        # A block starts after the last control transfer before the branch, or at the last
        # direct jump target inside it (a loop head, for a backward branch).
        body = insns[:-1]
        start_at = max((insn.address + insn.size for insn in body if _transfers(insn)), default=lo + start)
        targets = [t for t in map(_direct_target, insns) if t is not None and start_at < t <= pc]
        start_at = max(targets, default=start_at)
        block = [insn for insn in insns if insn.address >= start_at][-max_instructions:]
        return [(i.address, f"{i.mnemonic} {i.op_str}".strip()) for i in block]
    return []
