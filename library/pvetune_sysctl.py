#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_sysctl
short_description: Set kernel sysctls now and persist them in an /etc/sysctl.d drop-in
description:
  - Writes each setting to C(/proc/sys) (runtime) and renders a pvetune-owned drop-in in C(/etc/sysctl.d)
    so the value survives a reboot. Used by pvetune for C(kernel.numa_balancing=0).
  - Checks that no later sysctl.d file (in systemd-sysctl order) overrides the drop-in, and fails if one does.
  - Every file it writes is backed up first and recorded for rollback.yml.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  settings:
    description:
      - Sysctl keys (dotted, for example C(kernel.numa_balancing)) and their values.
      - Keys must match C(^[a-z0-9_]+(\.[a-z0-9_-]+)+$); values may only contain letters, digits, space and C(._:/-).
    type: dict
    required: true
  file:
    description: The drop-in that holds the settings. pvetune owns the whole file.
    type: path
    default: /etc/sysctl.d/90-pvetune.conf
  runtime:
    description: Also set the values in C(/proc/sys) now.
    type: bool
    default: true
  persist:
    description: Write the drop-in.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: Nothing is written; RV(runtime) and RV(changes) are the plan.
  diff_mode:
    support: full
    details: The drop-in's diff and one diff of the runtime values.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_rollback
    description: Removes the drop-in and puts the original runtime values back.
"""

EXAMPLES = r"""
- name: Disable automatic NUMA balancing now and at boot
  pvetune_sysctl:
    settings:
      kernel.numa_balancing: 0
"""

RETURN = r"""
runtime:
  description: Runtime value of each key before and after.
  returned: always
  type: dict
  sample: {"kernel.numa_balancing": {"before": "1", "after": "0"}}
file:
  description: The drop-in path.
  returned: always
  type: str
reboot_required:
  description: Always false; sysctls apply at runtime.
  returned: always
  type: bool
changes:
  description: Planned or applied file and runtime changes.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.concerns.numa.fix import fix
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(
    FIX_ARGS,
    settings=dict(type="dict", required=True),
    file=dict(type="path", default="/etc/sysctl.d/90-pvetune.conf"),
    runtime=dict(type="bool", default=True),
    persist=dict(type="bool", default=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *fix(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
