# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fix modules share: the options every fix module takes, the GPU selection of the PCIe modules, the one
flow of a planner that writes through a ChangeSet (fix_call), and the one exit: every module's single call into
module_utils returns ``(failed, result, warnings)``, which core/module_exit.py's ``finish`` emits."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.core.changeset import ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.runner import RunFailed, Runner

FIX_ARGS = {"root": {"type": "path", "default": "/"}, "run_id": {"type": "str"}}
GPU_SELECT_ARGS = {"vendor": {"type": "str", "default": "0x10de"}, "class_prefix": {"type": "str", "default": "0x03"}}


def fix_call(params, run_command, check_mode, diff, validate, run):
    """``(failed, result, warnings)`` of a fix that writes through a ChangeSet.

    ``validate(params)`` checks every option before anything is read for writing or run (a ValueError names
    it); then the root, the ChangeSet and the Runner are made and ``run(fsroot, runner, changes, request, warn)``
    returns the result, or raises RunFailed (msg and result keys, e.g. the paths put back).  With ``diff`` the
    ChangeSet's diffs follow the result's own (a planner may put a summary entry first)."""
    warnings = []
    try:
        request = validate(params)
        fsroot = FsRoot(params["root"])
        changes = ChangeSet(fsroot, check_mode=check_mode, run_id=params["run_id"])
    except ValueError as exc:
        return True, {"msg": str(exc)}, warnings
    try:
        result = run(fsroot, Runner(fsroot, run_command), changes, request, warnings.append)
    except RunFailed as exc:
        return True, exc.fail_kwargs(), warnings
    if diff:
        result["diff"] = list(result.get("diff") or []) + changes.diffs()
    return False, result, warnings
