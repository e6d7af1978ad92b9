#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_kernel
short_description: Install a Proxmox kernel series and pin the boot to it
description:
  - Makes the host boot a kernel of O(series) (for example 6.14 instead of 6.8.12).
  - When no kernel of the series is installed, installs O(package) with C(apt-get install -y)
    (C(DEBIAN_FRONTEND=noninteractive)) if O(install) is true.
  - Pins the newest installed kernel of the series, or O(version). With C(proxmox-boot-tool) the pin is made by
    C(proxmox-boot-tool kernel pin), after checking that C(proxmox-boot-tool kernel list) lists the version;
    when proxmox-boot-tool manages the ESPs C(proxmox-boot-tool refresh) follows, because a pin on such hosts
    only writes the pin file.
  - Without proxmox-boot-tool (plain GRUB) it writes C(/etc/default/grub.d/proxmox-kernel-pin.cfg) the way
    proxmox-boot-tool does (C(GRUB_DEFAULT="gnulinux-advanced-<id>>gnulinux-<ver>-advanced-<id>"), the id taken
    from C(/boot/grub/grub.cfg)) and runs C(update-grub).
  - The pin files are planned on pvetune's change set, so they are backed up, recorded for rollback.yml and
    restored if a pin or refresh command fails. A host already pinned to the version runs no command.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  package:
    description: Package that installs the newest kernel of the series (a Debian package name).
    type: str
    default: proxmox-kernel-6.14
  series:
    description: Kernel series the host should run, C(<major>.<minor>).
    type: str
    default: "6.14"
  version:
    description:
      - Exact kernel version to pin (for example C(6.14.8-2-pve)) instead of the newest installed one of the
        series. Must belong to O(series); validated as a kernel release string.
    type: str
  pin:
    description: Pin the boot to the chosen kernel.
    type: bool
    default: true
  install:
    description: Install O(package) when no kernel of the series is installed.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details:
      - Nothing is installed or written; only the read-only C(proxmox-boot-tool kernel list) may run.
      - When the series still has to be installed, the kernel to pin is only known after the install, so the pin
        is listed in RV(skipped_commands) instead of being planned.
  diff_mode:
    support: full
    details:
      - Diffs of the pin files it plans on pvetune's change set, and one before/after entry of the package, the
        series' kernels, the pin and the next boot's kernel (a package install is not a file diff).
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - pvetune
  - pvetune.run_id
  - pvetune.pve_host
seealso:
  - module: pvetune_cmdline
    description: Edits the kernel command line in the same boot configuration.
  - module: pvetune_rollback
    description: Restores the pin files this module changed.
"""

EXAMPLES = r"""
- name: Run the 6.14 kernel series
  pvetune_kernel:
    package: proxmox-kernel-6.14
    series: "6.14"
  register: kernel

- name: Pin one exact version, never install
  pvetune_kernel:
    series: "6.14"
    version: 6.14.8-2-pve
    install: false
"""

RETURN = r"""
running:
  description: Running kernel release (C(/proc/sys/kernel/osrelease)).
  returned: always
  type: str
  sample: 6.8.12-4-pve
installed:
  description: Installed kernel releases (C(/boot/vmlinuz-*) and C(/lib/modules/*)), version-sorted.
  returned: always
  type: list
  elements: str
series_installed:
  description: Installed kernel images of the series, version-sorted.
  returned: always
  type: list
  elements: str
series_installed_before:
  description: Installed kernel images of the series before the run.
  returned: always
  type: list
  elements: str
next_boot_before:
  description: Kernel the next boot used according to the boot configuration before the run, or null.
  returned: always
  type: str
version:
  description: Kernel chosen for the pin; null when none is installed yet (check mode before an install).
  returned: always
  type: str
  sample: 6.14.8-2-pve
package:
  description: The package option.
  returned: always
  type: str
package_installed:
  description: True when O(package) was installed by this run (would be, in check mode).
  returned: always
  type: bool
pinned_before:
  description: First line of C(/etc/kernel/proxmox-boot-pin) before the run, or null.
  returned: always
  type: str
pinned_after:
  description: The pinned kernel after the run (planned in check mode), or null.
  returned: always
  type: str
next_boot_kernel:
  description: Kernel the next boot uses according to the boot configuration after the run (kernel.kernel_state),
    or null in check mode and when it cannot be told.
  returned: always
  type: str
loader:
  description: Boot loader and whether proxmox-boot-tool manages the ESPs.
  returned: always
  type: dict
  sample: {"name": "grub", "managed_by_pbt": false, "rule": "grub-default"}
commands:
  description: Commands run, with return code and output.
  returned: always
  type: list
  elements: dict
skipped_commands:
  description: Commands not run, with the reason.
  returned: always
  type: list
  elements: dict
regenerated:
  description: True when a stale C(/boot/grub/grub.cfg) (default entry not matching GRUB_DEFAULT) was regenerated.
  returned: always
  type: bool
reboot_required:
  description: True when the running kernel is not the one the next boot uses (the pinned one).
  returned: always
  type: bool
changes:
  description: Planned or applied file changes.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.concerns.kernel.fix import fix
from ansible.module_utils.pvetune.core.module_common import FIX_ARGS
from ansible.module_utils.pvetune.core.module_exit import finish

ARGUMENT_SPEC = dict(
    FIX_ARGS,
    package={"type": "str", "default": "proxmox-kernel-6.14"},
    series={"type": "str", "default": "6.14"},
    version={"type": "str"},
    pin={"type": "bool", "default": True},
    install={"type": "bool", "default": True},
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    finish(module, *fix(module.params, module.run_command, module.check_mode, module._diff))


if __name__ == "__main__":
    main()
