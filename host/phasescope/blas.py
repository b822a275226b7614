"""phasescope's own numpy runs its BLAS on one thread (issue 31).

numpy's OpenBLAS starts a worker thread per other CPU as it loads, and an idle worker busy-waits
a while before it sleeps: on this project's 2-core VMs 0.1 s of CPU, a quarter of a sampled run's
start-up (docs/performance.md, stop 40). phasescope's arrays are a window's hundred
keys, where BLAS threads bring nothing. OpenBLAS reads ``OPENBLAS_NUM_THREADS`` once, as it
loads, so the variable is set to 1 while numpy is imported and put back as it was at once: a
process phasescope starts afterwards (a target, a tool) sees the environment it was given.
"""

from __future__ import annotations

import importlib.util
import os
import sys

VARIABLE = "OPENBLAS_NUM_THREADS"


class _OnOneThread:
    """Meta path finder: while ``package``'s ``__init__`` runs, the variable is 1. It stays on the
    path until that has run once to its end (an availability check's ``find_spec`` or a failed
    import leave it in place for the real import, or the retry)."""

    def __init__(self, package: str):
        self.package = package
        self._looking = False

    def find_spec(self, name, path=None, target=None):
        if name != self.package or self._looking:
            return None
        self._looking = True  # the search below passes through this finder again
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._looking = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, finder = spec.loader, self
        run = loader.exec_module

        def exec_module(module):
            before = os.environ.get(VARIABLE)
            os.environ[VARIABLE] = "1"
            try:
                run(module)
            finally:
                del loader.exec_module  # this loader object's own method again
                if before is None:
                    del os.environ[VARIABLE]
                else:
                    os.environ[VARIABLE] = before
            if finder in sys.meta_path:  # loaded: nothing more to do
                sys.meta_path.remove(finder)

        loader.exec_module = exec_module  # this spec's own loader object, for this one import
        return spec


def one_blas_thread(package: str = "numpy") -> None:
    """Have numpy (``package``), when it first loads in this process, start no BLAS threads; no
    effect once it has loaded."""
    if package not in sys.modules and not any(isinstance(f, _OnOneThread) and f.package == package
                                              for f in sys.meta_path):
        sys.meta_path.insert(0, _OnOneThread(package))
