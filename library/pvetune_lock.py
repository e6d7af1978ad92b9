#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_lock
short_description: Hold a per-host lock for the duration of a pvetune fix run
description:
  - With O(state=present), creates the lock file atomically (O_EXCL) and records the run id, the invocation's
    O(token), the O(controller), the O(owner) and the time. A second run against the same host fails with a message
    that names the holder and its age. Taking the lock again with the same run id and token succeeds (a later task
    of the same invocation); the same run id with another token is another run and is refused.
  - With O(state=absent), releases the lock if this run holds it; a lock held by another run is left alone.
  - A lock older than O(stale_after) seconds is reported as stale; it is only broken with O(break_stale=true), and
    never while a pvetune module process still changes the host (a module outlives a controller that died; every
    write announces its pid in C(/run/pvetune/busy.<pid>) while it runs).
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  run_id:
    required: true
  state:
    description: Take (V(present)) or release (V(absent)) the lock.
    type: str
    choices: [present, absent]
    default: present
  path:
    description: The lock file. Under C(/run) it disappears with a reboot, which is what a crashed run needs.
    type: path
    default: /run/pvetune/fix.lock
  owner:
    description: Who takes the lock (shown to a second run), for example the controller's user and host name.
    type: str
    default: ""
  token:
    description:
      - The invocation's token (up to 64 lowercase hex digits), fixed once per ansible-playbook invocation (the
        C(token) that M(pvetune_run_check) returns). Empty for a caller without one (matched by run id alone).
    type: str
    default: ""
  controller:
    description: The controller host and the pid of its ansible-playbook process, shown to a second run.
    type: str
    default: ""
  stale_after:
    description: Age in seconds after which a lock held by another run counts as stale.
    type: int
    default: 21600
  break_stale:
    description: Take over a stale lock held by another run.
    type: bool
    default: false
notes:
  - O(run_id) names the run that takes or releases the lock.
attributes:
  check_mode:
    support: partial
    details:
      - Nothing is written. A lock held by another run is still reported and fails the task, as in a real run.
      - Taking the lock reports no change (RV(holder) is the lock that would be written); releasing a lock this
        run holds reports the change.
  diff_mode:
    support: none
    details: No diff; RV(holder) shows the lock.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_preflight
    description: Checks the run's inputs before the lock is taken and anything is changed.
"""

EXAMPLES = r"""
- name: Only one fix run per host
  pvetune_lock:
    run_id: "{{ pvetune_run_id }}"
    owner: "{{ lookup('env', 'USER') }}@{{ lookup('pipe', 'hostname') }}"

- name: Release it
  pvetune_lock:
    run_id: "{{ pvetune_run_id }}"
    state: absent
"""

RETURN = r"""
holder:
  description: The lock's content (run id, token, controller, owner, time taken) after the call, or empty when released.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.core.lock import manage_lock
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(
    root=dict(type="path", default="/"),
    run_id=dict(type="str", required=True),
    state=dict(type="str", default="present", choices=["present", "absent"]),
    path=dict(type="path", default="/run/pvetune/fix.lock"),
    owner=dict(type="str", default=""),
    stale_after=dict(type="int", default=21600),
    break_stale=dict(type="bool", default=False),
    token=dict(type="str", default="", no_log=False),
    controller=dict(type="str", default=""),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *manage_lock(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
