# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe: reader of the NVIDIA functions (sysfs vendor/class and the binary config space, decoded by
formats/pci_config.py), shared by the audit, the fix and the boot helper, and the evaluators of mrrs and
link.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


import os

from ansible.module_utils.pvetune.concerns.pcie import topology as pcie_topology
from ansible.module_utils.pvetune.concerns.numa.topology import read_nodes
from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.concerns.bootargs.checks import boot_arg_state
from ansible.module_utils.pvetune.core.cpuprofile import ASPM_ARG, aspm_links
from ansible.module_utils.pvetune.core.result import make_result, section_error, worst_of
from ansible.module_utils.pvetune.formats import pci_ext, pci_ids
from ansible.module_utils.pvetune.formats.pci_config import (
    BDF_RE,
    SYSFS_PCI_DEVICES,
    PciConfigError,
    parse_prefix,
    read_function,
    normalize_bdf,
)

# Fields of pci_config.parse_config() the checks use (the rest of the decoded config stays out of the facts).
PCI_FIELDS = ("cap_exp", "devctl", "mps", "mrrs", "devcap_mps", "lnkcap_speed", "lnkcap_width", "lnksta_speed",
              "lnksta_width", "pcie_type_name", "lnkctl_aspm")
ASPM_POLICY = "/sys/module/pcie_aspm/parameters/policy"
VFIO_DRIVER = "vfio-pci"
VFIO_DIR = "/sys/bus/pci/drivers/" + VFIO_DRIVER
GPU_BAR = 1  # the BAR that maps the GPU's memory (BAR0 registers, BAR1 framebuffer aperture, BAR3 more registers)


def _ext(fn, key, parse):
    """Decode one extended capability of a function read with keep_bytes into fn[key]; a broken one, or one the
    broken extended list cut off, becomes fn[key + "_error"] naming the config file."""
    fn[key], fn[key + "_error"] = None, None
    raw, cfg = fn.get("raw"), fn.get("config")
    if raw is None or cfg is None:
        return
    try:
        fn[key] = parse(raw, cfg)
    except PciConfigError as exc:
        fn[key + "_error"] = "%s/config: %s" % (fn["path"], exc)
    if fn[key] is None and fn[key + "_error"] is None and cfg.get("ext_error"):
        fn[key + "_error"] = "%s/config: %s" % (fn["path"], cfg["ext_error"])


def _identity(fn, names, fsroot):
    fn["model"] = pci_ids.model_name(names, fn.get("vendor_id"), fn.get("device_id"))
    fn["host"], fn["chain"] = pcie_topology.chain(fn["path"])
    try:
        fn["iommu_group"] = os.path.basename(fsroot.readlink(fn["path"] + "/iommu_group").rstrip("/"))
    except FsError:
        fn["iommu_group"] = None


def _read_names(fsroot, functions):
    """pci.ids names of the functions' (vendor, device) pairs, from the first database the root has."""
    wanted = {(f["vendor_id"], f["device_id"]) for f in functions if f.get("vendor_id") is not None}
    for path in pci_ids.PCI_IDS_PATHS if wanted else ():
        if fsroot.isfile(path):
            return pci_ids.lookup(fsroot.read_text(path), wanted), path
    return {}, None


def _bar1(fsroot, gpu):
    gpu["bar1"], gpu["bar1_error"] = None, None
    path = gpu["path"] + "/resource"
    try:
        lines = pci_ext.parse_resource(fsroot.read_text(path))
    except FsError as exc:
        gpu["bar1_error"] = str(exc)
        return
    except ValueError as exc:
        gpu["bar1_error"] = "%s: %s" % (path, exc)
        return
    if len(lines) <= GPU_BAR:
        gpu["bar1_error"] = "%s: %d lines, no BAR%d" % (path, len(lines), GPU_BAR)
        return
    gpu["bar1"] = {"size": lines[GPU_BAR]["size"], "start": lines[GPU_BAR]["start"]}


def vfio_functions(fsroot):
    """[(bdf, host bridge, chain)] of the functions bound to vfio-pci."""
    out = []
    for name in fsroot.listdir(VFIO_DIR) if fsroot.isdir(VFIO_DIR) else []:
        if not BDF_RE.fullmatch(name):
            continue
        try:
            target = os.path.normpath(os.path.join(SYSFS_PCI_DEVICES, fsroot.readlink(SYSFS_PCI_DEVICES + "/" + name)))
        except FsError:
            target = None
        host, chain = pcie_topology.chain(target)
        out.append({"bdf": name, "host": host, "chain": chain})
    return out


