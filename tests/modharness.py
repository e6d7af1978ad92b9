"""Run a library module in-process, the way Ansible would, and return its result.

    result = run_module("pvetune_sysctl", {"root": str(tree), "settings": {...}}, check_mode=True, diff=True)

Internal arguments (_ansible_check_mode, _ansible_diff) are passed like the
controller passes them.  A module that calls fail_json returns its result with
``failed: True``; nothing raises unless the module crashes.
"""
import contextlib
import importlib.util
import io
import json
import os
import sys

import ansible.module_utils
from ansible.module_utils import _internal as ansible_internal
from ansible.module_utils.common import warnings as ansible_warnings
from ansible.module_utils.testing import patch_module_args

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE_UTILS = os.path.join(TOP, "module_utils")
LIBRARY = os.path.join(TOP, "library")

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


def run_module(name, args, check_mode=False, diff=False):
    """The module's result (a dict) for ``args``, run in this process."""
    module = load_library_module(name)
    full = dict(args)
    full["_ansible_check_mode"] = check_mode
    full["_ansible_diff"] = diff
    out = io.StringIO()
    # A test that loaded controller code (ansible-doc's parser, say) flips is_controller, and module.warn() then
    # prints to the controller's display instead of landing in the result: run the module as a module.
    was_controller, ansible_internal.is_controller = ansible_internal.is_controller, False
    # Warnings are process-global in a module: each run starts with none, as a real module process does.
    ansible_warnings._global_warnings.clear()
    ansible_warnings._global_deprecations.clear()
    try:
        with patch_module_args(full), contextlib.redirect_stdout(out):
            try:
                module.main()
            except SystemExit:
                pass
    finally:
        ansible_internal.is_controller = was_controller
    text = out.getvalue()
    start = text.find("{")
    if start < 0:
        raise AssertionError("module %s printed no JSON: %r" % (name, text))
    return json.loads(text[start:])
