# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver's Xid lines in a kernel log (``journalctl -k``, ``dmesg``, or a snapshot's capture of them).

The driver prints ``NVRM: Xid (PCI:0000:41:00): 79, pid=1234, name=python3, GPU has fallen off the bus.`` (older
drivers without ``PCI:``); the address is domain:bus:device, without the function.  Any prefix (a journal
timestamp, ``kernel:``, a dmesg ``[  12.345678]``) is ignored.  A GPU that is off the bus when the driver probes it
gets no Xid line, only ``NVRM: The NVIDIA GPU 0000:b3:00.0`` ... ``fallen off the bus``: that counts as Xid 79 (as
NVIDIA's NVSentinel does), unless the same GPU has an Xid 79 line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})\): ([0-9]{1,5}),\s?(.*)\Z")
_PROBE = re.compile(r"NVRM: The NVIDIA GPU ([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})\.[0-7]")
MAX_DETAIL = 160
FELL_OFF = 79
PROBE_DETAIL = "not responding when the driver probed it (no Xid line)"


def parse_xid_lines(text):
    """``[{"bus", "xid", "count", "first", "last"}]``: one entry per GPU and Xid code, in order of first appearance;
    ``first``/``last`` are the detail text of the first and the last line (truncated)."""
    events, probe = {}, []
    lines = (text or "").splitlines()
    for number, line in enumerate(lines):
        gone = _PROBE.search(line)
        if gone and any("fallen off the bus" in later for later in lines[number:number + 3]):
            probe.append(gone.group(1).lower())
        match = _XID.search(line.rstrip())
        if not match:
            continue
        key = (match.group(1).lower(), int(match.group(2)))
        detail = match.group(3).strip()[:MAX_DETAIL]
        entry = events.get(key)
        if entry is None:
            events[key] = {"bus": key[0], "xid": key[1], "count": 1, "first": detail, "last": detail}
        else:
            entry["count"] += 1
            entry["last"] = detail
    for bus in probe:
        if (bus, FELL_OFF) in events and events[(bus, FELL_OFF)]["first"] != PROBE_DETAIL:
            continue          # the Xid 79 line tells it already
        entry = events.setdefault((bus, FELL_OFF), {"bus": bus, "xid": FELL_OFF, "count": 0, "first": PROBE_DETAIL,
                                                    "last": PROBE_DETAIL})
        entry["count"] += 1
    return list(events.values())
