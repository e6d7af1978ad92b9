# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of pvetune_report: write the fleet reports in-process.

The reports are written on the controller anyway; running the module would mean
serialising every host's results (about 1.2 MB at 64 hosts) into a separate
Python process. The benchmark (bench/results/README.md) measured that as the
largest cost of audit.yml beyond Ansible's own. This plugin validates the same
argument spec and calls the same function as library/pvetune_report.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import ansible.module_utils
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

_MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
if _MODULE_UTILS not in ansible.module_utils.__path__:
    # The project's module_utils (ansible.cfg: module_utils = module_utils) for controller-side use.
    ansible.module_utils.__path__.append(_MODULE_UTILS)

from ansible.module_utils.pvetune.report import write as report  # noqa: E402  pylint: disable=wrong-import-position

ARGS = {
    "hosts": list,
    "audits": dict,
    "dest": str,
    "fail_on": str,
    "run": dict,
    "timestamp": str,
    "junit_warn_as_failure": bool,
    "not_audited": dict,
}
SEVERITIES = ("critical", "high", "medium", "low", "info")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        unknown = sorted(set(args) - set(ARGS))
        if unknown:
            return dict(result, failed=True, msg="unsupported parameters: %s" % ", ".join(unknown))
        args = dict(args)
        for key, kind in ARGS.items():
            if kind is bool and key in args and args[key] is not None:
                try:  # as the module's type=bool takes it: true/false, yes/no, on/off, 1/0
                    args[key] = boolean(args[key], strict=True)
                except TypeError as exc:
                    return dict(result, failed=True, msg="%s must be a bool: %s" % (key, exc))
            if key in args and args[key] is not None and not isinstance(args[key], kind):
                return dict(result, failed=True, msg="%s must be a %s" % (key, kind.__name__))
        if not args.get("hosts") or not args.get("dest"):
            return dict(result, failed=True, msg="hosts and dest are required")
        fail_on = args.get("fail_on") or "high"
        if fail_on not in SEVERITIES:
            return dict(result, failed=True, msg="fail_on must be one of %s" % ", ".join(SEVERITIES))
        try:
            out = report.write_reports([str(h) for h in args["hosts"]], args.get("audits") or {},
                                       os.path.expanduser(str(args["dest"])), fail_on, args.get("run") or {},
                                       args.get("timestamp"), bool(self._task.check_mode),
                                       junit_warn_as_failure=bool(args.get("junit_warn_as_failure")),
                                       not_audited=args.get("not_audited"))
        except (ValueError, OSError, IOError) as exc:
            return dict(result, failed=True, msg=str(exc))
        result.update(out)
        return result
