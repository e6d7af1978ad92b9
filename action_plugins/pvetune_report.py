# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of pvetune_report: write the fleet reports in-process.

The reports are written on the controller anyway; running the module would mean
serialising every host's results (about 1.2 MB at 64 hosts) into a separate
Python process. The benchmark (bench/results/README.md) measured that as the
largest cost of audit.yml beyond Ansible's own. This plugin validates the same
argument spec (library/pvetune_report.py's ARGUMENT_SPEC) and calls the same function.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import ansible.module_utils
from ansible.plugins.action import ActionBase

_MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
if _MODULE_UTILS not in ansible.module_utils.__path__:
    # The project's module_utils (ansible.cfg: module_utils = module_utils) for controller-side use.
    ansible.module_utils.__path__.append(_MODULE_UTILS)

from ansible.module_utils.pvetune.core.module_exit import run_in_process  # noqa: E402  pylint: disable=wrong-import-position
from ansible.module_utils.pvetune.report.write import ARGUMENT_SPEC, write_fleet_reports  # noqa: E402  pylint: disable=wrong-import-position


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        result.update(run_in_process(ARGUMENT_SPEC, write_fleet_reports, dict(self._task.args),
                                     bool(self._task.check_mode), bool(self._task.diff)))
        return result
