#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_collect
short_description: Capture everything the pvetune audit reads into an in-memory snapshot archive
description:
  - Runs the audit's read pass through a recording view of O(root) and packs every file it read, every directory
    it listed (unread entries become empty placeholders), the symlinks on the way (sysfs device links,
    C(/etc/pve/lxc)) and what a snapshot cannot carry as files (an C(ls -l) of the C(/dev/nvidia*) nodes, the
    output of C(nvidia-smi -q) and C(proxmox-boot-tool status) when installed) into a tar.gz.
  - Returns the archive base64-encoded; nothing is written on the host. The pvetune_snapshot module saves and
    unpacks it on the controller, where C(audit.yml) can audit it.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
notes:
  - Run with become; PCI config space beyond 64 bytes and some sysfs files are readable by root only.
  - With a root other than C(/) no command runs; the root's own C(.pvetune/) files (the C(ls -l) of the device
    nodes and the command outputs of an earlier snapshot) are copied instead.
attributes:
  check_mode:
    support: full
    details: The module never writes on the host; in check mode the archive is still built and returned.
  diff_mode:
    support: none
    details: Nothing is changed, so there is nothing to diff.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.pve_host
seealso:
  - module: pvetune_snapshot
    description: Saves the archive on the controller and unpacks it for the audit.
  - module: pvetune_facts
    description: The audit whose read pass this module records.
"""

EXAMPLES = r"""
- name: Capture the host
  pvetune_collect:
  register: snap
"""

RETURN = r"""
archive_b64:
  description: The snapshot as a base64-encoded tar.gz.
  returned: always
  type: str
info:
  description: The snapshot's C(.pvetune/snapshot.json) (host, time, file count, placeholders, command status).
  returned: always
  type: dict
size:
  description: Size of the archive in bytes.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.collect import collect_archive
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(root=dict(type="path", default="/"))


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *collect_archive(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
