# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NUMA node topology: the one reader of /sys/devices/system/node (each node's CPUs and socket).

The PCIe reader takes the GPUs' sockets from it, numa.gpu_locality its node list, the CT resource check and the CT
CPU-pinning fix the CPUs of the GPUs' nodes.  No policy and no judgement here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.formats.cpu_list import format_cpu_list, parse_cpu_list

NODE_DIR = "/sys/devices/system/node"
_NODE = re.compile(r"\Anode(\d{1,4})\Z")
_PKG = re.compile(r"\A[0-9]{1,6}\Z")


def read_nodes(fsroot, only=None):
    """``({node: {"cpus": [int], "socket": int or None}}, [error])``: the NUMA nodes (or the nodes in ``only``).

    A node's socket is the physical_package_id of its first CPU; a node without CPUs (CXL or HBM memory) has
    ``cpus`` [] and socket None.  An unreadable or malformed cpulist is an error naming the file, and that node is
    left out.
    """
    nodes, errors = {}, []
    names = fsroot.listdir(NODE_DIR) if fsroot.isdir(NODE_DIR) else []
    for name in names:
        match = _NODE.match(name)
        if not match or (only is not None and int(match.group(1)) not in only):
            continue
        path = "%s/%s/cpulist" % (NODE_DIR, name)
        try:
            text = fsroot.read_value(path)
        except FsError as exc:
            errors.append("%s: %s" % (path, exc.reason))
            continue
        try:
            cpus = parse_cpu_list(text)
        except ValueError:
            errors.append("%s: %r is not a CPU list" % (path, text[:60]))
            continue
        pkg = fsroot.try_value("/sys/devices/system/cpu/cpu%d/topology/physical_package_id" % cpus[0]) \
            if cpus else None
        # ASCII digits only: str.isdigit() also takes "²", which int() refuses; -1 (unknown) and garbage are None.
        nodes[int(match.group(1))] = {"cpus": cpus, "socket": int(pkg) if pkg is not None and _PKG.match(pkg) else None}
    return nodes, errors


def socket_summary(nodes):
    """["socket 0: nodes 0-1 (2 per socket, NPS2 on EPYC)", ...] and one line per node's CPUs."""
    by_socket = {}
    for node, info in sorted(nodes.items()):
        by_socket.setdefault(info["socket"], []).append(node)
    out = []
    for socket, members in sorted(by_socket.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        label = "socket %s" % socket if socket is not None else "no socket (nodes without CPUs)"
        out.append("%s: node%s %s (%d per socket%s)" % (
            label, "s" if len(members) > 1 else "", format_cpu_list(members), len(members),
            ", NPS%d on EPYC" % len(members) if socket is not None else ""))
    out.extend("node %d: CPUs %s" % (node, format_cpu_list(info["cpus"]) or "none")
               for node, info in sorted(nodes.items()))
    return out


def node_cpus(nodes, wanted):
    """The CPUs of the nodes in ``wanted`` (sorted), from read_nodes()."""
    return sorted({cpu for node in wanted for cpu in (nodes.get(node) or {}).get("cpus", ())})


def facts_nodes(facts):
    """{node: {"cpus", "socket"}} from the facts section "numa" (a list there: JSON keeps no int keys)."""
    return {n["node"]: n for n in (facts.get("numa") or {}).get("nodes") or () if isinstance(n, dict)}
