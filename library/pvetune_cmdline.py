#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_cmdline
short_description: Ensure or remove kernel command line arguments in the host's boot configuration
description:
  - Makes the kernel command line the boot loader passes contain every argument in O(ensure) exactly once
    and none of O(remove), for example C(amd_pstate=active processor.max_cstate=1) on an AMD EPYC GPU host.
  - "GRUB: arguments that only need adding go to a pvetune drop-in (O(dropin), sourced after C(/etc/default/grub));
    an argument that must be replaced or removed (a conflicting C(processor.max_cstate=5)) is edited in place in
    the file that sets it, keeping every other byte of that file."
  - "systemd-boot (Proxmox VE on ZFS/UEFI): the first line of C(/etc/kernel/cmdline) is rewritten, the rest of
    the file is kept."
  - "After a change the configuration is activated: C(update-grub) on plain GRUB hosts,
    C(proxmox-boot-tool refresh) when proxmox-boot-tool manages the ESPs (systemd-boot, or GRUB on ESPs).
    If that command fails, the files written are restored byte for byte and the module fails."
  - On plain GRUB hosts a C(/boot/grub/grub.cfg) that does not carry the configured arguments (configuration
    edited but C(update-grub) never run) is regenerated too.
  - Every file it writes is backed up first and recorded for rollback.yml.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  ensure:
    description:
      - Arguments that must be on the command line exactly once, as C(key) or C(key=value).
        An existing argument with the same key (C(-) and C(_) are the same) is replaced in place.
      - Each must match the key/value rules of pvetune's argument validation (no spaces, quotes only around a
        whole value, no shell characters).
    type: list
    elements: str
    default: []
  remove:
    description:
      - Arguments to remove, as a key (every value) or C(key=value) (only that value).
    type: list
    elements: str
    default: []
  loader:
    description:
      - Which boot configuration to edit. V(auto) detects it as described in docs/DESIGN.md
        ("Boot loader detection"), asking C(proxmox-boot-tool status) when the ESP list exists.
    type: str
    choices: [auto, grub, systemd-boot]
    default: auto
  dropin:
    description: GRUB drop-in pvetune owns for added arguments. Must be C(/etc/default/grub.d/<name>.cfg).
    type: path
    default: /etc/default/grub.d/90-pvetune.cfg
  refresh:
    description:
      - Run C(update-grub) or C(proxmox-boot-tool refresh) after a change. With V(false) the configuration
        is written but not activated (reported in RV(skipped_commands)).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details:
      - Nothing is written and only the read-only C(proxmox-boot-tool status) may run; RV(configured_args) and
        RV(changes) are the plan.
  diff_mode:
    support: full
    details:
      - One diff per boot configuration file it edits (the drop-in, C(/etc/default/grub) or
        C(/etc/kernel/cmdline)). The C(grub.cfg) that C(update-grub) regenerates is not diffed.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_kernel
    description: Pins the kernel series, in the same boot configuration.
  - module: pvetune_rollback
    description: Restores the boot configuration files this module changed.
"""

EXAMPLES = r"""
- name: AMD P-state in active mode and shallow C-states for GPU latency
  pvetune_cmdline:
    ensure:
      - amd_pstate=active
      - processor.max_cstate=1
  register: cmdline

- name: Remove an argument in every value
  pvetune_cmdline:
    remove:
      - intel_idle.max_cstate
"""

RETURN = r"""
loader:
  description: Boot loader whose configuration was edited, and how it was decided.
  returned: always
  type: dict
  sample: {"name": "grub", "managed_by_pbt": false, "rule": "grub-default",
           "reason": "no /etc/kernel/proxmox-boot-uuids: plain GRUB from /etc/default/grub", "notes": []}
configured_args:
  description: Kernel arguments the boot configuration passes after the change (planned in check mode).
  returned: always
  type: list
  elements: str
  sample: ["quiet", "amd_pstate=active", "processor.max_cstate=1"]
configured_args_before:
  description: Kernel arguments the boot configuration passed before the change.
  returned: always
  type: list
  elements: str
effective_args:
  description: Arguments of the running kernel (C(/proc/cmdline)); null when it cannot be read.
  returned: always
  type: list
  elements: str
arg_changes:
  description: Planned argument changes (action add/replace/remove, old, new).
  returned: always
  type: list
  elements: dict
files:
  description: Boot configuration files changed (or to be changed in check mode).
  returned: always
  type: list
  elements: str
  sample: ["/etc/default/grub.d/90-pvetune.cfg"]
commands:
  description: Commands run, with return code and output.
  returned: always
  type: list
  elements: dict
  sample: [{"cmd": ["update-grub"], "rc": 0, "stdout": "", "stderr": "Generating grub configuration file ..."}]
skipped_commands:
  description: Commands not run, with the reason (check mode, no stand-in for a non-C(/) root, refresh=false).
  returned: always
  type: list
  elements: dict
  sample: [{"command": "update-grub", "reason": "check mode"}]
regenerated:
  description: True when the generated boot configuration was stale and was (or would be) regenerated without a
    file change.
  returned: always
  type: bool
reboot_required:
  description: True when the managed arguments of the configured command line differ from the running kernel's.
  returned: always
  type: bool
changes:
  description: Planned or applied file changes.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.concerns.bootargs.fix import LOADERS, fix
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish
from ansible.module_utils.pvetune.formats.grub_edit import DROPIN_PATH

ARGUMENT_SPEC = dict(
    FIX_ARGS,
    ensure={"type": "list", "elements": "str", "default": []},
    remove={"type": "list", "elements": "str", "default": []},
    loader={"type": "str", "choices": list(LOADERS), "default": "auto"},
    dropin={"type": "path", "default": DROPIN_PATH},
    refresh={"type": "bool", "default": True},
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *fix(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
