# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IOMMU: reader of the IOMMU units, default domain type and iommu=pt, and the (informational) evaluator of
iommu.mode.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.pvetune.concerns.bootargs import _effective_args
from ansible.module_utils.pvetune.concerns.cpufreq import _natural_key
from ansible.module_utils.pvetune.core.result import make_result


def check_iommu(facts, policy):
    cid = "iommu.mode"
    io = facts.get("iommu") or {}
    if io.get("error"):
        return make_result(cid, policy, "error", None, io["error"])
    args = _effective_args(facts)
    pt = "iommu=pt" in args
    on = bool(io.get("units")) or bool(io.get("groups"))
    dtype = io.get("default_domain_type")
    current = "IOMMU %s%s, default domain %s" % ("on" if on else "off", ", iommu=pt" if pt else "", dtype or "n/a")
    if not on:
        msg = "IOMMU off (no units in /sys/class/iommu): no DMA translation overhead, no VFIO passthrough"
    elif pt or dtype == "identity":
        msg = "IOMMU on in passthrough mode for host devices"
    else:
        msg = "IOMMU translates host DMA (%s); iommu=pt avoids that overhead if the GPUs stay on the host" % (dtype,)
    return make_result(cid, policy, "pass", current, msg, evidence=io.get("evidence"))


# -- IOMMU -------------------------------------------------------------------
def read_iommu(fsroot):
    units = fsroot.listdir("/sys/class/iommu")
    groups = fsroot.listdir("/sys/kernel/iommu_groups")
    domain_type = None
    if groups:
        first = sorted(groups, key=_natural_key)[0]
        domain_type = fsroot.try_value("/sys/kernel/iommu_groups/%s/type" % first)
    return {
        "units": units,
        "groups": len(groups),
        "default_domain_type": domain_type,
        "evidence": ["/sys/class/iommu (%d units)" % len(units),
                     "/sys/kernel/iommu_groups (%d groups, type %s)" % (len(groups), domain_type)],
    }


SECTIONS = (("iommu", lambda ctx: read_iommu(ctx.fsroot)),)
CHECKS = {"iommu.mode": check_iommu}
