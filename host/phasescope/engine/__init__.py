"""The phase engine package (transitional: re-exports the flat module ``phasescope/engine.py`` until it moves in here)."""

# A package directory shadows the sibling module engine.py, so until that module moves into this
# package it is loaded from its file and its names re-exported; the move replaces this file.
import importlib.util as _util
import pathlib as _pathlib
import sys as _sys

_flat = _pathlib.Path(__file__).resolve().parent.parent / "engine.py"
if _flat.exists():
    _spec = _util.spec_from_file_location("phasescope._engine_flat", _flat)
    _module = _util.module_from_spec(_spec)
    _sys.modules[_spec.name] = _module
    _spec.loader.exec_module(_module)
    globals().update({k: v for k, v in vars(_module).items() if not k.startswith("__")})
