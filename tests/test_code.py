"""Hot-block disassembly recovers a block backwards from its branch PC."""

from __future__ import annotations

import pytest
import subprocess

from phasescope.sources.disassembly import block_ending_at

pytestmark = pytest.mark.slow  # every test here starts a real process


def _file_reader(path):
    data = open(path, "rb").read()

    def read(address, size):  # text of a small PIE: file offset == virtual address
        return data[address:address + size]

    return read


def _loop_branch(exe):
    """Address of the hash loop's closing jne and of the loop head, from objdump."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", exe], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    body = out.split("<hash_phase>:")[1].split("\n\n")[0]
    lines = [ln.split(":")[0].strip() for ln in body.strip().splitlines()]
    jne = next(ln for ln in body.splitlines() if "\tjne" in ln)
    head = jne.split()[-2]
    return int(jne.split(":")[0], 16), int(head, 16), [int(a, 16) for a in lines]


def test_recovers_the_loop_body_of_a_compiled_function(build):
    exe = build("phased.c")
    branch, head, addresses = _loop_branch(exe)
    block = block_ending_at(_file_reader(exe), branch, max_instructions=64)
    got = [address for address, _ in block]
    # The block runs from the instruction after the previous branch (the loop head) to the jne.
    assert got == [a for a in addresses if head <= a <= branch]
    assert block[-1][1].startswith("jne")
    assert any(text.startswith("shl") for _, text in block)


def test_unreadable_or_unknown_arch_gives_nothing(build):
    exe = build("phased.c")
    branch, _, _ = _loop_branch(exe)
    assert block_ending_at(lambda a, n: None, branch) == []
    assert block_ending_at(_file_reader(exe), branch, arch="mips") == []
