"""One rule for the files a command is given: an output that is also an input (the file standard
input reads included), or two outputs that are the same file, are refused (one line, exit 2)
before anything is opened for writing, and so is an output that is a file of /proc or /sys.

"The same file" is the same inode (a hard link or another spelling of a path that exists) or the
same resolved path (one that does not exist yet). Each command names its inputs and outputs as
``{label: argparse dest}``; ``--events unix:PATH`` names the socket file PATH. A command may add
inputs that are no option of its own (the live monitor's target executable) as ``(label, path)``.

``-`` as an input is standard input (:data:`STDIN`; one input at most). ``-`` as an output is
standard output (:data:`STDOUT`, written in place) for the outputs a command names in
``to_stdout``: those of a command that writes nothing else there. Any other output ``-`` is
refused, saying why (``stdout_why``: what standard output carries), since a file named ``-`` was
written without a word before stop 46.
"""

from __future__ import annotations

import os
import stat
from typing import Dict, List, Optional, Sequence, Tuple

from phasescope.errors import InputError
from phasescope.sinks.base import STDOUT, Dash

#: what an input ``-`` becomes: standard input, as a path every reader opens (a pipe is read as a FIFO)
STDIN = Dash("/dev/stdin", "standard input")

def _path(args, dest: str) -> Optional[str]:
    value = getattr(args, dest, None)
    if not isinstance(value, str) or not value:
        return None
    if dest == "events":
        return value[len("unix:"):] if value.startswith("unix:") else None
    return value


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (see the module docstring)."""
    try:
        return _inode(os.stat(a)) == _inode(os.stat(b))
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def is_stdin(path: str) -> bool:
    """Whether ``path`` is the regular file phasescope's standard input reads (``< FILE`` in the
    shell); a device such as /dev/null loses nothing when written."""
    try:
        st, sin = os.stat(path), os.fstat(0)
    except OSError:
        return False
    return stat.S_ISREG(sin.st_mode) and _inode(st) == _inode(sin)


def _inode(st: os.stat_result) -> Tuple[int, int]:
    return st.st_dev, st.st_ino


def is_kernel_file(path: str) -> bool:
    """Whether ``path`` is a file of the kernel's /proc or /sys: it opens for writing, and the first
    write fails (EINVAL), after the target has run. A symlink there (``/proc/self/fd/1``) counts as the
    file it names."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return False
    kernel = set()
    for root in ("/proc", "/sys"):
        try:
            kernel.add(os.stat(root).st_dev)
        except OSError:
            pass
    return dev in kernel


def check_files(args, inputs: Dict[str, str], outputs: Dict[str, str],
                more_inputs: Sequence[Tuple[str, str]] = (), to_stdout: Sequence[str] = (),
                stdout_why: str = "standard output is not free") -> None:
    """InputError when an output is an input or another output (``label: dest`` maps, and the
    ``(label, path)`` pairs of ``more_inputs``), or is empty (``--log "$UNSET"`` had asked for
    nothing and lost the log without a word), or is ``-`` and its dest not in ``to_stdout`` (the
    message says ``stdout_why``); an output ``-`` in ``to_stdout`` becomes :data:`STDOUT` in ``args``,
    an input ``-`` :data:`STDIN`."""
    for label, dest in {**inputs, **outputs}.items():
        if getattr(args, dest, None) == "":
            raise InputError(f"{label}: an empty value names no file" + (" or address" if dest == "events" else ""))
    dashes = [label for label, dest in inputs.items() if getattr(args, dest, None) == "-"]
    if len(dashes) > 1:
        raise InputError(f"{' and '.join(dashes)} are both - (standard input): give files")
    for label, dest in inputs.items():
        if getattr(args, dest, None) == "-":
            setattr(args, dest, STDIN)
    for label, dest in outputs.items():
        if getattr(args, dest, None) == "-":
            if dest not in to_stdout:
                raise InputError(f"{label} -: {stdout_why}; give a file name (./- for a file named -)")
            setattr(args, dest, STDOUT)
    ins: List[Tuple[str, str]] = [(label, p) for label, dest in inputs.items() if (p := _path(args, dest))]
    ins += [(label, p) for label, p in more_inputs if p]
    outs: List[Tuple[str, str]] = [(label, p) for label, dest in outputs.items() if (p := _path(args, dest))]
    for i, (label, path) in enumerate(outs):
        if is_kernel_file(path):
            raise InputError(f"{label} {path}: a file of the kernel's /proc or /sys, which takes no output")
        for in_label, in_path in ins:
            if same_file(path, in_path):
                raise InputError(f"{label} {path} is the input {in_label}: phasescope never writes over its input")
        if is_stdin(path):
            raise InputError(f"{label} {path} is phasescope's standard input (the target's, in pipe mode): "
                             "phasescope never writes over its input")
        for other, other_path in outs[:i]:
            if same_file(path, other_path):
                raise InputError(f"{other} and {label} are the same file ({path}): give each output its own")
