# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel series fix: install a kernel series and pin the boot to it.

Used by library/pvetune_kernel.py.  Pure functions on top of bootcfg.py.

Pinning does what ``proxmox-boot-tool kernel pin <ver>`` does (proxmox-kernel-helper):

* it refuses a version without /boot/vmlinuz-<ver>;
* it writes <ver> to /etc/kernel/proxmox-boot-pin;
* with an ESP list (/etc/kernel/proxmox-boot-uuids) it only asks for
  ``proxmox-boot-tool refresh``, which syncs the ESPs and, on GRUB ESPs, writes
  the GRUB pin snippet (below) and runs update-grub;
* without one (plain GRUB host) it writes
  /etc/default/grub.d/proxmox-kernel-pin.cfg with
  ``GRUB_DEFAULT="gnulinux-advanced-<id>>gnulinux-<ver>-advanced-<id>"`` (``<id>``
  taken from the ``gnulinux-advanced-<id>' {`` line of /boot/grub/grub.cfg; a
  next-boot pin, if any, wins) and runs update-grub.

pvetune plans the same files on its ChangeSet (so they are backed up, shown in
diff mode and restored if a command fails), then lets proxmox-boot-tool do the
pin itself.  Without proxmox-boot-tool the GRUB files are written by pvetune
and update-grub is run (the "GRUB fallback").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune import bootcfg
from ansible.module_utils.pvetune.bootcfg import BootConfigError

PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]{1,80}\Z")
SERIES_RE = re.compile(r"^\d{1,2}\.\d{1,3}\Z")
META_RE = re.compile(r"^(?:proxmox|pve)-kernel-(\d+\.\d+)\Z")
_ADVANCED_ID_RE = re.compile(r"^.*gnulinux-advanced-(.+)['] \{$", re.M)
PBT = "proxmox-boot-tool"
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}


def validate_package(name):
    """A Debian package name (policy 5.6.1: lower case, digits, + - . ; two characters at least)."""
    if not isinstance(name, str) or not PACKAGE_RE.match(name):
        shown = name if not isinstance(name, str) or len(name) <= 80 else name[:77] + "..."
        raise BootConfigError("package %r is not a Debian package name ([a-z0-9][a-z0-9.+-]{1,80})" % (shown,))
    return name


def validate_series(series):
    if not isinstance(series, str) or not SERIES_RE.match(series):
        raise BootConfigError("series %r must look like 6.14" % (series,))
    return series


def validate_request(package, series, version):
    """Validated (package, series, version); BootConfigError before anything runs."""
    package = validate_package(package)
    series = validate_series(series)
    m = META_RE.match(package)
    if m and m.group(1) != series:
        raise BootConfigError("package %s installs the %s series, not %s" % (package, m.group(1), series))
    if version is not None:
        bootcfg.validate_kernel_version(version)
        if not bootcfg.in_series(version, series):
            raise BootConfigError("version %s is not in the %s series" % (version, series))
    return package, series, version


def series_kernels(images, series):
    """Installed kernel images of ``series``, oldest first (version sort)."""
    return sorted((v for v in images if bootcfg.in_series(v, series)), key=bootcfg.kernel_sort_key)


def choose_version(images, series, version=None):
    """The kernel to pin: ``version`` if given and installed, else the newest of the series; None if none."""
    if version is not None:
        return version if version in images else None
    found = series_kernels(images, series)
    return found[-1] if found else None


def grub_root_devids(grub_cfg_text):
    """The ``<id>`` of every ``gnulinux-advanced-<id>' {`` line (what proxmox-boot-tool's sed extracts)."""
    return [m.group(1) for m in _ADVANCED_ID_RE.finditer(grub_cfg_text or "")]


def grub_pin_entry(version, devid):
    return "gnulinux-advanced-%s>gnulinux-%s-advanced-%s" % (devid, version, devid)


def render_grub_pin(version, devid):
    """/etc/default/grub.d/proxmox-kernel-pin.cfg as proxmox-boot-tool writes it."""
    bootcfg.validate_kernel_version(version)
    if not devid or re.search(r"[\s\"'$`\\]", devid):
        raise BootConfigError("GRUB root device id %r is not usable" % (devid,))
    return 'GRUB_DEFAULT="%s"\n' % grub_pin_entry(version, devid)


def plan_pin_files(version, loader, next_boot=None, grub_cfg_text=None):
    """Files a pin of ``version`` leaves behind: [(path, text)].

    The pin file always; on GRUB hosts also the GRUB pin snippet, for the
    next-boot pin when one is set (as proxmox-boot-tool does).  Raises
    BootConfigError when GRUB's menu entry id cannot be found in grub.cfg
    (proxmox-boot-tool would write a GRUB_DEFAULT that selects nothing).
    """
    bootcfg.validate_kernel_version(version)
    files = [(bootcfg.PIN_FILE, version + "\n")]
    if loader == "grub":
        ids = grub_root_devids(grub_cfg_text)
        if len(ids) != 1:
            raise BootConfigError("%s has %s 'gnulinux-advanced-<id>' submenu line(s); the GRUB default entry for "
                                  "the pin cannot be built (run update-grub first)"
                                  % (bootcfg.GRUB_CFG, "no" if not ids else len(ids)))
        files.append((bootcfg.GRUB_PIN_SNIPPET, render_grub_pin(next_boot or version, ids[0])))
    return files


def pin_commands(version, has_pbt, managed_by_pbt):
    """[(name, args)] that activate a pin (after the planned files are written)."""
    if has_pbt:
        cmds = [(PBT, ["kernel", "pin", version])]
        if managed_by_pbt:
            cmds.append((PBT, ["refresh"]))
        return cmds
    return [("update-grub", [])]


def listed_by_pbt(kernel_list_text, version):
    """(listed, parsed): is ``version`` among proxmox-boot-tool's manual/automatic kernels."""
    parsed = bootcfg.parse_pbt_kernel_list(kernel_list_text)
    return version in parsed["manual"] or version in parsed["auto"], parsed


def install_command(package):
    return "apt-get", ["install", "-y", validate_package(package)]
