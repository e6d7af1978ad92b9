"""Run a library module in-process, the way Ansible would, and return its result.

    result = run_module("pvetune_sysctl", {"root": str(tree), "settings": {...}}, check_mode=True, diff=True)

Internal arguments (_ansible_check_mode, _ansible_diff) are passed like the
controller passes them.  A module that calls fail_json returns its result with
``failed: True``; nothing raises unless the module crashes.
"""
import contextlib
import io
import json

from ansible.module_utils.testing import patch_module_args

from conftest import load_library_module


def run_module(name, args, check_mode=False, diff=False):
    module = load_library_module(name)
    full = dict(args)
    full["_ansible_check_mode"] = check_mode
    full["_ansible_diff"] = diff
    out = io.StringIO()
    with patch_module_args(full), contextlib.redirect_stdout(out):
        try:
            module.main()
        except SystemExit:
            pass
    text = out.getvalue()
    start = text.find("{")
    if start < 0:
        raise AssertionError("module %s printed no JSON: %r" % (name, text))
    return json.loads(text[start:])
