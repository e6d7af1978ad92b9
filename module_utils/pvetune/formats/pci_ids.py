# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The PCI id database (pci.ids, as lspci reads it): vendor and device names.

Format (pciutils' lib/names-parse.c): ``#`` comments and blank lines; a vendor line is four hex digits, two spaces
and the name at column 0; its device lines follow, one tab in; subsystem lines two tabs in; the class section
starts with ``C `` lines and ends the vendor list.  Pure: the caller reads the file (through the root).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

PCI_IDS_PATHS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids")
_VENDOR = re.compile(r"([0-9a-f]{4})  (.+)")
_DEVICE = re.compile(r"\t([0-9a-f]{4})  (.+)")


def lookup(text, wanted):
    """{(vendor, device): "Vendor Device name"} for the (int, int) pairs in ``wanted`` found in ``text``; pairs
    not in the database are left out.  Only the blocks of the wanted vendors are read (the database is 1.3 MB);
    lines that fit no rule are skipped, as pciutils does."""
    text = text or ""
    out = {}
    for vendor in sorted({pair[0] for pair in wanted if isinstance(pair[0], int)}):
        start = _vendor_line(text, vendor)
        if start < 0:
            continue
        lines = iter(text[start:].splitlines())
        vendor_name = _VENDOR.match(next(lines)).group(2).strip()
        for line in lines:
            if not line.startswith("\t"):
                if line and not line.startswith("#"):
                    break  # the next vendor (or the class section)
                continue
            match = _DEVICE.match(line)
            if match and (vendor, int(match.group(1), 16)) in wanted:
                out[(vendor, int(match.group(1), 16))] = "%s %s" % (vendor_name, match.group(2).strip())
    return out


def _vendor_line(text, vendor):
    """Offset of the vendor's line (column 0, before the class section), or -1."""
    key = "%04x  " % vendor
    if text.startswith(key):
        return 0
    pos = text.find("\n" + key)
    classes = text.find("\nC ")
    return -1 if pos < 0 or 0 <= classes < pos else pos + 1


def excerpt(text, wanted):
    """The lines of ``text`` that name the (vendor, device) pairs in ``wanted`` (each vendor line, then its device
    lines found), in file order: what a snapshot needs of a 1.3 MB database (lookup() reads it the same)."""
    names = lookup(text, wanted)
    out, vendors = ["# pci.ids lines for this host's functions (pvetune collect.yml)"], set()
    for (vendor, device), name in sorted(names.items()):
        start = _vendor_line(text, vendor)
        vendor_name = _VENDOR.match(text[start:].split("\n", 1)[0]).group(2).strip()
        if vendor not in vendors:
            vendors.add(vendor)
            out.append("%04x  %s" % (vendor, vendor_name))
        out.append("\t%04x  %s" % (device, name[len(vendor_name) + 1:]))
    return "\n".join(out) + "\n"


def model_name(names, vendor, device):
    """The model text of a function: the database's name, else "[vvvv:dddd]" as lspci -nn prints unknown ids."""
    return names.get((vendor, device)) or "Device [%04x:%04x]" % (vendor or 0, device or 0)
