# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The path between two GPUs, from the sysfs device tree, in the vocabulary of ``nvidia-smi topo -m``.

A function's sysfs directory, ``/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:08.0/0000:43:00.0``,
names its host bridge (``pci0000:40``) and every bridge above it.  Between GPUs a and b:

* PIX: both sit at most one port below their deepest shared bridge (one PCIe switch, or one port);
* PXB: they share a bridge but reach it through more ports (several switches), never the host bridge;
* PHB: no shared bridge, one host bridge (the CPU's root complex);
* NODE: different host bridges of one CPU socket (the socket from the NUMA node's CPUs; the NUMA node when the
  socket is unknown);
* SYS: across sockets (the inter-socket link).

Pure functions over the pci facts; nothing here reads the host.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_HOST = re.compile(r"pci[0-9a-f]{4}:[0-9a-f]{2}\Z")
_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")
LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
LEGEND = {"X": "self", "PIX": "at most one PCIe switch", "PXB": "several PCIe switches, not the host bridge",
          "PHB": "through the PCIe host bridge (the CPU)", "NODE": "across host bridges of one socket",
          "SYS": "across sockets"}


def chain(path):
    """``(host bridge, [bdf of every function from the root port down to this one])`` from a sysfs device path;
    ``(None, None)`` when the path is not in the /sys/devices tree (a flat test tree or a missing link)."""
    parts = [p for p in (path or "").split("/") if p]
    if len(parts) < 4 or parts[:2] != ["sys", "devices"] or not _HOST.match(parts[2]):
        return None, None
    bdfs = parts[3:]
    if not bdfs or not all(_BDF.match(p) for p in bdfs):
        return None, None
    return parts[2], bdfs


def path_between(a, b):
    """{"level", "ports" (the bridges strictly below the deepest shared one, on both sides: the ports whose ACS
    decides whether peer traffic turns there), "shared" (that bridge or None)} for two GPU facts with "host",
    "chain", "numa_node" and "socket"; level None when either chain is unknown."""
    if not a.get("chain") or not b.get("chain"):
        return {"level": None, "ports": [], "shared": None}
    if a["host"] != b["host"]:
        sa, sb = a.get("socket"), b.get("socket")
        same = sa == sb if sa is not None and sb is not None else a.get("numa_node") == b.get("numa_node")
        return {"level": "NODE" if same else "SYS", "ports": [], "shared": None}
    up_a, up_b = a["chain"][:-1], b["chain"][:-1]
    common = 0
    while common < min(len(up_a), len(up_b)) and up_a[common] == up_b[common]:
        common += 1
    if not common:
        return {"level": "PHB", "ports": [], "shared": None}
    below_a, below_b = up_a[common:], up_b[common:]
    level = "PIX" if len(below_a) <= 1 and len(below_b) <= 1 else "PXB"
    return {"level": level, "ports": below_a + below_b, "shared": up_a[common - 1]}


def matrix(gpus):
    """{"gpus": [bdf], "rows": [[level or "X" or "?"]], "pairs": {(bdf_a, bdf_b): path_between}} for the GPUs in
    their order; the matrix is symmetric."""
    bdfs = [g["bdf"] for g in gpus]
    pairs = {}
    rows = []
    for i, a in enumerate(gpus):
        row = []
        for j, b in enumerate(gpus):
            if i == j:
                row.append("X")
                continue
            key = (a["bdf"], b["bdf"]) if i < j else (b["bdf"], a["bdf"])
            if key not in pairs:
                pairs[key] = path_between(a, b)
            row.append(pairs[key]["level"] or "?")
        rows.append(row)
    return {"gpus": bdfs, "rows": rows, "pairs": pairs}


def render(mat, labels=None):
    """The matrix as ``nvidia-smi topo -m`` lays it out: a header of GPU names, one row per GPU."""
    names = labels or ["GPU%d" % i for i in range(len(mat["gpus"]))]
    width = max([len(n) for n in names] + [4]) + 1
    lines = [" " * width + "".join(n.ljust(width) for n in names)]
    for name, row in zip(names, mat["rows"]):
        lines.append(name.ljust(width) + "".join(c.ljust(width) for c in row))
    return [line.rstrip() for line in lines]


# -- ACS on the ports between GPUs that share a switch -------------------------------------------------------
def _below(port, chain_):
    return bool(chain_) and port in chain_[:-1]


def acs_ports(pci, gpus):
    """[{"bdf", "bridge" (the bridge facts or None), "pairs" [(bdf_a, bdf_b)], "vfio" [bdf of functions bound to
    vfio-pci below the port, or below the switch it shares with another GPU], "redirect" (the set redirect bits of
    ACS Control, 0 without ACS), "status" (fail: a redirect bit is set and no vfio-pci function is in reach; skip:
    one is; error: the bridge or its ACS could not be read; pass)}] for every port between two GPUs that share a
    switch, in address order.  A vfio-pci device anywhere below the shared switch keeps its ports as they are: with
    the redirect cleared on a neighbour's port, that neighbour could reach the VM's device past the IOMMU.  The
    audit's pcie.acs and the fix's planner both judge from this, so they cannot disagree."""
    mat = matrix(gpus)
    ports, shared = {}, {}
    for (a, b), path in sorted(mat["pairs"].items()):
        if path["level"] not in ("PIX", "PXB"):
            continue
        for port in path["ports"]:
            ports.setdefault(port, []).append((a, b))
            shared.setdefault(port, set()).add(path["shared"])
    vfio = list(pci.get("vfio") or []) + [{"bdf": g["bdf"], "chain": g.get("chain")} for g in gpus
                                          if g.get("driver") == "vfio-pci"]
    out = []
    for port in sorted(ports):
        bridge = (pci.get("bridges") or {}).get(port)
        reach = {port} | shared[port]
        rec = {"bdf": port, "bridge": bridge, "pairs": ports[port], "redirect": 0,
               "vfio": sorted({v["bdf"] for v in vfio if any(_below(p, v.get("chain")) for p in reach)})}
        acs = (bridge or {}).get("acs")
        if bridge is None or bridge.get("error") or bridge.get("acs_error"):
            rec["status"] = "error"
        else:
            rec["redirect"] = acs["redirect"] if acs else 0
            rec["status"] = "pass" if not rec["redirect"] else ("skip" if rec["vfio"] else "fail")
        out.append(rec)
    return out


def pairs_text(pairs, limit=6):
    text = ", ".join("%s-%s" % (a[5:], b[5:]) for a, b in pairs[:limit])
    return text + (" and %d more" % (len(pairs) - limit) if len(pairs) > limit else "")
