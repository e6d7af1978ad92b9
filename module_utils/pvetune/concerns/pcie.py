# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe: reader of the NVIDIA functions (sysfs vendor/class and the binary config space, decoded by
formats/pci_config.py), shared by the audit, the fix and the boot helper, and the evaluators of mrrs and
link.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible.module_utils.pvetune.core.result import make_result, section_error
from ansible.module_utils.pvetune.formats.pci_config import (
    BDF_RE,
    SYSFS_PCI_DEVICES,
    _parse_prefix,
    _read_function,
    normalize_bdf,
)

# Fields of pci_config.parse_config() the checks use (the rest of the decoded config stays out of the facts).
PCI_FIELDS = ("cap_exp", "devctl", "mps", "mrrs", "devcap_mps", "lnkcap_speed", "lnkcap_width", "lnksta_speed",
              "lnksta_width", "pcie_type_name")


def gather_pci(fsroot, policy):
    fns = list_functions(fsroot, vendor=policy["pcie_vendor"], class_prefix=policy["pcie_class_prefix"])
    for fn in fns:
        fn["is_gpu"] = True
        cfg = fn.pop("config", None) or {}
        for key in PCI_FIELDS:
            fn[key] = cfg.get(key)
    return {
        "functions": fns,
        "evidence": ["/sys/bus/pci/devices/*/{vendor,class}; binary config (PCIe capability, DevCtl, LnkCap, LnkSta) "
                     "of %d functions: %s" % (len(fns), ", ".join(f["bdf"] for f in fns) or "none")],
    }


# -- PCIe --------------------------------------------------------------------
def _gpus(facts):
    return [f for f in ((facts.get("pci") or {}).get("functions") or []) if f.get("is_gpu")]


def _gpus_or_result(cid, facts, policy, none_found):
    """(gpus, evidence, None), or (None, None, the error/skip result) when there is nothing to judge."""
    err = section_error(facts, "pci")
    if err:
        return None, None, make_result(cid, policy, "error", None, err)
    gpus = _gpus(facts)
    ev = list((facts.get("pci") or {}).get("evidence", []))
    if not gpus:
        return None, None, make_result(cid, policy, "skip", None, none_found, evidence=ev)
    return gpus, ev, None


def check_mrrs(facts, policy):
    cid = "pcie.mrrs"
    gpus, ev, early = _gpus_or_result(cid, facts, policy, "no NVIDIA GPU (vendor %s, class %sxx) found"
                                      % (policy["pcie_vendor"], policy["pcie_class_prefix"]))
    if early:
        return early
    want = policy["pcie_mrrs"]
    items = []
    for gpu in gpus:
        name = "%s %s" % (gpu["bdf"], gpu.get("name") or "")
        if gpu.get("error") or gpu.get("mrrs") is None:
            items.append({"name": name.strip(), "status": "error", "current": None, "expected": "MaxReadReq %d" % want,
                          "message": gpu.get("error") or "no PCI Express capability found"})
            continue
        ok = gpu["mrrs"] == want
        items.append({"name": name.strip(), "status": "pass" if ok else "fail",
                      "current": "MaxReadReq %d, MaxPayload %d (cap %s)" % (
                          gpu["mrrs"], gpu.get("mps") or 0, gpu.get("devcap_mps")),
                      "expected": "MaxReadReq %d" % want, "message": ""})
    fails = [i for i in items if i["status"] == "fail"]
    errors = [i for i in items if i["status"] == "error"]
    values = sorted({g.get("mrrs") for g in gpus if g.get("mrrs") is not None})
    current = "MaxReadReq %s on %d GPUs" % ("/".join(str(v) for v in values) or "?", len(gpus))
    if fails:
        return make_result(cid, policy, "fail", current, "%d of %d GPUs below MaxReadReq %d: %s%s" % (
            len(fails), len(gpus), want, ", ".join(i["name"].split()[0] for i in fails),
            "; could not read %d: %s" % (len(errors), "; ".join(i["message"] for i in errors)) if errors else ""),
            items, ev)
    if errors:
        return make_result(cid, policy, "error", current, "could not read %d GPU config spaces: %s" % (
            len(errors), "; ".join(i["message"] for i in errors)), items, ev)
    return make_result(cid, policy, "pass", current, "all %d GPUs at MaxReadReq %d" % (len(gpus), want), items, ev)


