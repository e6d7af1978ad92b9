#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_pcie_mrrs
short_description: Set the PCIe Max Read Request Size of the NVIDIA functions now
description:
  - Selects PCI functions by vendor and class prefix (by default every NVIDIA display controller), optionally
    narrowed to explicit addresses, and sets Device Control MaxReadReq (bits 14:12) where it differs.
  - The write is always masked (C(setpci -s <bdf> CAP_EXP+8.w=5000:7000) for 4096 bytes), so no other Device
    Control bit is written (bit 15 would reset the GPU). Afterwards C(setpci ... CAP_EXP+8.w) and a fresh parse
    of the function's C(config) must both show the target MRRS and every other bit unchanged. The setpci warning
    C(No devices selected) (setpci exits 0 with it) counts as a failure.
  - With O(root) other than C(/) the real setpci runs as C(setpci -A linux-sysfs -O sysfs.path=<root>/sys/bus/pci),
    which reads and writes only the tree's config files.
  - Runtime only; the original Device Control word of each function is recorded in
    C(/var/lib/pvetune/manifest.json) for rollback.yml. MRRS resets to the firmware default at every boot, so the
    fix role installs C(pvetune-pcie-mrrs.service) (C(pvetune-boot pcie-mrrs)), which runs the same code at boot.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  mrrs:
    description: Max Read Request Size in bytes.
    type: int
    default: 4096
    choices: [128, 256, 512, 1024, 2048, 4096]
  vendor:
    description: PCI vendor id of the functions to set, C(0x) and four lower-case hex digits.
    type: str
    default: "0x10de"
  class_prefix:
    description:
      - Leading hex digits of the 24-bit class code, with C(0x) (C(0x03) display controllers, C(0x0302) 3D
        controllers).
    type: str
    default: "0x03"
  bdfs:
    description:
      - Only these functions (canonical C(dddd:bb:dd.f), lower-case). Each must exist and match O(vendor) and
        O(class_prefix), else the module fails before any write. Omitted or empty means every matching function.
    type: list
    elements: str
attributes:
  check_mode:
    support: full
    details: No command runs; RV(functions) gives each function's planned before and after value.
  diff_mode:
    support: full
    details: One runtime-values diff, per function its MaxReadReq in bytes with the Device Control word, before and
      after (C(pcie:<bdf> MaxReadReq = 512 bytes (DevCtl 2137))).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_runtime
    description: Installs the boot unit that sets MaxReadReq again at every boot.
  - module: pvetune_rollback
    description: Puts the original MaxReadReq back with a masked write.
"""

EXAMPLES = r"""
- name: MaxReadReq 4096 on every NVIDIA GPU
  pvetune_pcie_mrrs:
    mrrs: 4096

- name: Only two GPUs
  pvetune_pcie_mrrs:
    bdfs: ["0000:01:00.0", "0000:21:00.0"]
"""

RETURN = r"""
functions:
  description:
    - One entry per selected function. C(action) is C(set) or C(none); C(result) is C(planned) (check mode),
      C(unchanged), C(done), C(failed) or C(skipped) (no setpci for a tree). Device Control words are four hex
      digits as setpci prints them.
  returned: always
  type: list
  elements: dict
  sample: [{"bdf": "0000:01:00.0", "device": "10de:2bb5", "mrrs_before": 512, "mrrs_after": 4096,
            "devctl_before": "2137", "devctl_after": "5137", "action": "set", "result": "done",
            "devctl_readback": "5137", "message": "MaxReadReq 512 -> 4096 bytes (Device Control 2137 -> 5137)"}]
mrrs:
  description: The target size in bytes.
  returned: always
  type: int
reboot_required:
  description: Always false; MRRS is set at runtime (and at every boot by pvetune-pcie-mrrs.service).
  returned: always
  type: bool
changes:
  description:
    - Planned or applied runtime changes; key C(pcie:<bdf>:devctl), before/after Device Control words
      (rollback restores bits 14:12 of the original with a masked write).
  returned: always
  type: dict
skipped_commands:
  description: Commands not run, with the reason (setpci not installed on the machine running the module for a tree).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.concerns.pcie.fix import fix
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS, GPU_SELECT_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(FIX_ARGS, mrrs={"type": "int", "default": 4096, "choices": [128, 256, 512, 1024, 2048, 4096]},
                     bdfs={"type": "list", "elements": "str"}, **GPU_SELECT_ARGS)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *fix(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
