# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every module's one exit: its single call into module_utils returns ``(failed, result, warnings)`` and ``finish``
emits it.  A module of its own so that a read-only module's payload carries no fix code (core/module_common.py, what the
fix modules share, imports the change set)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def finish(module, failed, result, warnings):
    """Emit the warnings, then fail_json or exit_json with the result (both exit the process).

    A result may carry ``deprecations``: a list of dicts with ``msg``, ``version`` and ``collection_name``.  The key
    is taken out of the result and each entry goes to module.deprecate, after the warnings (Ansible returns them in
    the result's own ``deprecations`` and the controller shows them)."""
    for warning in warnings:
        module.warn(warning)
    for deprecation in result.pop("deprecations", None) or []:
        module.deprecate(deprecation["msg"], version=deprecation["version"],
                         collection_name=deprecation["collection_name"])
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


def run_in_process(argument_spec, call, args, check_mode, diff):
    """A controller module's one call made by its action plugin, in the controller's worker: no module process, no
    round trip of a large argument through JSON. ``args`` are validated against the module's own ``argument_spec``
    as AnsibleModule would (types, defaults, choices); the result is what ``finish`` would have returned to
    Ansible: ``failed`` and ``msg`` on a bad argument, the warnings in ``warnings``."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator  # controller side only
    from ansible.module_utils.errors import UnsupportedError

    validated = ArgumentSpecValidator(argument_spec).validate(args)
    if validated.error_messages:  # as AnsibleModule says it (the validator's message lacks the prefix)
        return {"failed": True, "msg": "; ".join(("Unsupported parameters: " if isinstance(e, UnsupportedError) else "")
                                                 + e.msg for e in validated.errors)}
    failed, result, warnings = call(validated.validated_parameters, None, check_mode, diff)
    result = dict(result)
    if failed:
        result["failed"] = True
    if warnings:
        result["warnings"] = list(warnings)
    return result
