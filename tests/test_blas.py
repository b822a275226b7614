"""phasescope's numpy starts no BLAS threads (issue 31): OPENBLAS_NUM_THREADS is 1 while the
package loads, and as it was before once it has, for every process started afterwards."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import pytest

from phasescope.blas import VARIABLE, one_blas_thread

#: a package that records, as it loads, the variable OpenBLAS reads
PACKAGE = "import os\nSEEN = os.environ.get(%r)\n" % VARIABLE


@pytest.fixture
def package(tmp_path, monkeypatch):
    (tmp_path / "blas_probe").mkdir()
    (tmp_path / "blas_probe" / "__init__.py").write_text(PACKAGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "blas_probe"
    sys.modules.pop("blas_probe", None)


@pytest.mark.parametrize("given", [None, "8"])
def test_the_variable_is_one_while_the_package_loads_and_as_given_after(package, monkeypatch, given):
    if given is None:
        monkeypatch.delenv(VARIABLE, raising=False)
    else:
        monkeypatch.setenv(VARIABLE, given)
    one_blas_thread(package)
    one_blas_thread(package)  # once is enough: a second call adds nothing
    assert importlib.import_module(package).SEEN == "1"
    assert os.environ.get(VARIABLE) == given
    assert not any(getattr(f, "package", None) == package for f in sys.meta_path)


def test_nothing_changes_for_a_package_already_loaded(package, monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    importlib.import_module(package)
    one_blas_thread(package)
    assert not any(getattr(f, "package", None) == package for f in sys.meta_path)


def test_an_availability_check_or_a_failed_import_leaves_the_real_import_on_one_thread(package, tmp_path,
                                                                                      monkeypatch):
    # ``importlib.util.find_spec`` before the import (a common "is it installed?" check) and an
    # import that fails once must not use up the hook: the import that runs gets the variable too.
    monkeypatch.delenv(VARIABLE, raising=False)
    init = tmp_path / "blas_probe" / "__init__.py"
    init.write_text("raise ImportError('not yet')\n")
    one_blas_thread(package)
    assert importlib.util.find_spec(package) is not None
    with pytest.raises(ImportError):
        importlib.import_module(package)
    assert VARIABLE not in os.environ
    sys.modules.pop(package, None)
    init.write_text(PACKAGE)
    importlib.invalidate_caches()
    assert importlib.import_module(package).SEEN == "1" and VARIABLE not in os.environ
    assert not any(getattr(f, "package", None) == package for f in sys.meta_path)