def gather_pci(fsroot, policy):
    fns = list_functions(fsroot, vendor=policy["pcie_vendor"], class_prefix=policy["pcie_class_prefix"],
                         keep_bytes=True)
    above = sorted({b for fn in fns for b in (pcie_topology.chain(fn["path"])[1] or [])[:-1]})
    bridges = list_functions(fsroot, bdfs=above, keep_bytes=True) if above else []
    names, ids_path = _read_names(fsroot, fns + bridges)
    for fn in fns:
        fn["is_gpu"] = True
        _identity(fn, names, fsroot)
        _ext(fn, "rebar", pci_ext.parse_rebar)
        fn.pop("raw", None)
        _bar1(fsroot, fn)
        for key in ("sriov_totalvfs", "sriov_numvfs"):
            value = fsroot.try_value("%s/%s" % (fn["path"], key))
            fn[key] = int(value) if value is not None and value.isdigit() else None
        cfg = fn.pop("config", None) or {}
        for key in PCI_FIELDS:
            fn[key] = cfg.get(key)
    out_bridges = {}
    for br in bridges:
        _identity(br, names, fsroot)
        _ext(br, "acs", pci_ext.parse_acs)
        br.pop("raw", None)
        cfg = br.pop("config", None) or {}
        out_bridges[br["bdf"]] = {k: br.get(k) for k in ("bdf", "path", "vendor_id", "device_id", "model", "driver",
                                                         "acs", "acs_error",
                                                         "error", "host", "chain")}
        out_bridges[br["bdf"]]["pcie_type_name"] = cfg.get("pcie_type_name")
        out_bridges[br["bdf"]]["lnkctl_aspm"] = cfg.get("lnkctl_aspm")
    nodes, _errors = read_nodes(fsroot, only={f["numa_node"] for f in fns if isinstance(f.get("numa_node"), int)})
    for fn in fns:
        fn["socket"] = (nodes.get(fn.get("numa_node")) or {}).get("socket")
    return {
        "functions": fns,
        "bridges": out_bridges,
        "vfio": vfio_functions(fsroot),
        "names_from": ids_path,
        "aspm_policy": fsroot.try_value(ASPM_POLICY),
        "evidence": ["/sys/bus/pci/devices/*/{vendor,class,resource,iommu_group}; binary config (PCIe capability, "
                     "DevCtl, LnkCap, LnkSta, Resizable BAR) of %d functions: %s" % (
                         len(fns), ", ".join(f["bdf"] for f in fns) or "none"),
                     "ACS of %d bridges above them; names from %s" % (len(bridges), ids_path or "no pci.ids")],
    }


def gpu_label(gpu, smi_index=None):
    """"0000:41:00.0 NVIDIA Corporation GB202GL [...] (NUMA node 0, GPU 3)": a GPU as the reports name it."""
    extra = []
    if isinstance(gpu.get("numa_node"), int):
        extra.append("NUMA node %d" % gpu["numa_node"])
    if smi_index is not None:
        extra.append("GPU %d" % smi_index)
    return "%s %s%s" % (gpu["bdf"], gpu.get("model") or "", " (%s)" % ", ".join(extra) if extra else "")


def smi_indices(facts):
    """{bdf: nvidia-smi index} from the nvidia facts' nvidia-smi output, where it gives one."""
    smi = ((facts.get("nvidia") or {}).get("smi") or {})
    out = {}
    for gpu in smi.get("gpus") or []:
        if gpu.get("index") is not None and gpu.get("bus_id"):
            out[gpu["bus_id"][-12:]] = gpu["index"]
    return out


# -- PCIe --------------------------------------------------------------------
def gpu_functions(facts):
    return [f for f in ((facts.get("pci") or {}).get("functions") or []) if f.get("is_gpu")]


