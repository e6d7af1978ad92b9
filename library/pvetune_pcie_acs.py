#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_pcie_acs
short_description: Clear the ACS redirect bits on the PCIe switch ports between NVIDIA GPUs
description:
  - Finds every pair of NVIDIA GPUs (O(vendor), O(class_prefix)) that shares a PCIe switch, from the sysfs device
    tree, and the ports strictly below their deepest shared bridge, exactly as the audit's C(pcie.acs) check does.
  - On each such port with the Access Control Services capability, clears ACS Control Request Redirect, Completion
    Redirect and Egress Control with a masked write (C(setpci -s <port> ECAP_ACS+6.w=0000:002c)); Source
    Validation, Translation Blocking and Upstream Forwarding keep their values. Afterwards
    C(setpci ... ECAP_ACS+6.w) and a fresh parse of the port's C(config) must both show the new word.
  - A port with any function bound to vfio-pci below it is never written (ACS keeps that device's IOMMU group
    apart); it is listed in RV(left) with a warning. A port whose config or ACS capability cannot be read makes
    the module fail before any write.
  - With O(root) other than C(/) the real setpci runs as C(setpci -A linux-sysfs -O sysfs.path=<root>/sys/bus/pci)
    and touches only the tree's config files.
  - Runtime only; the original ACS Control word of each port is recorded in C(/var/lib/pvetune/manifest.json) for
    rollback.yml. The kernel sets ACS again when it enumerates the ports at boot, so the fix role passes
    RV(boot_ports) to C(pvetune-pcie-mrrs.service), which clears them at every boot.
version_added: "0.2.0"
author:
  - pvetune contributors (@pvetune)
options:
  vendor:
    description: PCI vendor id of the GPUs, C(0x) and four lower-case hex digits.
    type: str
    default: "0x10de"
  class_prefix:
    description: Leading hex digits of the GPUs' 24-bit class code, with C(0x).
    type: str
    default: "0x03"
attributes:
  check_mode:
    support: full
    details: No command runs; RV(ports) gives each port's planned ACS Control before and after.
  diff_mode:
    support: full
    details: One runtime-values diff, per port its ACS Control word and flags before and after
      (C(pcie:<port> ACSCtl = 001d (SrcValid+ TransBlk- ReqRedir+ ...))).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_pcie_mrrs
    description: Sets MaxReadReq on the same GPUs; the same boot unit re-applies both.
  - module: pvetune_rollback
    description: Puts the original redirect bits back with a masked write.
"""

EXAMPLES = r"""
- name: Let GPU peer traffic stay inside the PCIe switches
  pvetune_pcie_acs:
  when: pvetune_fix_policy.pcie_acs_fix
"""

RETURN = r"""
ports:
  description:
    - One entry per port with ACS between two GPUs that share a switch (vfio-pci ports excepted). C(action) is
      C(set) or C(none); C(result) C(planned) (check mode), C(unchanged), C(done), C(failed) or C(skipped).
  returned: always
  type: list
  elements: dict
  sample: [{"bdf": "0000:42:08.0", "pairs": ["0000:43:00.0-0000:44:00.0"], "ctrl_before": "001d",
            "ctrl_after": "0011", "action": "set", "result": "done",
            "message": "ACS Control 001d -> 0011 (SrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd+ ...)"}]
left:
  description: Ports not touched because a function below them is bound to vfio-pci, with the reason.
  returned: always
  type: list
  elements: dict
boot_ports:
  description: The ports the boot unit keeps clear (every entry of RV(ports)).
  returned: always
  type: list
  elements: str
reboot_required:
  description: Always false.
  returned: always
  type: bool
changes:
  description: Planned or applied runtime changes; key C(pcie:<port>:acsctl), before/after ACS Control words.
  returned: always
  type: dict
skipped_commands:
  description: Commands not run, with the reason (no setpci on the machine running the module for a tree).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.concerns.pcie.acs_fix import fix
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS, GPU_SELECT_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(FIX_ARGS, **GPU_SELECT_ARGS)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *fix(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
