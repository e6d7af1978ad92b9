# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Output of proxmox-boot-tool: ``status`` (ESPs and how each boots) and ``kernel list`` (installed and
pinned kernels)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import re

from ansible.module_utils.pvetune.formats.kernel_cmdline import BootConfigError
from ansible.module_utils.pvetune.formats.kernel_version import validate_kernel_version

# --------------------------------------------------------------------------
# Boot loader detection
# --------------------------------------------------------------------------
_STATUS_ESP_RE = re.compile(r"^(?P<uuid>\S+) is configured with:\s*(?P<rest>.*)$")

_STATUS_LOADER_RE = re.compile(r"(uefi|grub)\s*(?:\(versions:\s*([^)]*)\))?")


def parse_pbt_status(text):
    """Parse ``proxmox-boot-tool status`` output.

    Returns {"booted": "uefi"|"legacy"|None, "esps": [{"uuid", "loaders": {"uefi"|"grub": [versions]},
    "loader": "systemd-boot"|"grub"|"both"|None}], "warnings": [...], "errors": [...],
    "managed": True|False|None, "unparsed": [...]}.
    """
    res = {"booted": None, "esps": [], "warnings": [], "errors": [], "managed": None, "unparsed": []}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("Re-executing"):
            continue
        m = re.match(r"^System currently booted with (uefi|legacy bios)$", line)
        if m:
            res["booted"] = "uefi" if m.group(1) == "uefi" else "legacy"
            continue
        m = _STATUS_ESP_RE.match(line)
        if m:
            loaders = collections.OrderedDict()
            for kind, versions in _STATUS_LOADER_RE.findall(m.group("rest")):
                loaders[kind] = [v.strip() for v in versions.split(",") if v.strip()]
            kinds = set(loaders)
            loader = ("both" if len(kinds) == 2 else "systemd-boot" if kinds == {"uefi"}
                      else "grub" if kinds == {"grub"} else None)
            res["esps"].append({"uuid": m.group("uuid"), "loaders": dict(loaders), "loader": loader})
            continue
        if line.startswith("WARN"):
            res["warnings"].append(line)
        elif line.startswith("E:"):
            res["errors"].append(line)
            if "proxmox-boot-uuids" in line and "does not exist" in line:
                res["managed"] = False
        else:
            res["unparsed"].append(line)
    if res["esps"]:
        res["managed"] = True
    return res


def parse_pbt_kernel_list(text):
    """Parse ``proxmox-boot-tool kernel list`` -> {"manual", "auto", "pinned", "next_boot", "unparsed"}."""
    res = {"manual": [], "auto": [], "pinned": None, "next_boot": None, "unparsed": []}
    headers = {"Manually selected kernels:": "manual", "Automatically selected kernels:": "auto",
               "Pinned kernel:": "pinned", "Kernel pinned on next-boot:": "next_boot"}
    section = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        if line in headers:
            section = headers[line]
            continue
        if line == "None." and section is not None:
            continue
        try:
            validate_kernel_version(line)
        except BootConfigError:
            res["unparsed"].append(line)
            continue
        if section in ("manual", "auto"):
            res[section].append(line)
        elif section in ("pinned", "next_boot") and res[section] is None:
            res[section] = line
        else:
            res["unparsed"].append(line)
    return res
