# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``corosync.conf`` as the cluster gate needs it: the cluster name, the node list and the quorum section.

The syntax is corosync's own (exec/coroparse.c): ``name {`` opens a section, ``}`` closes it, ``key: value`` sets a
value (the value is the rest of the line, trimmed), a line whose first non-blank character is ``#`` is a comment.
Proxmox keeps the cluster's copy in /etc/pve/corosync.conf and corosync reads /etc/corosync/corosync.conf, which
pmxcfs keeps equal.  ``corosync-quorumtool`` names nodes by address; the node list maps a node id to its name.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_SECTION = re.compile(r"^([A-Za-z0-9_.-]+)\s*\{\s*$")
_VALUE = re.compile(r"^([A-Za-z0-9_.-]+)\s*:\s*(.*?)\s*$")
# A node name as corosync.conf, pvecm and ha-manager use it (the gate passes it on to ha-manager and ceph).
NODE_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9.-]{0,62}\Z")


def parse_sections(text, path):
    """The file as nested ``{"values": {key: value}, "sections": [(name, section)]}``; ValueError naming ``path``
    and the line for anything corosync would refuse (an unbalanced brace, a line that is neither)."""
    root = {"values": {}, "sections": []}
    stack = [root]
    for number, raw in enumerate((text or "").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _SECTION.match(line)
        if match:
            section = {"values": {}, "sections": []}
            stack[-1]["sections"].append((match.group(1), section))
            stack.append(section)
            continue
        if line == "}":
            if len(stack) == 1:
                raise ValueError("%s line %d: '}' closes no section" % (path, number))
            stack.pop()
            continue
        match = _VALUE.match(line)
        if not match:
            raise ValueError("%s line %d: neither 'key: value', 'name {' nor '}': %r" % (path, number, line[:60]))
        stack[-1]["values"][match.group(1)] = match.group(2)
    if len(stack) != 1:
        raise ValueError("%s: %d section(s) not closed at the end of the file" % (path, len(stack) - 1))
    return root


def _sections(section, name):
    return [s for n, s in section["sections"] if n == name]


def _count(value, what, path, default=None):
    if value is None and default is not None:
        return default
    if value is None or not re.match(r"\A[0-9]{1,10}\Z", value):
        raise ValueError("%s: %s is not a number: %r" % (path, what, value))
    return int(value)


def parse_corosync_conf(text, path):
    """{"cluster_name", "nodes" [{"name", "nodeid", "votes", "addr"}], "qdevice" ({"model", "votes"} or None),
    "two_node"}; ValueError naming ``path`` when the node list cannot say who is who."""
    root = parse_sections(text, path)
    totem = (_sections(root, "totem") or [{"values": {}}])[0]
    quorum = (_sections(root, "quorum") or [{"values": {}, "sections": []}])[0]
    nodes = []
    for nodelist in _sections(root, "nodelist"):
        for node in _sections(nodelist, "node"):
            values = node["values"]
            name = values.get("name")
            if name is None or not NODE_NAME.match(name):
                raise ValueError("%s: a nodelist node has no valid name: %r" % (path, name))
            nodes.append({"name": name, "nodeid": _count(values.get("nodeid"), "nodeid of %s" % name, path),
                          "votes": _count(values.get("quorum_votes"), "quorum_votes of %s" % name, path, 1),
                          "addr": values.get("ring0_addr")})
    if not nodes:
        raise ValueError("%s: no nodelist with nodes (Proxmox always writes one)" % path)
    for key in ("name", "nodeid"):
        seen = [n[key] for n in nodes]
        if len(set(seen)) != len(seen):
            raise ValueError("%s: two nodelist nodes have the same %s" % (path, key))
    devices = _sections(quorum, "device")
    qdevice = None
    if devices:
        values = devices[0]["values"]
        # Without "votes" corosync-qdevice works the votes out (ffsplit 1, lms N-1); quorumtool reports them.
        votes = values.get("votes")
        qdevice = {"model": values.get("model"),
                   "votes": None if votes is None else _count(votes, "quorum.device.votes", path)}
    return {"cluster_name": totem["values"].get("cluster_name"), "nodes": nodes, "qdevice": qdevice,
            "two_node": quorum["values"].get("two_node") == "1"}