def _speed_value(speed):
    try:
        return float((speed or "").replace("GT/s", ""))
    except ValueError:
        return None


def check_link(facts, policy):
    cid = "pcie.link"
    gpus, ev, early = _gpus_or_result(cid, facts, policy, "no NVIDIA GPU found")
    if early:
        return early
    items = []
    for gpu in gpus:
        name = gpu["bdf"]
        if gpu.get("error") or gpu.get("lnkcap_width") is None:
            items.append({"name": name, "status": "error", "current": None, "expected": None,
                          "message": gpu.get("error") or "no PCI Express capability found"})
            continue
        cur = "%s x%d" % (gpu["lnksta_speed"], gpu["lnksta_width"])
        cap = "%s x%d" % (gpu["lnkcap_speed"], gpu["lnkcap_width"])
        if gpu["lnksta_width"] < gpu["lnkcap_width"]:
            status, msg = "fail", "link trained at x%d of x%d lanes" % (gpu["lnksta_width"], gpu["lnkcap_width"])
        elif (_speed_value(gpu["lnksta_speed"]) or 0) < (_speed_value(gpu["lnkcap_speed"]) or 0):
            status = "warn"
            msg = "speed below capability at full width: usually idle power management; check under load"
        else:
            status, msg = "pass", ""
        items.append({"name": name, "status": status, "current": cur, "expected": cap, "message": msg})
    counts = {s: sum(1 for i in items if i["status"] == s) for s in ("fail", "warn", "error")}
    current = ", ".join(sorted({i["current"] for i in items if i["current"]})) or None
    if counts["fail"]:
        return make_result(cid, policy, "fail", current, "%d GPU links narrower than their capability%s" % (
            counts["fail"], "; could not read %d: %s" % (counts["error"], "; ".join(
                i["message"] for i in items if i["status"] == "error")) if counts["error"] else ""), items, ev)
    if counts["error"]:
        return make_result(cid, policy, "error", current, "could not read %d GPU links: %s" % (
            counts["error"], "; ".join(i["message"] for i in items if i["status"] == "error")), items, ev)
    if counts["warn"]:
        return make_result(cid, policy, "warn", current, "%d of %d GPUs below capable speed at full width (idle "
                           "downclock is normal; re-check under load)" % (counts["warn"], len(gpus)), items, ev)
    return make_result(cid, policy, "pass", current, "all %d GPU links at capability" % len(gpus), items, ev)


def list_functions(fsroot, vendor=None, class_prefix=None, bdfs=None):
    """Scan ``/sys/bus/pci/devices/*`` under ``fsroot``; return matching functions, sorted.

    Filters: ``vendor`` (int or "0x10de"), ``class_prefix`` (hex digits of the 24-bit
    class, e.g. "03" for display controllers, "0604" for bridges), ``bdfs`` (addresses,
    domain optional).  Each entry: bdf, path (host path of the device directory the
    symlink points to), parent (the upstream bridge's address, or None at a root bus),
    vendor_id, device_id, class_code (ints from the sysfs text files), numa_node,
    current_link_speed / max_link_speed ("16GT/s" or None) with the raw text in
    *_raw, current_link_width / max_link_width (int or None), driver (basename of the
    driver link or None), config (parse_config() result, or None) and error (None, or a
    string naming the host path and the problem).  Only matching functions have their
    binary ``config`` read.  A function whose ids cannot be read is kept (with error)
    rather than silently filtered out.  Never raises for a single function's problem;
    FsError only when the devices directory itself is unreadable.
    """
    if isinstance(vendor, str):
        vendor = int(vendor, 16)
    prefix = _parse_prefix(class_prefix) if class_prefix is not None else None
    wanted = None
    if bdfs is not None:
        wanted = {normalize_bdf(b) for b in bdfs}
    result = []
    for name in fsroot.listdir(SYSFS_PCI_DEVICES):
        if not BDF_RE.fullmatch(name):
            continue
        if wanted is not None and name not in wanted:
            continue
        fn = _read_function(fsroot, name, vendor, prefix)
        if fn is not None:
            result.append(fn)
    return result


SECTIONS = (("pci", lambda ctx: gather_pci(ctx.fsroot, ctx.policy)),)
CHECKS = {"pcie.mrrs": check_mrrs, "pcie.link": check_link}
