# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU interrupts: the reader of the facts section "irq" (each GPU's IRQs, their affinities and the CPUs that
handled them, irqbalance's state) and the evaluator of ``irq.gpu_affinity``.

The GPUs and their NUMA nodes come from the sections "pci" and "numa", read before this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.concerns.numa.topology import facts_nodes
from ansible.module_utils.pvetune.concerns.pcie.checks import gpu_functions
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.core.result import make_result, section_error, short_list, worst_of
from ansible.module_utils.pvetune.formats.cpu_list import format_cpu_list, parse_cpu_list
from ansible.module_utils.pvetune.formats.proc_interrupts import handled, parse_proc_interrupts

PROC_INTERRUPTS = "/proc/interrupts"
IRQBALANCE_PROCS = ("/sys/fs/cgroup/system.slice/irqbalance.service/cgroup.procs",            # cgroup v2
                    "/sys/fs/cgroup/systemd/system.slice/irqbalance.service/cgroup.procs")    # v1 (PVE 6)
IRQBALANCE_DEFAULTS = "/etc/default/irqbalance"
BANNED_KEYS = ("IRQBALANCE_BANNED_CPULIST", "IRQBALANCE_BANNED_CPUS")
_IRQ = re.compile(r"\A[0-9]{1,9}\Z")
_ASSIGN = re.compile(r"\A(?:export\s+)?([A-Z_][A-Z0-9_]*)=(.*)\Z")


# -- reader --------------------------------------------------------------------
def _cpus(fsroot, path, errors, optional=False):
    """The CPU list in ``path``, or None (an error naming the file; nothing when ``optional`` and it is absent)."""
    if optional and not fsroot.exists(path):
        return None
    try:
        return parse_cpu_list(fsroot.read_value(path))
    except FsError as exc:
        errors.append("%s: %s" % (path, exc.reason))
    except ValueError as exc:
        errors.append("%s: %s" % (path, exc))
    return None


def _gpu_irqs(fsroot, fn, errors):
    """(the IRQ numbers of one PCI function, where they came from): msi_irqs/ entries, else the legacy irq file."""
    msi = fn["path"] + "/msi_irqs"
    if fsroot.isdir(msi):
        names = fsroot.listdir(msi)
        bad = [n for n in names if not _IRQ.match(n)]
        if bad:
            errors.append("%s: %r is not an IRQ number" % (msi, bad[0][:30]))
        return sorted(int(n) for n in names if _IRQ.match(n)), "msi_irqs"
    if "driver" in fn and not fn["driver"]:
        return [], "no driver bound"
    path = fn["path"] + "/irq"
    try:
        text = fsroot.read_value(path)
    except FsError as exc:
        errors.append("%s: %s" % (path, exc.reason))
        return [], "irq"
    if not _IRQ.match(text):
        errors.append("%s: %r is not an IRQ number" % (path, text[:30]))
        return [], "irq"
    return ([int(text)] if int(text) else []), "irq"


def read_irqbalance(fsroot):
    """{"running", "procs_file", "installed", "banned": {key: value}, "errors"} (the banned keys are information)."""
    out = {"running": False, "procs_file": None, "installed": fsroot.exists("/usr/sbin/irqbalance"), "banned": {},
           "errors": []}
    for path in IRQBALANCE_PROCS:
        if fsroot.isfile(path):
            out["procs_file"] = path
            try:
                out["running"] = bool(fsroot.read_value(path))
            except FsError as exc:
                out["errors"].append("%s: %s" % (path, exc.reason))
            break
    if fsroot.isfile(IRQBALANCE_DEFAULTS):
        try:
            text = fsroot.read_text(IRQBALANCE_DEFAULTS, limit=65536)
        except FsError as exc:
            out["errors"].append("%s: %s" % (IRQBALANCE_DEFAULTS, exc.reason))
            text = ""
        for line in text.splitlines():
            match = _ASSIGN.match(line.strip())
            if match and match.group(1) in BANNED_KEYS:
                out["banned"][match.group(1)] = match.group(2).strip().strip("\"'")
    return out


