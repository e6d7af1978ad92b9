# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fix of lxc.resources that pvetune makes (policy ``lxc_numa_pin``): pin a GPU CT's CPUs to its GPUs' NUMA
nodes with ``lxc.cgroup2.cpuset.cpus`` (``lxc.cgroup.cpuset.cpus`` on a cgroup v1 host).

pvetune_lxc_gpu plans it on the same bytes as the device lines, so the CT config is read, backed up and written once,
in place, under the CT's Proxmox lock (lxcgpu_fix.plan_ct).  The decision is lxcres.placement()'s, the audit's own:
only a CT whose CPUs miss its GPUs' nodes is touched, and one whose configured cpuset is already right (waiting for
a restart) is left alone.  The other limits (cores, memory, swap, cpulimit) stay the operator's: the audit names them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.concerns.lxcres.checks import read_cgroup, placement
from ansible.module_utils.pvetune.concerns.numa.topology import read_nodes
from ansible.module_utils.pvetune.concerns.pcie.checks import gather_pci
from ansible.module_utils.pvetune.core.policy import DEFAULT_POLICY
from ansible.module_utils.pvetune.formats.cpu_list import format_cpu_list
from ansible.module_utils.pvetune.formats.ct_config import main_value, set_main_value

KEYS = {1: "lxc.cgroup.cpuset.cpus", 2: "lxc.cgroup2.cpuset.cpus"}


def pin_context(fsroot, host, cgroup_version, policy=None):
    """What placement() needs, read once per run: the host's NVIDIA state (read_state(), with the GPU minors), the
    GPUs' NUMA nodes (the PCIe reader) and the node topology, as the facts sections the audit has."""
    policy = policy or DEFAULT_POLICY
    nodes, errors = read_nodes(fsroot)
    return {"nvidia": host, "pci": gather_pci(fsroot, policy),
            "numa": {"nodes": [dict(info, node=n) for n, info in sorted(nodes.items())], "errors": errors},
            "cgroup_version": cgroup_version}


def plan_pin(fsroot, ct, ctx):
    """``(new config bytes, change)`` pinning the CT, or ``(None, None)`` when it needs no pin (or it cannot be
    told: one NUMA node, GPUs without a node, no GPU nodes found)."""
    version = 1 if ctx["cgroup_version"] in (1, "1") else 2
    running, files, base = read_cgroup(fsroot, version, ct.ctid)
    place = placement(ct, {"running": running, "cgroup": files, "cgroup_dir": base}, ctx)
    if place["verdict"] not in ("fail", "warn") or not place["want_cpus"]:
        return None, None
    if placement(ct, None, ctx)["verdict"] == "pass":
        return None, None        # configured right; the restart that makes it effective is lxc.resources' pending
    key = KEYS[version]
    value = format_cpu_list(place["want_cpus"])
    old = main_value(ct, key)
    line_no = next((line.line_no for line in ct.main_lines() if line.kind == "kv" and line.key == key), None)
    change = {"action": "replace" if old is not None else "add", "line_no": line_no, "after_line": None,
              "old": "%s: %s" % (key, old) if old is not None else None, "new": "%s: %s" % (key, value),
              "reason": "pin to the CPUs of node%s %s, where its GPUs are (lxc_numa_pin; effective at the CT's next "
                        "start)" % ("s" if len(place["gpu_nodes"]) > 1 else "", format_cpu_list(place["gpu_nodes"]))}
    return set_main_value(ct, key, value), change
