# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IOMMU: reader of the IOMMU units, the default domain type and the type of every GPU's IOMMU group, and the
evaluator of iommu.mode (which GPUs are host-owned and translated is core/cpuprofile.gpu_domains, which also
decides whether the boot args need iommu=pt).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.concerns.pcie import checks as pcie
from ansible.module_utils.pvetune.concerns.bootargs.checks import configured_boot_args, effective_args
from ansible.module_utils.pvetune.concerns.cpufreq.checks import natural_key
from ansible.module_utils.pvetune.core.cpuprofile import PT_ARG, gpu_domains
from ansible.module_utils.pvetune.core.result import make_result


VENDOR_KEYS = ("amd_iommu", "intel_iommu", "iommu")


def _cmdline_iommu(facts):
    return [a for a in effective_args(facts) if a.split("=", 1)[0] in VENDOR_KEYS]


def check_iommu(facts, policy):
    cid = "iommu.mode"
    io = facts.get("iommu") or {}
    if io.get("error"):
        return make_result(cid, policy, "error", None, io["error"])
    args = _cmdline_iommu(facts)
    on = bool(io.get("units")) or bool(io.get("groups"))
    ev = list(io.get("evidence") or []) + ["/proc/cmdline IOMMU args: %s" % (" ".join(args) or "none")]
    if not on:
        return make_result(cid, policy, "pass", "IOMMU off", "IOMMU off (no units in /sys/class/iommu): no DMA "
                           "translation, no VFIO passthrough", evidence=ev)
    recs = gpu_domains(facts)
    indices = pcie.smi_indices(facts)
    items = []
    for rec in recs:
        gpu = rec["gpu"]
        msg = {"skip": "bound to vfio-pci: a VM owns it" if gpu.get("driver") == "vfio-pci" else
               "in no IOMMU group (no iommu_group link)",
               "fail": "the IOMMU translates this GPU's DMA", "pass": "",
               "error": "/sys/kernel/iommu_groups/%s/type: %r is no domain type" % (rec["group"], rec["type"])
               }[rec["status"]]
        items.append({"name": pcie.gpu_label(gpu, indices.get(gpu["bdf"])), "status": rec["status"],
                      "current": "group %s, %s" % (rec["group"], rec["type"] or "type unknown")
                      if rec["group"] is not None else None, "expected": "identity", "message": msg})
    fails = [r for r in recs if r["status"] == "fail"]
    current = "IOMMU on, default domain %s%s" % (io.get("default_domain_type") or "n/a",
                                                 ", " + " ".join(args) if args else "")
    errors = [i["message"] for i in items if i["status"] == "error"]
    if errors and not fails:
        return make_result(cid, policy, "error", current, "cannot tell the IOMMU domain of %d GPUs: %s" % (
            len(errors), "; ".join(errors)), items, ev)
    if not fails:
        msg = ("no host-owned GPU in a translated domain" if recs else "IOMMU on; no NVIDIA GPU found")
        return make_result(cid, policy, "pass", current, msg, items, ev)
    names = ", ".join(r["gpu"]["bdf"] for r in fails)
    if not policy.get("iommu_passthrough"):
        return make_result(cid, policy, "pass", current, "%d host-owned GPUs in a translated domain (%s); policy "
                           "iommu_passthrough is false" % (len(fails), names), items, ev)
    configured = PT_ARG in (configured_boot_args(facts) or [])
    if configured and PT_ARG not in effective_args(facts):
        return make_result(cid, policy, "pending", current, "iommu=pt is configured but not yet effective: %d GPUs "
                           "stay translated until the reboot" % len(fails), items, ev, reboot_required=True)
    return make_result(cid, policy, "fail", current, "%d host-owned GPUs in a translated IOMMU domain (%s): %s" % (
        len(fails), ", ".join(sorted({r["type"] for r in fails})), names), items, ev, reboot_required=True)


# -- IOMMU -------------------------------------------------------------------
def read_iommu(fsroot, pci=None):
    """The IOMMU units, the number of groups, the first group's type (the default domain) and the type of every
    group holding an NVIDIA GPU of the pci section (``group_types``)."""
    units = fsroot.listdir("/sys/class/iommu")
    groups = fsroot.listdir("/sys/kernel/iommu_groups")
    domain_type = None
    if groups:
        first = sorted(groups, key=natural_key)[0]
        domain_type = fsroot.try_value("/sys/kernel/iommu_groups/%s/type" % first)
    wanted = sorted({f.get("iommu_group") for f in (pci or {}).get("functions") or [] if f.get("iommu_group")},
                    key=natural_key)
    types = {g: fsroot.try_value("/sys/kernel/iommu_groups/%s/type" % g) for g in wanted}
    return {
        "units": units,
        "groups": len(groups),
        "default_domain_type": domain_type,
        "group_types": types,
        "evidence": ["/sys/class/iommu (%d units)" % len(units),
                     "/sys/kernel/iommu_groups (%d groups, type %s)" % (len(groups), domain_type)]
        + (["GPU groups: %s" % ", ".join("%s %s" % (g, t) for g, t in types.items())] if types else []),
    }


SECTIONS = (("iommu", lambda ctx: read_iommu(ctx.fsroot, ctx.facts.get("pci"))),)
CHECKS = {"iommu.mode": check_iommu}
