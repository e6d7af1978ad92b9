"""Make `ansible.module_utils.pvetune` and the library modules importable in tests."""
import os
import pathlib

import pytest
from modharness import MODULE_UTILS, load_library_module  # noqa: F401  (tests import them from here)

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = os.path.join(TOP, "library")
FIXTURES = os.path.join(TOP, "tests", "fixtures")


def pytest_configure(config):
    """The demo fleet is generated, not tracked: make it (seconds) or confirm it is current, once per
    run, in the controller before any xdist worker starts."""
    if hasattr(config, "workerinput"):
        return
    import sys

    sys.path.insert(0, os.path.join(TOP, "scripts"))
    import demo_fleet

    demo_fleet.ensure()


@pytest.fixture
def public_tmp():
    """A scratch directory the unprivileged (uid 65534) child can reach (tests/privdrop.py)."""
    from privdrop import public_tmpdir, rmtree

    path = public_tmpdir("pvetune-test-")
    yield pathlib.Path(path)
    rmtree(path)
