# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bootargs concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "boot.cmdline",
        "summary": "required args configured in the boot loader the host really uses, and effective",
        "title": "Kernel command line has the required arguments (configured and effective)",
        "severity": "high",
        "expected": "{cmdline_required_str} configured in the active boot loader and present in /proc/cmdline",
        "rationale": (
            "Boot arguments only take effect through the boot loader the host really uses: GRUB reads "
            "/etc/default/grub(.d), systemd-boot (ZFS on UEFI) reads /etc/kernel/cmdline through "
            "proxmox-boot-tool. Editing the other one changes nothing."
        ),
        "remediation": (
            "GRUB: add the args to GRUB_CMDLINE_LINUX_DEFAULT and run update-grub (proxmox-boot-tool refresh when "
            "it manages the ESPs); systemd-boot: edit /etc/kernel/cmdline and run proxmox-boot-tool refresh; then "
            "reboot."
        ),
        "fix_tag": "cmdline",
        "reboot": "yes",
    },
)
