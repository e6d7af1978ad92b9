# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``pct list`` and ``qm list``: the guests of this node and whether they run.

pct (pve-container, PVE::CLI::pct) prints ``VMID Status Lock Name`` with the lock column blank when there is none;
qm (qemu-server, PVE::CLI::qm) prints ``VMID NAME STATUS MEM(MB) BOOTDISK(GB) PID``.  Both print nothing at all when
the node has no guest of their kind.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_VMID = re.compile(r"\A[1-9][0-9]{2,8}\Z")


def _rows(text, header_first, command):
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return []
    if lines[0].split()[:1] != [header_first]:
        raise ValueError("%s: the first line is not its header: %r" % (command, lines[0][:60]))
    rows = []
    for line in lines[1:]:
        fields = line.split()
        if not _VMID.match(fields[0]):
            raise ValueError("%s: %r does not start with a VMID" % (command, line[:60]))
        rows.append(fields)
    return rows


def parse_pct_list(text):
    """[{"vmid", "status", "name", "kind": "ct"}]; the name is the last column (the lock column may be blank)."""
    return [{"vmid": int(f[0]), "status": f[1], "name": f[-1] if len(f) > 2 else "", "kind": "ct"}
            for f in _rows(text, "VMID", "pct list")]


def parse_qm_list(text):
    """[{"vmid", "status", "name", "kind": "vm"}]."""
    out = []
    for fields in _rows(text, "VMID", "qm list"):
        if len(fields) < 3:
            raise ValueError("qm list: %r has no STATUS column" % " ".join(fields))
        out.append({"vmid": int(fields[0]), "name": fields[1], "status": fields[2], "kind": "vm"})
    return out
