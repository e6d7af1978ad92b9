# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible's default screen output, without the tasks that have nothing to say, and with control characters escaped.

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
  - Control characters that a terminal would act on (escape sequences that clear the screen or set the window
    title, NUL, a carriage return) are printed as C(\xNN) in every line Ansible prints while this callback is
    loaded, since results carry host-derived text; Ansible's own colour codes are kept.
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

import re

from ansible.playbook.task_include import TaskInclude
from ansible.utils import color
from ansible.plugins.callback.default import CallbackModule as DefaultCallback

# What a terminal acts on instead of printing: C0 controls but tab and newline, DEL, the C1 controls. Host-derived
# text (a CT config line in a refusal, a file a module read) may carry any of them: ESC [2J clears the operator's
# screen, ESC ]0;... sets the window title, a CR overwrites the line. They are printed as \xNN. When Ansible
# colours its output, its colour codes (SGR: ESC [ digits m, which it puts into the recap) pass unchanged.
_CONTROL = u"[\x00-\x08\x0b-\x1f\x7f-\x9f]"
_CONTROL_OR_COLOUR = re.compile(u"\x1b\\[[0-9;]*m|" + _CONTROL)


def escape_controls(text, keep_colour=False):
    """``text`` with every control character a terminal would act on written as \\xNN; with ``keep_colour`` the
    colour codes (SGR) stay."""
    if not keep_colour:
        return re.sub(_CONTROL, lambda m: "\\x%02x" % ord(m.group(0)), text)
    return _CONTROL_OR_COLOUR.sub(lambda m: m.group(0) if len(m.group(0)) > 1 else "\\x%02x" % ord(m.group(0)),
                                  text)


def install_escaping(display):
    """Make ``display`` (Ansible's one Display, through which every line on screen goes: results, warnings, the
    [ERROR] line of a failed task, which carries the task's message verbatim) escape control characters."""
    if getattr(display.display, "pvetune_escapes", False):
        return
    original = display.display

    def display_escaped(msg, *args, **kwargs):
        if isinstance(msg, str):
            msg = escape_controls(msg.replace("\r\n", "\n"), keep_colour=color.ANSIBLE_COLOR)
        return original(msg, *args, **kwargs)

    display_escaped.pvetune_escapes = True
    display.display = display_escaped


def uneventful(result):
    """True for an "ok" result of which the default callback would print only "ok: [host]": unchanged (diffs are
    printed for changed results only), no warning or deprecation, not a debug-style result."""
    return not (result.get("changed") or result.get("warnings") or result.get("deprecations")
                or result.get("exception") or result.get("_ansible_verbose_always"))


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "pvetune"

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        install_escaping(self._display)

    def v2_runner_on_ok(self, result):
        data = result.result if hasattr(result, "result") else result._result
        task = result.task if hasattr(result, "task") else result._task
        if (self.get_option("hide_uneventful") and not isinstance(task, TaskInclude)
                and not self._run_is_verbose(result) and uneventful(data)):
            return
        super(CallbackModule, self).v2_runner_on_ok(result)
