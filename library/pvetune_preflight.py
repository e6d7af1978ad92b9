#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_preflight
short_description: Check every input of a pvetune fix run before anything is changed
description:
  - Validates the values a fix run takes from the inventory or the command line (run id, policy, CT ids, PCI
    addresses, cgroup version, root) with the same checks the fix modules apply, so that a bad value stops the
    run on a host before the first fix changes anything or runs any command.
  - Reads only the CPU's identity, cpufreq and cpuidle state through O(root), to resolve the policy for this host's
    CPU vendor and idle driver (the boot arguments it needs); writes nothing and runs no command.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  run_id:
    required: true
  policy:
    description: The pvetune_policy overrides (see docs/checks.md).
    type: dict
    default: {}
  ctids:
    description: CT ids for the LXC fix (integers or digit strings, 100-999999999).
    type: list
    elements: raw
    default: []
  bdfs:
    description: PCI addresses for the MaxReadReq fix (dddd:bb:dd.f, lower-case hex).
    type: list
    elements: raw
    default: []
  cgroup_version:
    description: auto, 1 or 2.
    type: str
    default: auto
  legacy_reboot_ok:
    description:
      - The value of the deprecated playbook variable C(reboot_ok), when it is set (the rollout role passes it).
      - Its only effect here is a deprecation warning (in the result's C(deprecations)); the role already
        uses it as the default of C(pvetune_reboot_ok), which replaces it.
      - Unset (null) when the run does not use the old name.
    type: bool
    version_added: "0.2.0"
notes:
  - O(root) is only validated, the way the fix modules validate it; nothing is read from it.
attributes:
  check_mode:
    support: full
    details: Reads, writes and runs nothing in any mode, so check mode changes nothing in its behaviour.
  diff_mode:
    support: none
    details: Nothing is changed, so there is nothing to diff.
  platform:
    platforms: posix
    details: Runs on the Proxmox VE host like the fix modules, reading only the CPU state the policy depends on.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
seealso:
  - module: pvetune_lock
    description: The per-host lock the fix run takes next.
"""

EXAMPLES = r"""
- name: Check the inputs of this run
  pvetune_preflight:
    run_id: "{{ pvetune_run_id }}"
    policy: "{{ pvetune_policy }}"
    ctids: "{{ pvetune_lxc_ctids }}"
    bdfs: "{{ pvetune_pcie_bdfs }}"
"""

RETURN = r"""
policy:
  description: The effective policy as this host sees it (C(host_cpu) is its CPU vendor profile,
    C(cmdline_required) includes the vendor's boot arguments unless the inventory gave the whole list).
  returned: success
  type: dict
ctids:
  description: The CT ids, normalised.
  returned: success
  type: list
  elements: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.core.module_exit import finish
from ansible.module_utils.pvetune.preflight import preflight

ARGUMENT_SPEC = {
    "run_id": {"type": "str", "required": True},
    "policy": {"type": "dict", "default": {}},
    "ctids": {"type": "list", "elements": "raw", "default": []},
    "bdfs": {"type": "list", "elements": "raw", "default": []},
    "cgroup_version": {"type": "str", "default": "auto"},
    "root": {"type": "path", "default": "/"},
    "legacy_reboot_ok": {"type": "bool"},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *preflight(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