def read_irq(ctx):
    """Reader of the facts section "irq".

    ``gpus``: [{"bdf", "node", "source", "irqs", "errors"}], each IRQ {"irq", "affinity", "effective", "handled_on",
    "handled_counts", "count", "actions"}; ``irqbalance`` (read_irqbalance); ``errors`` (every GPU's, "bdf: ...");
    ``evidence``.  A GPU's unreadable or malformed file is an error of that GPU naming the file (so is an unreadable
    /proc/interrupts, for every GPU with IRQs).  affinity/effective are None when unread (effective also where the
    kernel has no effective_affinity_list); handled_on/handled_counts/count None when /proc/interrupts was not read.
    """
    fsroot = ctx.fsroot
    gpus, errors, ev = [], [], []
    for fn in gpu_functions(ctx.facts):
        own = []
        numbers, source = _gpu_irqs(fsroot, fn, own)
        irqs = [{"irq": n,
                 "affinity": _cpus(fsroot, "/proc/irq/%d/smp_affinity_list" % n, own),
                 "effective": _cpus(fsroot, "/proc/irq/%d/effective_affinity_list" % n, own, optional=True),
                 "handled_on": None, "handled_counts": None, "count": None, "actions": None} for n in numbers]
        gpus.append({"bdf": fn["bdf"], "node": fn.get("numa_node"), "source": source, "irqs": irqs, "errors": own})
        ev.append("%s: %s %s" % (fn["bdf"], source, format_cpu_list(numbers) or "none"))
    interrupts_error = None
    own_irqs = {i["irq"] for g in gpus for i in g["irqs"]}
    if own_irqs:
        try:
            rows = {r["irq"]: r for r in parse_proc_interrupts(fsroot.read_text(PROC_INTERRUPTS), ("nvidia",),
                                                               irqs=own_irqs)}
        except FsError as exc:
            interrupts_error = "%s: %s" % (PROC_INTERRUPTS, exc.reason)
        except ValueError as exc:
            interrupts_error = str(exc)
        else:
            for irq in (i for g in gpus for i in g["irqs"]):
                row = rows.get(irq["irq"])  # absent: no handler, no count (left out)
                pairs = handled(row) if row else []
                irq.update(handled_on=[c for c, _n in pairs], handled_counts=[n for _c, n in pairs],
                           count=sum(row["counts"]) if row else 0, actions=row["actions"] if row else [])
            ev.append("%s: %d of the GPUs' %d IRQs listed, %d with an nvidia action" % (
                PROC_INTERRUPTS, len(own_irqs & set(rows)), len(own_irqs),
                len([r for r in rows.values() if "nvidia" in r["actions"]])))
    if interrupts_error:
        for gpu in gpus:
            if gpu["irqs"]:
                gpu["errors"].append(interrupts_error)
    for gpu in gpus:
        errors.extend("%s: %s" % (gpu["bdf"], e) for e in gpu["errors"])
    return {"gpus": gpus, "irqbalance": read_irqbalance(fsroot), "errors": errors, "evidence": ev}


# -- evaluator -------------------------------------------------------------------
def _plural(count, noun):
    return "%d %s%s" % (count, noun, "" if count == 1 else "s")


def irqbalance_lines(state):
    """The evidence lines of irqbalance's state."""
    if not state:
        return []
    lines = ["irqbalance: %s (%s)" % ("running" if state.get("running") else "not running",
                                      state.get("procs_file") or "no irqbalance.service cgroup")]
    lines.extend("%s: %s=%s" % (IRQBALANCE_DEFAULTS, k, v) for k, v in sorted((state.get("banned") or {}).items()))
    lines.extend(state.get("errors") or [])
    return lines


def _mask(irq):
    """(the CPUs an IRQ is routed to, which file said so): the effective affinity, else smp_affinity_list (an
    empty effective list is an IRQ not started yet)."""
    if irq.get("effective"):
        return irq["effective"], "effective affinity"
    return irq.get("affinity"), "smp_affinity_list"


