# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Memory: the one reader of /proc/meminfo, the huge page pools and transparent huge pages (facts section "memory";
the ARC check reads MemTotal from it), and the evaluator of mem.sysctl (its sysctls come from the section "sysctl",
read with kernel.numa_balancing's; the fix is the sysctl fix's drop-in).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.concerns.numa.checks import sysctl_state
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.result import make_result, section_error, worst_of
from ansible.module_utils.pvetune.formats.proc_text import parse_meminfo

MEMINFO_KEYS = ("MemTotal", "HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "Hugepagesize", "AnonHugePages")
MEMINFO = "/proc/meminfo"
HUGEPAGES_DIR = "/sys/kernel/mm/hugepages"
THP_DIR = "/sys/kernel/mm/transparent_hugepage"
# What the kernel sets when nothing does (mm/vmscan.c vm_swappiness = 60; zone_reclaim_mode 0 since Linux 3.16).
KERNEL_DEFAULTS = {"vm.swappiness": "60", "vm.zone_reclaim_mode": "0"}
_POOL = re.compile(r"\Ahugepages-([0-9]+)kB\Z")


def read_meminfo(fsroot):
    """/proc/meminfo parsed (the one reader: this section and the ARC fix); {} without the file (a snapshot
    collected before mem.sysctl existed: the sysctls are judged without it)."""
    if not fsroot.isfile(MEMINFO):
        return {}
    try:
        return parse_meminfo(fsroot.read_text(MEMINFO))
    except ValueError as exc:
        raise FsError(MEMINFO, str(exc))


def read_memory(ctx):
    """Reader of the facts section "memory": ``meminfo`` ({key: kB or count} of MEMINFO_KEYS), ``pools``
    ([{"size_kb", "total", "free"}] of every huge page size), ``thp`` ({"enabled", "defrag"} raw), ``evidence``."""
    fsroot = ctx.fsroot
    info = read_meminfo(fsroot)
    pools = []
    for name in sorted(fsroot.listdir(HUGEPAGES_DIR)) if fsroot.isdir(HUGEPAGES_DIR) else ():
        match = _POOL.match(name)
        if match:
            total = fsroot.try_value("%s/%s/nr_hugepages" % (HUGEPAGES_DIR, name))
            free = fsroot.try_value("%s/%s/free_hugepages" % (HUGEPAGES_DIR, name))
            pools.append({"size_kb": int(match.group(1)), "total": int(total) if (total or "").isdigit() else None,
                          "free": int(free) if (free or "").isdigit() else None})
    return {"meminfo": {key: info.get(key) for key in MEMINFO_KEYS}, "pools": pools,
            "thp": {key: fsroot.try_value("%s/%s" % (THP_DIR, key)) for key in ("enabled", "defrag")},
            "evidence": ["/proc/meminfo", "%s/hugepages-*/{nr,free}_hugepages: %d sizes" % (HUGEPAGES_DIR, len(pools)),
                         "%s/enabled" % THP_DIR]}


def _selected(raw):
    """The bracketed choice of a sysfs choice file ("always [madvise] never" -> "madvise")."""
    match = re.search(r"\[([a-z_+-]+)\]", raw or "")
    return match.group(1) if match else raw


def check_sysctl(facts, policy):
    cid = "mem.sysctl"
    err = section_error(facts, "sysctl") or section_error(facts, "memory")
    if err:
        return make_result(cid, policy, "error", None, err)
    items, ev = [], []
    for key, want in (("vm.swappiness", policy["vm_swappiness"]), ("vm.zone_reclaim_mode",
                                                                   policy["vm_zone_reclaim_mode"])):
        status, current, msg, key_ev = sysctl_state(facts, key, str(want), default=KERNEL_DEFAULTS[key])
        ev.extend(key_ev)
        items.append({"name": key, "status": status or "skip", "current": current, "expected": str(want),
                      "message": msg})
    memory = facts["memory"]
    ev.extend(memory.get("evidence") or [])
    for pool in memory.get("pools") or ():
        if pool["total"] and pool["free"] == pool["total"]:
            gib = pool["total"] * pool["size_kb"] / float(1 << 20)
            size = "%d GiB" % (pool["size_kb"] >> 20) if pool["size_kb"] >= 1 << 20 else "%d kB" % pool["size_kb"]
            items.append({"name": "hugepages-%dkB" % pool["size_kb"], "status": "warn",
                          "current": "%d reserved, all free" % pool["total"], "expected": "reserved pages in use",
                          "message": "%.1f GiB reserved as %s huge pages and none in use: memory no CT and no "
                                     "page cache gets (vm.nr_hugepages, hugepages= on the command line)"
                                     % (gib, size)})
    thp = _selected(memory.get("thp", {}).get("enabled"))
    ev.append("transparent_hugepage/enabled: %s (information)" % thp)
    current = ", ".join("%s %s" % (i["name"], i["current"]) for i in items if i["current"]) + (
        "; THP %s" % thp if thp else "")
    return worst_of(cid, policy, items, current, "swappiness %s and zone_reclaim_mode %s, persisted; no idle huge "
                    "page reservation" % (policy["vm_swappiness"], policy["vm_zone_reclaim_mode"]), ev,
                    skip_message="the kernel has neither vm.swappiness nor vm.zone_reclaim_mode")


SECTIONS = (("memory", read_memory),)
CHECKS = {"mem.sysctl": check_sysctl}
