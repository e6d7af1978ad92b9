# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NUMA: reader of kernel.numa_balancing (runtime and persisted in sysctl.d) and its evaluator (the fix is in
fix.py); the facts section "numa" (the node topology, read by topology.read_nodes) and the evaluator of
``numa.gpu_locality``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.concerns.bootargs.checks import configured_boot_args, effective_args
from ansible.module_utils.pvetune.concerns.pcie.checks import gpu_functions
from ansible.module_utils.pvetune.concerns.numa.topology import NODE_DIR, facts_nodes, read_nodes, socket_summary
from ansible.module_utils.pvetune.core.result import make_result, section_error
from ansible.module_utils.pvetune.formats import sysctl_conf

# Every sysctl the audit judges (kernel.numa_balancing here, mem.sysctl's), read once into the section "sysctl".
SYSCTL_KEYS = ("kernel.numa_balancing", "vm.swappiness", "vm.zone_reclaim_mode")


def gather_sysctl(fsroot):
    persisted = sysctl_conf.read_sysctl_persisted(fsroot, SYSCTL_KEYS)
    out = {}
    for key in SYSCTL_KEYS:
        out[key] = {"runtime": fsroot.try_value(sysctl_conf.sysctl_path(key)),
                    "persisted": persisted["values"][key], "files": persisted["files"]}
    out["errors"] = persisted["errors"]
    return out


def read_numa(ctx):
    """Reader of the facts section "numa": ``nodes`` ([{"node", "cpus", "socket"}]), ``errors``, ``evidence``."""
    nodes, errors = read_nodes(ctx.fsroot)
    ev = ["%s/node*/cpulist: %d nodes" % (NODE_DIR, len(nodes))]
    ev.extend(socket_summary(nodes))
    return {"nodes": [dict(info, node=node) for node, info in sorted(nodes.items())], "errors": errors, "evidence": ev}


# -- sysctl ------------------------------------------------------------------
def sysctl_state(facts, key, want, conf_arg=None, default=None):
    """``(status, current, message, evidence)`` of one sysctl against ``want`` at runtime and persisted in sysctl.d
    (or, for ``conf_arg``, a boot argument that sets it configured in the boot loader; a ``want`` that is the
    kernel's ``default`` needs nothing persisted); status None when the kernel has no such file.
    kernel.numa_balancing and mem.sysctl judge their keys with it."""
    data = (facts["sysctl"] or {}).get(key) or {}
    runtime, persisted = data.get("runtime"), data.get("persisted")
    path = sysctl_conf.sysctl_path(key)
    ev = ["%s = %s" % (path, runtime)]
    if persisted:
        ev.append("%s:%d %s = %s" % (persisted["file"], persisted["line"], key, persisted["value"]))
    else:
        ev.append("no %s in %s" % (key, ", ".join(data.get("files") or ["sysctl.d"])))
    if runtime is None:
        return None, None, "%s does not exist" % path, ev
    if not runtime.lstrip("-").isdigit():
        return "error", runtime[:40], "%s holds %r, not a number" % (path, runtime[:40]), ev
    conf_on = conf_arg is not None and conf_arg in (configured_boot_args(facts) or [])
    persisted_ok = (persisted is not None and persisted["value"] == want) or conf_on or (
        persisted is None and want == default)
    persisted_text = persisted["value"] if persisted else ("cmdline " + conf_arg if conf_on else
                                                           "no (the kernel's default %s)" % default if default
                                                           else "no")
    current = "runtime %s, persisted %s" % (runtime, persisted_text)
    name = key.rsplit(".", 1)[-1]
    if runtime == want and persisted_ok:
        return "pass", current, "%s is %s and persisted" % (name, want), ev
    if runtime == want:
        return "fail", current, ("%s is %s now but not persisted: it returns to the kernel default at the next boot"
                                 % (name, want)), ev
    msg = "%s is %s at runtime, not %s" % (name, runtime, want)
    if persisted_ok:
        msg += ", although %s is persisted (set it at runtime: sysctl -w %s=%s)" % (want, key, want)
    if conf_arg is not None and conf_arg in effective_args(facts):
        msg += "; %s is on the command line" % conf_arg
    return "fail", current, msg, ev


def check_numa_balancing(facts, policy):
    cid = "kernel.numa_balancing"
    err = section_error(facts, "sysctl")
    if err:
        return make_result(cid, policy, "error", None, err)
    want = str(policy["numa_balancing"])
    status, current, msg, ev = sysctl_state(facts, cid, want, "numa_balancing=disable" if want == "0" else None)
    if status is None:
        return make_result(cid, policy, "skip", None, msg + " (kernel without NUMA balancing or one node)",
                           evidence=ev)
    return make_result(cid, policy, status, current, msg, evidence=ev)


# -- GPU locality ------------------------------------------------------------
def check_gpu_locality(facts, policy):
    cid = "numa.gpu_locality"
    err = section_error(facts, "numa") or section_error(facts, "pci")
    if err:
        return make_result(cid, policy, "error", None, err)
    numa = facts.get("numa") or {}
    nodes = facts_nodes(facts)
    ev = list(numa.get("evidence") or [])
    gpus = gpu_functions(facts)
    if not gpus:
        return make_result(cid, policy, "skip", None, "no NVIDIA GPU found", evidence=ev)
    if numa.get("errors"):
        return make_result(cid, policy, "error", None, "; ".join(numa["errors"]), evidence=ev)
    multi = len([n for n in nodes.values() if n["cpus"]]) > 1
    items = []
    for gpu in gpus:
        node = gpu.get("numa_node")
        item = {"name": gpu["bdf"], "status": "pass", "current": "node %s" % node,
                "expected": "the node of its PCIe root" if multi else None, "message": ""}
        if not isinstance(node, int):
            item.update(status="error", message="%s/numa_node is unreadable" % gpu.get("path"))
        elif node < 0 and multi:
            item.update(status="warn", current="node -1 (no locality)",
                        message="the firmware gives this GPU's PCIe root no NUMA proximity domain (ACPI SRAT/_PXM)")
        elif node < 0:
            item["message"] = "one NUMA node: nothing to place"
        elif node not in nodes:
            item.update(status="warn", message="node %d is not among the host's NUMA nodes" % node)
        else:
            item["current"] = "node %d (socket %s)" % (node, nodes[node]["socket"])
        items.append(item)
    by_node = {}
    for gpu in gpus:
        by_node.setdefault(gpu.get("numa_node"), []).append(gpu["bdf"])
    current = ", ".join("node %s: %d GPU%s" % (n, len(b), "s" if len(b) > 1 else "")
                        for n, b in sorted(by_node.items(), key=lambda kv: str(kv[0])))
    bad = [i for i in items if i["status"] in ("warn", "error")]
    if bad:
        status = "error" if any(i["status"] == "error" for i in bad) else "warn"
        return make_result(cid, policy, status, current, "%d of %d GPUs without a NUMA node on a %d-node host: %s" % (
            len(bad), len(gpus), len(nodes), ", ".join(i["name"] for i in bad)), items, ev)
    msg = ("%d GPUs on %d NUMA nodes" % (len(gpus), len(by_node)) if multi
           else "one NUMA node: every GPU is local to every CPU")
    return make_result(cid, policy, "pass", current, msg, items, ev)


SECTIONS = (("sysctl", lambda ctx: gather_sysctl(ctx.fsroot)), ("numa", read_numa))
CHECKS = {"kernel.numa_balancing": check_numa_balancing, "numa.gpu_locality": check_gpu_locality}
