# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fix modules share: the options every fix module takes, the GPU selection of the PCIe modules, and the
one exit of the modules whose planner returns ``(failed, result, warnings)``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


FIX_ARGS = {"root": {"type": "path", "default": "/"}, "run_id": {"type": "str"}}
GPU_SELECT_ARGS = {"vendor": {"type": "str", "default": "0x10de"}, "class_prefix": {"type": "str", "default": "0x03"}}


def finish(module, failed, result, warnings):
    """Emit the warnings, then fail_json or exit_json with the result (both exit the process)."""
    for warning in warnings:
        module.warn(warning)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)
