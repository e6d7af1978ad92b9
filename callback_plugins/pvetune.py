# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible's default screen output, without the tasks that have nothing to say.

A fix run is about twenty tasks per host, most of them bookkeeping (argument validation, the lock, the audits
before and after, the record) that end "ok" with nothing to read. On a fleet their "ok: [host]" lines bury the
diffs an operator runs --check --diff for. This callback prints what the default one prints, except an "ok"
result of which it would print only "ok: [host]" (unchanged, no warning or deprecation, no debug message).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: pvetune
type: stdout
short_description: Ansible's default output without the uneventful "ok" results
version_added: "0.3.0"
description:
  - >-
    Ansible's default stdout callback, except that an "ok" result of which the default callback would print only
    "ok [host]" (unchanged, no warning or deprecation, no debug message) is not printed, nor is its task banner
    when no other host's result is (as with O(display_skipped_hosts=false)). With C(-v) or
    O(hide_uneventful=false) every result is printed again.
  - Changed, failed and unreachable results, includes, diffs and the recap are printed as the default callback
    prints them; skipped results as O(display_skipped_hosts) says (the project's ansible.cfg turns it off).
  - Under ansible-runner (AWX, the tests) the runner's own stdout callback replaces this one; its events carry
    every result.
author:
  - pvetune contributors (@pvetune)
extends_documentation_fragment:
  - default_callback
  - result_format_callback
options:
  hide_uneventful:
    description: Hide "ok" results with nothing to say.
    type: bool
    default: true
    env:
      - name: PVETUNE_HIDE_UNEVENTFUL
    ini:
      - section: callback_pvetune
        key: hide_uneventful
requirements:
  - set as stdout_callback in ansible.cfg (the project's ansible.cfg does)
"""

from ansible.playbook.task_include import TaskInclude
from ansible.plugins.callback.default import CallbackModule as DefaultCallback


def uneventful(result):
    """True for an "ok" result of which the default callback would print only "ok: [host]": unchanged (diffs are
    printed for changed results only), no warning or deprecation, not a debug-style result."""
    return not (result.get("changed") or result.get("warnings") or result.get("deprecations")
                or result.get("exception") or result.get("_ansible_verbose_always"))


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "pvetune"

    def v2_runner_on_ok(self, result):
        data = result.result if hasattr(result, "result") else result._result
        task = result.task if hasattr(result, "task") else result._task
        if (self.get_option("hide_uneventful") and not isinstance(task, TaskInclude)
                and not self._run_is_verbose(result) and uneventful(data)):
            return
        super(CallbackModule, self).v2_runner_on_ok(result)
