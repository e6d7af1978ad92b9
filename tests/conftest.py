"""Make `ansible.module_utils.pvetune` and the library modules importable in tests."""
import os

from modharness import MODULE_UTILS, load_library_module  # noqa: F401  (tests import them from here)

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = os.path.join(TOP, "library")
FIXTURES = os.path.join(TOP, "tests", "fixtures")
