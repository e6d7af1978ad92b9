# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of pvetune_waves: plan (or judge the next wave) in-process, with the module's own argument spec,
and give the planner ansible's forks, which a module cannot see."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import ansible.module_utils
from ansible import context
from ansible.plugins.action import ActionBase

_MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
if _MODULE_UTILS not in ansible.module_utils.__path__:
    # The project's module_utils (ansible.cfg: module_utils = module_utils) for controller-side use.
    ansible.module_utils.__path__.append(_MODULE_UTILS)

from ansible.module_utils.pvetune.cluster.waves import ARGUMENT_SPEC, waves_call  # noqa: E402  pylint: disable=wrong-import-position
from ansible.module_utils.pvetune.core.module_exit import run_in_process  # noqa: E402  pylint: disable=wrong-import-position


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        if args.get("forks") is None and context.CLIARGS.get("forks"):
            args["forks"] = int(context.CLIARGS["forks"])
        result.update(run_in_process(ARGUMENT_SPEC, waves_call, args, bool(self._task.check_mode),
                                     bool(self._task.diff)))
        return result
