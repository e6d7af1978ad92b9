# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of pvetune_run_check: give the module's call what only the controller knows, then make it
in-process (core/module_exit.run_in_process, with library/pvetune_run_check.py's ARGUMENT_SPEC).

A play keyword (hosts, serial) is templated before any host is known, from the extra vars alone, while the tasks
see the inventory: the module compares the two (core/runcheck.py, check_play_keywords). Only the controller can
tell an -e value from a group_vars/all one (the implicit localhost gets group_vars/all too): the names of the
extra vars are ansible-core's own parse of the -e options (load_extra_vars, the VariableManager's source, cached
for the run), and the values are each host's hostvars. It also names this invocation (token, controller pid).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import os
import socket

import ansible.module_utils
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.vars import load_extra_vars, merge_hash

_MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
if _MODULE_UTILS not in ansible.module_utils.__path__:
    # The project's module_utils (ansible.cfg: module_utils = module_utils) for controller-side use.
    ansible.module_utils.__path__.append(_MODULE_UTILS)

from ansible.module_utils.pvetune.core.module_exit import run_in_process  # noqa: E402  pylint: disable=wrong-import-position
from ansible.module_utils.pvetune.core.runcheck import (  # noqa: E402  pylint: disable=wrong-import-position
    ARGUMENT_SPEC, PLAY_KEYWORD_VARS, run_check)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        hostvars = task_vars.get("hostvars") or {}
        args = dict(self._task.args)
        args["extra_vars"] = sorted(load_extra_vars(self._loader))
        args["host_vars"] = {}
        # Each host's hostvars cost a variable computation (~17 ms a host); a play of one's own checks no keyword.
        checked = boolean(args.get("play_keywords", True), strict=False)
        scanned = list(args.get("play_hosts") or []) + ["localhost"] if checked else []
        for host in scanned:
            if host in hostvars:  # localhost too, even when implicit
                found = hostvars[host]
                args["host_vars"][host] = {name: found[name] for name in PLAY_KEYWORD_VARS if name in found}
        # In-process, with the module's own argument spec: a module process cost ~0.5 s of controller CPU per run.
        result = merge_hash(result, run_in_process(ARGUMENT_SPEC, run_check, args, bool(self._task.check_mode),
                                                   bool(self._task.diff)))
        # This invocation: a worker's parent is the ansible-playbook process; the token tells two invocations with
        # one run id apart in the host locks.
        result["token"] = binascii.hexlify(os.urandom(16)).decode("ascii")
        result["controller"] = "%s pid %d" % (socket.gethostname(), os.getppid())
        return result
