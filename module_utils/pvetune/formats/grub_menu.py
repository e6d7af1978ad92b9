# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GRUB's generated files: the menu entry ids of GRUB_DEFAULT / grub.cfg and /boot/grub/grubenv
(saved_entry, next_entry)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.formats.kernel_cmdline import BootConfigError
from ansible.module_utils.pvetune.formats.kernel_version import validate_kernel_version

_GRUB_ID_RE = re.compile(r"^gnulinux-advanced-(?P<id>[^>]+)>gnulinux-(?P<ver>.+)-(?:advanced|recovery)-(?P=id)$")

_GRUB_TITLE_RE = re.compile(r"^[^>]+>.*, with Linux (?P<ver>\S+?)(?: \(recovery mode\))?$")


def grub_default_kernel(value):
    """What a GRUB_DEFAULT / saved_entry value selects: (kernel version or None, form).

    Forms: "entry0" (unset, 0 or the simple top entry: the newest kernel),
    "id" (``gnulinux-advanced-<id>>gnulinux-<ver>-advanced-<id>``, as written by
    proxmox-boot-tool), "title" (``Advanced options ...>..., with Linux <ver>``),
    "saved" (see grubenv), "index" (another menu position), "unknown".
    """
    value = (value or "").strip()
    if value in ("", "0") or value.startswith("gnulinux-simple-"):
        return None, "entry0"
    if value == "saved":
        return None, "saved"
    for rx, form in ((_GRUB_ID_RE, "id"), (_GRUB_TITLE_RE, "title")):
        m = rx.match(value)
        if m:
            try:
                return validate_kernel_version(m.group("ver")), form
            except BootConfigError:
                return None, "unknown"
    if re.match(r"^\d+(>\d+)*$", value):
        return None, "index"
    return None, "unknown"


def parse_grubenv(text):
    env = {}
    for line in (text or "").splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        env[k] = v
    return env
