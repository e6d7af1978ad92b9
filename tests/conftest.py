"""Make `ansible.module_utils.pvetune` and the library modules importable in tests."""
import importlib.util
import os
import sys

import ansible.module_utils

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE_UTILS = os.path.join(TOP, "module_utils")
LIBRARY = os.path.join(TOP, "library")
FIXTURES = os.path.join(TOP, "tests", "fixtures")

if MODULE_UTILS not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(MODULE_UTILS)


def load_library_module(name):
    """Import library/<name>.py as a Python module (for unit tests of modules)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(LIBRARY, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
