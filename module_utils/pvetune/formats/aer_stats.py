# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe AER counters in sysfs: ``/sys/bus/pci/devices/<bdf>/aer_dev_{correctable,nonfatal,fatal}``.

Each file is one ``<error name> <count>`` line per error bit and a last ``TOTAL_ERR_COR`` / ``TOTAL_ERR_NONFATAL``
/ ``TOTAL_ERR_FATAL`` line (kernel Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats; drivers/pci/pcie/
aer.c).  The counts are since the device was enumerated (boot or hotplug).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

KINDS = ("correctable", "nonfatal", "fatal")
_LINE = re.compile(r"\A([A-Za-z][A-Za-z0-9_]{0,40}) ([0-9]{1,20})\Z")


def parse_aer_counters(text):
    """``({name: count} of the non-zero counters, total)``; total is the TOTAL_ERR_* line, else the sum.  Raises
    ValueError for a line that is not ``<name> <count>``, or for a file with no counter at all."""
    counters, total = {}, None
    for line in (text or "").splitlines():
        line = line.strip()
        if not line:
            continue
        match = _LINE.match(line)
        if not match:
            raise ValueError("not a '<error> <count>' line: %r" % line[:60])
        name, count = match.group(1), int(match.group(2))
        if name.startswith("TOTAL_ERR_"):
            total = count
        elif count:
            counters[name] = count
    if total is None and not counters and not (text or "").strip():
        raise ValueError("empty")
    return counters, total if total is not None else sum(counters.values())
