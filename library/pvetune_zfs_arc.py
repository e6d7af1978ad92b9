#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_zfs_arc
short_description: Cap the ZFS ARC in modprobe.d and in the loaded zfs module
description:
  - Reads the ARC's parameters and kstat (C(/sys/module/zfs/parameters), C(/proc/spl/kstat/zfs/arcstats)), what
    C(/etc/modprobe.d/) sets and C(MemTotal) (the audit's readers), and sets C(zfs_arc_max) to O(arc_max), with a
    C(zfs_arc_min) of half of it where ZFS's default minimum (1/32 of RAM) would not be below it.
  - Writes C(/etc/modprobe.d/zz-pvetune-zfs.conf) (after the installer's C(zfs.conf), so its values win) and the
    parameters of the loaded module, the minimum first when the new maximum is below the current minimum (OpenZFS
    takes a runtime maximum only above the minimum). Refuses when a later modprobe.d file would override it.
  - With root on ZFS runs C(update-initramfs -u -k all) (zfs loads from the initramfs). Reads the ARC's C(c_max)
    back; no reboot is needed when the loaded module took the new maximum.
  - Without the zfs module loaded there is nothing to cap; the result says so.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  arc_max:
    description:
      - C(auto) (the Proxmox VE installer's 10% of RAM, at most 16 GiB) or MiB, the policy key C(zfs_arc_max).
    type: raw
    default: auto
attributes:
  check_mode:
    support: full
    details: Nothing is written or run; the diff shows the file and the parameters.
  diff_mode:
    support: full
    details: The modprobe.d file, before and after, and the runtime parameters.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_rollback
    description: Removes the file, writes the parameters' old values back and regenerates the initramfs.
"""

EXAMPLES = r"""
- name: Cap the ARC as the Proxmox VE installer does
  pvetune_zfs_arc:
    arc_max: auto

- name: Cap the ARC at 32 GiB
  pvetune_zfs_arc:
    arc_max: 32768
"""

RETURN = r"""
arc_max:
  description: The maximum set, in bytes (absent when zfs is not loaded).
  returned: when zfs is loaded
  type: int
arc_min:
  description: The minimum set, in bytes, or null when ZFS's default minimum is below the maximum.
  returned: when zfs is loaded
  type: int
ram:
  description: MemTotal in bytes.
  returned: when zfs is loaded
  type: int
reboot_required:
  description:
    - False when the loaded module took the values (the ARC's c_max reads the new maximum); true when it kept its
      c_max (the file applies when zfs loads again).
  returned: always
  type: bool
changes:
  description: The planned or written file and runtime parameters.
  returned: always
  type: dict
commands:
  description: The commands run (update-initramfs), with their exit status.
  returned: when zfs is loaded
  type: list
  elements: dict
skipped_commands:
  description: Commands not run, with the reason (check mode, a root other than /).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.concerns.storage.fix import fix
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(FIX_ARGS, arc_max={"type": "raw", "default": "auto"})


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *fix(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
