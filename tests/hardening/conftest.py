"""Hardening tests: malformed input, faults, pmxcfs, injection, locking, check-mode purity.

Makes the project's test helpers importable (tests/, tests/unit for modharness, scripts/ for
scratch_host, tests/pmxcfs) and re-exports ``load_library_module`` under this conftest, because
modharness imports it from whichever ``conftest`` module pytest loaded last.
"""
import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
for _path in (os.path.join(TOP, "tests", "pmxcfs"), os.path.join(TOP, "scripts"), os.path.join(TOP, "tests", "unit"),
              HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

_spec = importlib.util.spec_from_file_location("pvetune_tests_top_conftest", os.path.join(TOP, "tests", "conftest.py"))
_top = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_top)
# Everything tests/conftest.py offers (load_library_module for modharness, FIXTURES, TOP, ...), because the
# module named "conftest" is whichever conftest pytest loaded last (tests/unit imports from it too).
globals().update({k: v for k, v in vars(_top).items() if not k.startswith("_") and k not in globals()})
load_library_module = _top.load_library_module


@pytest.fixture(scope="session")
def hardening_tmp():
    """A 0755 scratch directory on tmpfs (TMPDIR) that the uid-65534 child can traverse."""
    import hardening_lib

    path = hardening_lib.public_tmpdir("pvetune-hardening-")
    yield path
    hardening_lib.rmtree(path)