def _judge(gpu, data, nodes):
    """One GPU's item, and the numbers of its IRQs that are off its node."""
    bdf = gpu["bdf"]
    item = {"name": bdf, "status": "pass", "current": None, "expected": None, "message": ""}
    node = gpu.get("numa_node")  # the pci section's, which the reader copied
    if not isinstance(node, int) or node < 0:
        item.update(status="skip", message="no NUMA node (numa_node %s): nothing to be local to" % node)
        return item, []
    if data is None:
        item.update(status="error", message="its IRQs were not read")
        return item, []
    if data.get("errors"):
        item.update(status="error", message="; ".join(data["errors"]))
        return item, []
    local = set((nodes.get(node) or {}).get("cpus") or ())
    if not local:
        item.update(status="error", message="the CPUs of its node %d are unknown (section numa)" % node)
        return item, []
    irqs = data.get("irqs") or []
    item["expected"] = "node %d: CPUs %s" % (node, format_cpu_list(local))
    if not irqs:
        item.update(status="skip", message="no IRQ (%s)" % data.get("source"))
        return item, []
    item["current"] = ", ".join("IRQ %d on CPUs %s" % (i["irq"], format_cpu_list(_mask(i)[0] or []) or "?")
                                for i in irqs)
    problems, off = [], []
    for irq in irqs:
        mask, kind = _mask(irq)
        if mask and not local.intersection(mask):
            problems.append("IRQ %d %s CPUs %s has no CPU of node %d" % (irq["irq"], kind, format_cpu_list(mask),
                                                                         node))
            off.append(irq["irq"])
        count = irq.get("count") or 0
        away = [(c, n) for c, n in zip(irq.get("handled_on") or (), irq.get("handled_counts") or ()) if c not in local]
        share = sum(n for _c, n in away)
        if count and share * 2 > count:
            problems.append("IRQ %d: %d%% of its %d interrupts since boot handled on CPUs %s, off node %d" % (
                irq["irq"], share * 100 // count, count, format_cpu_list([c for c, _n in away]), node))
            if irq["irq"] not in off:
                off.append(irq["irq"])
    if problems:
        item.update(status="warn", message="; ".join(problems))
    else:
        item["message"] = "%s on node %d" % (_plural(len(irqs), "IRQ"), node)
    return item, off


def check_gpu_affinity(facts, policy):
    cid = "irq.gpu_affinity"
    err = section_error(facts, "irq") or section_error(facts, "pci") or section_error(facts, "numa")
    if err:
        return make_result(cid, policy, "error", None, err)
    data = facts.get("irq") or {}
    ev = list(data.get("evidence") or []) + irqbalance_lines(data.get("irqbalance"))
    gpus = gpu_functions(facts)
    if not gpus:
        return make_result(cid, policy, "skip", None, "no NVIDIA GPU found", evidence=ev)
    nodes = facts_nodes(facts)
    if len([n for n in nodes.values() if n.get("cpus")]) <= 1:
        if (facts.get("numa") or {}).get("errors"):
            return make_result(cid, policy, "error", None, "; ".join(facts["numa"]["errors"]), evidence=ev)
        return make_result(cid, policy, "skip", None, "one NUMA node: every CPU is local", evidence=ev)
    by_bdf = {g.get("bdf"): g for g in data.get("gpus") or () if isinstance(g, dict)}
    items, off = [], []
    for gpu in gpus:
        item, away = _judge(gpu, by_bdf.get(gpu["bdf"]), nodes)
        items.append(item)
        off.extend(away)
    judged = [i for i in items if i["status"] == "pass"]
    n_irqs = sum(len((by_bdf.get(i["name"]) or {}).get("irqs") or ()) for i in judged)
    ok = "%s of %s on their NUMA node" % (_plural(n_irqs, "IRQ"), _plural(len(judged), "GPU"))
    current = "%s off their node" % _plural(len(off), "GPU IRQ") if off else ok
    res = worst_of(cid, policy, items, current, ok, ev)
    balance = data.get("irqbalance") or {}
    if res["status"] == "warn" and off and not balance.get("running"):
        res["message"] += (" | irqbalance is not running%s: run it (it places each IRQ on its device's numa_node) or "
                           "write the GPU node's CPUs to /proc/irq/N/smp_affinity_list, re-applied at boot" % (
                               "" if balance.get("installed") else " (not installed)"))
    elif res["status"] == "warn" and off and balance.get("banned"):
        res["message"] += " | irqbalance runs with %s" % short_list(
            ["%s=%s" % kv for kv in sorted(balance["banned"].items())])
    return res


SECTIONS = (("irq", read_irq),)
CHECKS = {"irq.gpu_affinity": check_gpu_affinity}
