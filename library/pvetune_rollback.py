#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_rollback
short_description: Undo pvetune's changes on a host from its manifest
description:
  - Reads C(/var/lib/pvetune/manifest.json), where every pvetune fix module records the original bytes of each
    file it changes (and which files it created) and the original of each runtime value.
  - Restores every modified file byte for byte (CT configs under C(/etc/pve) in place), removes every file and
    symlink pvetune created (boot units, the boot helper and its library, C(/etc/pvetune), drop-ins), and puts
    runtime values back (amd_pstate mode, governors, EPP, sysctls, PCIe MaxReadReq through a masked setpci).
  - A file changed by someone else since pvetune wrote it is a conflict; with conflicts nothing is written unless
    O(force=true).
  - When a boot configuration file is restored, runs C(update-grub) or C(proxmox-boot-tool refresh), like the
    kernel command line module; if that fails the files are put back as they were and the module fails.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  force:
    description: Restore and remove also files that changed since pvetune wrote them.
    type: bool
    default: false
  runtime:
    description: Also put runtime values back.
    type: bool
    default: true
  refresh:
    description: Run C(update-grub) / C(proxmox-boot-tool refresh) after restoring boot configuration files.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: Nothing is written and no command runs; RV(restored), RV(removed) and RV(runtime) (result
      C(would restore)) are the plan.
  diff_mode:
    support: partial
    details: One diff per file restored or removed, except the files pvetune shipped (runtime library, helper,
      units), which are one summary entry (paths, sizes, sha256). Runtime values put back are listed in RV(runtime),
      not in the diff.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_cmdline
    description: One of the fix modules whose changes are recorded in the manifest.
  - module: pvetune_runtime
    description: Installs the boot units this module removes.
"""

EXAMPLES = r"""
- name: Undo pvetune on this host
  pvetune_rollback:
  register: undone
"""

RETURN = r"""
restored:
  description: Files put back to their original bytes.
  returned: always
  type: list
  elements: str
removed:
  description: Files and symlinks pvetune had created, removed.
  returned: always
  type: list
  elements: str
conflicts:
  description: Files left alone because they changed since pvetune wrote them (with why).
  returned: always
  type: list
  elements: dict
runtime:
  description: Runtime values put back (key, before, after, result).
  returned: always
  type: list
  elements: dict
reboot_required:
  description: True when boot configuration was restored (the running kernel still has pvetune's arguments).
  returned: always
  type: bool
commands:
  description: Commands run (refresh, daemon-reload, setpci).
  returned: always
  type: list
  elements: dict
skipped_commands:
  description: Commands not run, with why.
  returned: always
  type: list
  elements: dict
next_boot:
  description:
    - Where pvetune had pinned a kernel, the kernel the next boot starts after the rollback (after_rollback, with the
      loader's reason) against the one it started before the fix (before_fix). Rollback keeps the kernel packages
      fix.yml installed; when the two differ, its C(message) says so and how to boot the old one (also as a
      warning). Null where pvetune pinned no kernel, and in check mode.
  returned: always
  type: dict
  sample: {"before_fix": "6.8.12-4-pve", "after_rollback": "6.14.8-2-pve", "reason": "newest installed kernel",
           "message": "the next boot starts 6.14.8-2-pve (...), not 6.8.12-4-pve as before the fix: ..."}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish
from ansible.module_utils.pvetune.rollback import rollback

ARGUMENT_SPEC = dict(
    FIX_ARGS,
    force=dict(type="bool", default=False),
    runtime=dict(type="bool", default=True),
    refresh=dict(type="bool", default=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *rollback(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
