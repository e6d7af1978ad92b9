# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``corosync-quorumtool -s`` (and ``pvecm status``, which prints the same sections after its "Cluster information")
as data: the votequorum state a reboot decision needs.

The sections, as corosync's tools/corosync-quorumtool.c prints them::

    Quorum information                      Votequorum information             Membership information
    Nodes:            3                     Expected votes:   3                    Nodeid      Votes Name
    Node ID:          0x00000001            Highest expected: 3                0x00000001          1 10.0.0.1 (local)
    Quorate:          Yes                   Total votes:      3                0x00000000          1 Qdevice
                                            Quorum:           2  [Activity blocked]
                                            Flags:            Quorate Qdevice

With a qdevice the membership table has a "Qdevice" column (per-node flags such as ``A,V,NMW``) and a row with
node id 0: "Qdevice" with its votes while it votes for this partition, "Qdevice (votes N)" with 0 votes when not
(corosync's tools/corosync-quorumtool.c).  Anything the decision needs that is missing or unreadable is a
ValueError naming it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_FIELD = re.compile(r"^([A-Za-z][A-Za-z ]*?):\s*(.*?)\s*$")
_NODE = re.compile(r"^\s*(0x[0-9A-Fa-f]{1,8}|[0-9]{1,10})\s+([0-9]{1,5})\s+(?:([A-Z,]+|NR)\s+)?(\S.*?)\s*$")
_NODE_NO_FLAGS = re.compile(r"^\s*(0x[0-9A-Fa-f]{1,8}|[0-9]{1,10})\s+([0-9]{1,5})\s+(\S.*?)\s*$")
_INT = re.compile(r"\A[0-9]{1,5}\Z")
NEEDED = ("Expected votes", "Total votes", "Quorum")


def _int(fields, key):
    value = fields[key].split()[0] if fields[key].split() else ""
    if not _INT.match(value):
        raise ValueError("%r is not a vote count: %r" % (key, fields[key][:40]))
    return int(value)


def parse_quorumtool(text):
    """{"quorate", "expected_votes", "highest_expected", "total_votes", "quorum", "activity_blocked", "flags",
    "nodes" [{"nodeid", "votes", "name", "local", "qdevice_flags"}], "qdevice" ({"votes"} or None), "local"}."""
    fields, nodes, in_members, flag_column = {}, [], False, False
    for line in (text or "").splitlines():
        if line.startswith("Membership information"):
            in_members = True
            continue
        if in_members:
            if line.split()[:2] == ["Nodeid", "Votes"]:
                flag_column = "Qdevice" in line.split()[2:3]   # the header says whether a flags column follows
                continue
            match = _NODE.match(line) if flag_column else _NODE_NO_FLAGS.match(line)
            if match:
                raw_id, votes, flags, name = match.groups() if flag_column else match.groups()[:2] + (
                    None,) + match.groups()[2:]
                local = name.endswith(" (local)")
                name = name[:-len(" (local)")] if local else name
                nodes.append({"nodeid": int(raw_id, 16) if raw_id.startswith("0x") else int(raw_id),
                              "votes": int(votes), "name": name, "local": local, "qdevice_flags": flags})
            continue
        match = _FIELD.match(line)
        if match and match.group(1) not in fields:
            fields[match.group(1)] = match.group(2)
    missing = [key for key in NEEDED if key not in fields]
    if missing:
        raise ValueError("no %s line (not corosync-quorumtool -s output?)" % ", ".join(repr(k) for k in missing))
    if "Quorate" not in fields and "Flags" not in fields:
        raise ValueError("no 'Quorate' line and no 'Flags' line (not corosync-quorumtool -s output?)")
    # "Quorate:" (Quorum information) and the "Quorate" flag say the same; an excerpt may have only the flags.
    quorate = fields.get("Quorate", "Yes" if "Quorate" in fields["Flags"].split() else "No")
    if quorate not in ("Yes", "No"):
        raise ValueError("'Quorate' is neither Yes nor No: %r" % quorate[:40])
    out = {"quorate": quorate == "Yes", "expected_votes": _int(fields, "Expected votes"),
           "highest_expected": _int(fields, "Highest expected") if "Highest expected" in fields else None,
           "total_votes": _int(fields, "Total votes"), "quorum": _int(fields, "Quorum"),
           "activity_blocked": "Activity blocked" in fields["Quorum"],
           "flags": fields.get("Flags", "").split()}
    # Node id 0 is the qdevice ("Qdevice (votes N)" with 0 votes while it votes for another partition).
    qdevice = [n for n in nodes if n["nodeid"] == 0]
    out["qdevice"] = {"votes": qdevice[0]["votes"]} if qdevice else None
    out["nodes"] = [n for n in nodes if n not in qdevice]
    local = [n for n in out["nodes"] if n["local"]]
    if len(local) != 1:
        raise ValueError("the membership table marks %d nodes (local), not one" % len(local))
    out["local"] = local[0]
    return out
