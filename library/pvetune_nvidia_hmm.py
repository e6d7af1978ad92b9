#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_nvidia_hmm
short_description: Turn nvidia-uvm's HMM off with a modprobe.d option where the policy wants it off
description:
  - Reads the loaded driver (C(/proc/driver/nvidia/version)), nvidia_uvm's C(uvm_disable_hmm) parameter and what
    C(/etc/modprobe.d/) already sets (the audit's readers), and writes
    C(/etc/modprobe.d/zz-pvetune-nvidia-uvm.conf) (C(options nvidia_uvm uvm_disable_hmm=1)) when HMM should be off
    and no file sets it yet.
  - O(mode=auto) wants HMM off where the driver branch is in the HMM issues table (docs/checks.md), O(mode=disable)
    everywhere.
  - The option applies when nvidia_uvm loads. While the loaded module still runs HMM the result asks for a reboot
    (RV(reboot_required)); the rollout reboots only with C(pvetune_reboot_ok). rollback.yml removes the file.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  mode:
    description: C(auto) or C(disable), the policy key C(nvidia_uvm_hmm).
    type: str
    default: auto
    choices: [auto, disable]
attributes:
  check_mode:
    support: full
    details: Nothing is written; the diff shows the file.
  diff_mode:
    support: full
    details: The modprobe.d file, before (absent) and after.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_rollback
    description: Removes the file.
"""

EXAMPLES = r"""
- name: HMM off where the driver branch has known HMM failures
  pvetune_nvidia_hmm:
    mode: auto
"""

RETURN = r"""
wanted:
  description: Whether HMM should be off on this host (O(mode) and the driver branch).
  returned: always
  type: bool
why:
  description: Why (the policy, or the HMM issues of the driver branch).
  returned: always
  type: str
file:
  description: The modprobe.d file this module writes.
  returned: always
  type: str
loaded:
  description: What the loaded nvidia_uvm does now (C(HMM on), C(HMM off), C(nvidia_uvm not loaded)).
  returned: always
  type: str
reboot_required:
  description: True while HMM should be off and the loaded nvidia_uvm still runs it.
  returned: always
  type: bool
changes:
  description: The planned or written file.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.concerns.nvidia.fix import fix
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(FIX_ARGS, mode={"type": "str", "default": "auto", "choices": ["auto", "disable"]})


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *fix(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