def _gpus_or_result(cid, facts, policy, none_found):
    """(gpus, evidence, None), or (None, None, the error/skip result) when there is nothing to judge."""
    err = section_error(facts, "pci")
    if err:
        return None, None, make_result(cid, policy, "error", None, err)
    gpus = gpu_functions(facts)
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
    labels = _labels(facts, gpus)
    for gpu in gpus:
        name = labels[gpu["bdf"]]
        if gpu.get("error") or gpu.get("mrrs") is None:
            items.append({"name": name, "status": "error", "current": None, "expected": "MaxReadReq %d" % want,
                          "message": gpu.get("error") or "no PCI Express capability found"})
            continue
        ok = gpu["mrrs"] == want
        items.append({"name": name, "status": "pass" if ok else "fail",
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
    labels = _labels(facts, gpus)
    for gpu in gpus:
        name = labels[gpu["bdf"]]
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


def _labels(facts, gpus):
    idx = smi_indices(facts)
    return {g["bdf"]: gpu_label(g, idx.get(g["bdf"])) for g in gpus}


def check_topology(facts, policy):
    cid = "pcie.topology"
    gpus, ev, early = _gpus_or_result(cid, facts, policy, "no NVIDIA GPU found")
    if early:
        return early
    if len(gpus) < 2:
        return make_result(cid, policy, "skip", "1 GPU", "one GPU: there is no GPU-to-GPU path", evidence=ev)
    mat = pcie_topology.matrix(gpus)
    labels = _labels(facts, gpus)
    counts = {}
    for path in mat["pairs"].values():
        counts[path["level"] or "?"] = counts.get(path["level"] or "?", 0) + 1
    order = pcie_topology.LEVELS + ("?",)
    current = ", ".join("%s %d" % (k, counts[k]) for k in order if k in counts) + " of %d GPU pairs" % len(
        mat["pairs"])
    items = [{"name": labels[g["bdf"]], "status": "pass" if "?" not in row else "warn", "current": " ".join(row),
              "expected": None, "message": "" if "?" not in row else "not in the /sys/devices tree: path unknown"}
             for g, row in zip(gpus, mat["rows"])]
    legend = ["%s = %s" % (k, v) for k, v in sorted(pcie_topology.LEGEND.items())]
    msg = "%d GPUs: %s" % (len(gpus), current)
    res = make_result(cid, policy, "pass", current, msg, items,
                      ev + pcie_topology.render(mat) + legend)
    res["matrix"] = {"gpus": [labels[b] for b in mat["gpus"]], "rows": mat["rows"]}
    return res


def check_acs(facts, policy):
    cid = "pcie.acs"
    gpus, ev, early = _gpus_or_result(cid, facts, policy, "no NVIDIA GPU found")
    if early:
        return early
    if policy["gpu_p2p"] == "ignore":
        return make_result(cid, policy, "skip", None, "policy gpu_p2p is ignore", evidence=ev)
    ports = pcie_topology.acs_ports(facts["pci"], gpus)
    if not ports:
        return make_result(cid, policy, "skip", None, "no two GPUs share a PCIe switch: peer traffic crosses the "
                           "host bridge whatever ACS says (see pcie.topology)", evidence=ev)
    items = []
    for rec in ports:
        br = rec["bridge"] or {}
        acs = br.get("acs")
        name = "%s %s (%s)" % (rec["bdf"], br.get("model") or "", br.get("pcie_type_name") or "bridge")
        msg = "GPU pairs " + pcie_topology.pairs_text(rec["pairs"])
        if rec["status"] == "error":
            msg = br.get("acs_error") or br.get("error") or "%s was not read" % rec["bdf"]
        elif rec["status"] == "skip":
            msg = ("%s in this switch is bound to vfio-pci: ACS keeps its IOMMU group apart from the others; left "
                   "as it is" % ", ".join(rec["vfio"]))
        elif rec["status"] == "fail":
            msg += ": %s set" % "/".join(n for n, bit in pci_ext.ACS_BITS if bit & rec["redirect"])
        items.append({"name": name.replace("  ", " "), "status": rec["status"],
                      "current": "ACSCtl: %s" % acs["ctrl_text"] if acs else "no ACS capability",
                      "expected": "ReqRedir- CmpltRedir- EgressCtrl-", "message": msg})
    fails = [r for r in ports if r["status"] == "fail"]
    errors = [i for i, r in zip(items, ports) if r["status"] == "error"]
    current = "%d of %d switch ports redirect peer traffic" % (len(fails), len(ports))
    if fails:
        pairs = sorted({p for r in fails for p in r["pairs"]})
        return make_result(cid, policy, "fail", current, "ACS redirects GPU peer traffic to the root complex on %s; "
                           "affected GPU pairs: %s%s%s" % (
                               ", ".join(r["bdf"] for r in fails), pcie_topology.pairs_text(pairs),
                               "; could not read %s" % "; ".join(i["message"] for i in errors) if errors else "",
                               "" if policy["pcie_acs_fix"] else
                               " (fix.yml clears them only with policy pcie_acs_fix: true)"), items, ev)
    if errors:
        return make_result(cid, policy, "error", current, "could not read ACS of %d ports: %s" % (
            len(errors), "; ".join(i["message"] for i in errors)), items, ev)
    kept = [r["bdf"] for r in ports if r["status"] == "skip"]
    if kept:
        return make_result(cid, policy, "skip", current, "%d of %d ports keep ACS redirect: a vfio-pci device is in "
                           "their switch (%s)" % (len(kept), len(ports), ", ".join(kept)), items, ev)
    return make_result(cid, policy, "pass", current, "peer traffic between GPUs behind a switch stays in the switch",
                       items, ev)


def _smi_bar(facts):
    smi = ((facts.get("nvidia") or {}).get("smi") or {})
    return {g["bus_id"][-12:]: g for g in smi.get("gpus") or [] if g.get("bus_id") and g.get("bar1_total")}


def check_bar1(facts, policy):
    cid = "pcie.bar1"
    gpus, ev, early = _gpus_or_result(cid, facts, policy, "no NVIDIA GPU found")
    if early:
        return early
    labels, smi = _labels(facts, gpus), _smi_bar(facts)
    items = []
    for gpu in gpus:
        bar1 = gpu.get("bar1") or {}
        rebar = ((gpu.get("rebar") or {}).get("bars") or {}).get(GPU_BAR)
        item = {"name": labels[gpu["bdf"]], "status": "pass", "current": None, "expected": None, "message": ""}
        items.append(item)
        if gpu.get("bar1_error") or gpu.get("rebar_error"):
            item.update(status="error", message=gpu.get("bar1_error") or gpu.get("rebar_error"))
            continue
        size = bar1.get("size")
        item["current"] = "BAR1 %s" % (pci_ext.size_text(size) if size else "unassigned")
        if gpu["bdf"] in smi:
            g = smi[gpu["bdf"]]
            item["current"] += " (nvidia-smi: BAR1 %s MiB, FB %s MiB)" % (g["bar1_total"], g.get("fb_total"))
        if rebar is None:
            item["message"] = "no Resizable BAR capability for BAR1: its size is fixed by the GPU"
            continue
        item["expected"] = "BAR1 %s (largest the GPU supports)" % pci_ext.size_text(rebar["max"])
        if rebar["max"] and (size or 0) < rebar["max"]:
            item.update(status="warn", message="BAR1 is %s of up to %s%s: Above 4G Decoding or Resizable BAR is off "
                        "in the firmware" % (pci_ext.size_text(size) or "unassigned", pci_ext.size_text(rebar["max"]),
                                             ", mapped below 4 GB" if size and bar1.get("start", 0) < 1 << 32 else ""))
    warn = [i for i in items if i["status"] == "warn"]
    errors = [i for i in items if i["status"] == "error"]
    current = ", ".join(sorted({i["current"].split(" (")[0] for i in items if i["current"]})) or None
    if warn:
        return make_result(cid, policy, "warn", current, "%d of %d GPUs map only part of what they support: %s%s" % (
            len(warn), len(gpus), ", ".join(i["name"].split()[0] for i in warn), "; could not read %s" % "; ".join(
                i["message"] for i in errors) if errors else ""), items, ev)
    if errors:
        return make_result(cid, policy, "error", current, "could not read BAR1 of %d GPUs: %s" % (
            len(errors), "; ".join(i["message"] for i in errors)), items, ev)
    return make_result(cid, policy, "pass", current, "every GPU maps the BAR1 its capability allows", items, ev)


def check_sriov(facts, policy):
    cid = "pcie.sriov"
    gpus, ev, early = _gpus_or_result(cid, facts, policy, "no NVIDIA GPU found")
    if early:
        return early
    labels = _labels(facts, gpus)
    items = [{"name": labels[g["bdf"]], "status": "pass", "current": "%d of %d VFs enabled" % (
        g.get("sriov_numvfs") or 0, g["sriov_totalvfs"]), "expected": None, "message": ""}
        for g in gpus if g.get("sriov_totalvfs")]
    if not items:
        return make_result(cid, policy, "skip", None, "no GPU offers SR-IOV (no sriov_totalvfs)", evidence=ev)
    return make_result(cid, policy, "pass", "%d GPUs offer SR-IOV" % len(items),
                       "%d of %d GPUs offer SR-IOV virtual functions" % (len(items), len(gpus)), items, ev)


def list_functions(fsroot, vendor=None, class_prefix=None, bdfs=None, keep_bytes=False):
    """Scan ``/sys/bus/pci/devices/*`` under ``fsroot``; return matching functions, sorted.

    Filters: ``vendor`` (int or "0x10de"), ``class_prefix`` (hex digits of the 24-bit
    class, e.g. "03" for display controllers, "0604" for bridges), ``bdfs`` (addresses,
    domain optional).  Each entry: bdf, path (host path of the device directory the
    symlink points to), parent (the upstream bridge's address, or None at a root bus),
    vendor_id, device_id, class_code (ints from the sysfs text files), numa_node,
    current_link_speed / max_link_speed ("16GT/s" or None) with the raw text in
    *_raw, current_link_width / max_link_width (int or None), driver (basename of the
    driver link or None), config (parse_config() result, or None) and error (None, or a
    string naming the host path and the problem); with ``keep_bytes`` also the config bytes read (raw, for the
    extended capabilities' decoders; never in the facts).  Only matching functions have their
    binary ``config`` read.  A function whose ids cannot be read is kept (with error)
    rather than silently filtered out.  Never raises for a single function's problem;
    FsError only when the devices directory itself is unreadable.
    """
    if isinstance(vendor, str):
        vendor = int(vendor, 16)
    prefix = parse_prefix(class_prefix) if class_prefix is not None else None
    wanted = None
    if bdfs is not None:
        wanted = {normalize_bdf(b) for b in bdfs}
    result = []
    for name in fsroot.listdir(SYSFS_PCI_DEVICES):
        if not BDF_RE.fullmatch(name):
            continue
        if wanted is not None and name not in wanted:
            continue
        fn = read_function(fsroot, name, vendor, prefix, keep_bytes)
        if fn is not None:
            result.append(fn)
    return result


# -- ASPM ----------------------------------------------------------------------------------------------------------
def check_aspm(facts, policy):
    cid = "pcie.aspm"
    gpus, ev, early = _gpus_or_result(cid, facts, policy, "no NVIDIA GPU found")
    if early:
        return early
    aspm_policy = (facts.get("pci") or {}).get("aspm_policy")
    ev.append("%s = %s" % (ASPM_POLICY, aspm_policy))
    if policy["pcie_aspm"] == "any":
        return make_result(cid, policy, "skip", None, "pcie_aspm is any in the policy", evidence=ev)
    labels = _labels(facts, gpus)
    items = []
    for gpu, port, states in aspm_links(facts):
        item = {"name": labels[gpu["bdf"]], "status": "pass", "current": " ".join(states) or "disabled",
                "expected": "disabled", "message": "ASPM off on the link%s" % (" to %s" % port if port else "")}
        if gpu.get("lnkctl_aspm") is None:
            item.update(status="error", current=None, message=gpu.get("error") or (
                "no PCI Express capability read from %s/config" % gpu.get("path")))
        elif states:
            item.update(status="fail", message="ASPM %s enabled on the link%s (LnkCtl): every exit from a low-power "
                        "link state delays the GPU's transfers" % (" and ".join(states), " to %s" % port if port
                                                                   else ""))
        items.append(item)
    bad = [i for i in items if i["status"] == "fail"]
    shown = "; policy " + aspm_policy if aspm_policy else ""
    current = "%d of %d GPU links with ASPM on%s" % (len(bad), len(items), shown)
    res = worst_of(cid, policy, items, current, "ASPM is off on every GPU link", ev)
    if res["status"] == "fail":
        state = boot_arg_state(facts, ASPM_ARG)[0]
        if state == "pending":
            res.update(status="pending", reboot_required=True, message=res["message"] + "; %s is configured for the "
                       "next boot" % ASPM_ARG)
        elif policy["pcie_aspm_fix"]:
            res["reboot_required"] = True
        else:
            res["message"] += ("; disable ASPM in the firmware setup, or add %s to the command line (fix.yml does "
                               "with policy pcie_aspm_fix: true)" % ASPM_ARG)
    return res


SECTIONS = (("pci", lambda ctx: gather_pci(ctx.fsroot, ctx.policy)),)
CHECKS = {"pcie.mrrs": check_mrrs, "pcie.link": check_link, "pcie.topology": check_topology, "pcie.acs": check_acs,
          "pcie.bar1": check_bar1, "pcie.sriov": check_sriov, "pcie.aspm": check_aspm}
