# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``nvidia.stack`` check: the NVIDIA driver against the GPU generations (tables/nvidia_generations.py), and the
user-space driver of every GPU CT against the host's kernel module.

It reads nothing itself: the driver version and flavour come from the facts section "nvidia", the GPUs from "pci"
and the CTs' library names from "ct_runtime" (concerns/lxcres/checks.py reads them, through /proc/<init>/root).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.concerns.nvidia.checks import CUDA_LIBS, DRIVER_LIBS
from ansible.module_utils.pvetune.concerns.pcie.checks import gpu_functions
from ansible.module_utils.pvetune.core.result import make_result, section_error, worst_of
from ansible.module_utils.pvetune.tables.cuda_targets import FIRST_CUDA, compute_capability, version_tuple
from ansible.module_utils.pvetune.tables.nvidia_generations import GENERATIONS, generation_of, min_driver, open_required

_VERSION = re.compile(r"\A([0-9]{2,4}(?:\.[0-9]{1,3}){1,2})\Z")


def version_key(version):
    """"580.95.05" -> (580, 95, 5) for comparisons; None for anything else."""
    return tuple(int(p) for p in version.split(".")) if version and _VERSION.match(version) else None


def _lib_version(name):
    """The version in a library file name (libcuda.so.580.95.05), or None."""
    match = re.match(r"\Alib(?:cuda|nvidia-ml)\.so\.([0-9.]+)\Z", name or "")
    return match.group(1) if match and version_key(match.group(1)) else None


def ct_driver(libs):
    """(the user-space driver version(s) a CT loads, how that was told): the targets of libcuda.so.1 and
    libnvidia-ml.so.1 when they are links, else every version in the library names."""
    linked = sorted({v for v in (_lib_version(t) for t in (libs.get("links") or {}).values()) if v})
    if linked:
        return linked, "libcuda.so.1 / libnvidia-ml.so.1 point to"
    found = sorted({v for lib, vs in (libs.get("versions") or {}).items() if lib in DRIVER_LIBS for v in vs})
    return found, "library files"


def install_command(version):
    """The user-space-only install of a driver version in a CT (the kernel module is the host's)."""
    return ("in the CT: sh NVIDIA-Linux-x86_64-%s.run --no-kernel-modules (or the distribution's user-space "
            "packages of %s, e.g. libnvidia-compute and nvidia-utils, never the kernel module or DKMS)" % (
                version, version))


def _generation_items(gpus, version):
    items = []
    groups = {}
    for gpu in gpus:
        groups.setdefault(generation_of(gpu.get("device_id"), gpu.get("model")), []).append(gpu)
    for gen, members in sorted(groups.items(), key=lambda kv: kv[0] or ""):
        names = ", ".join(g["bdf"] for g in members)
        row = GENERATIONS.get(gen)
        plural = "s" if len(members) > 1 else ""
        item = {"name": "%s (%d GPU%s)" % (row["name"] if row else "unknown generation", len(members), plural),
                "status": "pass", "current": "%s%s" % (version["version"], ", open kernel modules"
                                                       if version.get("open") else ", proprietary kernel modules"),
                "expected": None, "message": names}
        if row is None:
            item.update(status="skip", message="%s: device ids not in the generations table" % names)
            items.append(item)
            continue
        want, problems = [], []
        ids = sorted({g.get("device_id") for g in members if isinstance(g.get("device_id"), int)})
        if any(open_required(row, d) for d in ids) or (not ids and row["open_modules"] == "required"):
            want.append("open kernel modules")
            if not version.get("open"):
                problems.append("%s GPUs need the open kernel modules; the proprietary ones do not drive them (%s)"
                                % (row["name"], row["open_source"]))
        elif row["open_modules"] == "unsupported":
            want.append("proprietary kernel modules")
            if version.get("open"):
                problems.append("the open kernel modules do not support %s GPUs (%s)"
                                % (row["name"], row["open_source"]))
        # The first driver: the latest first driver of the devices present (a device can come later than its
        # generation: 10de:2bb5 needs 575.57.08, the generation 570.86.15).
        floors = [min_driver(row, d) for d in ids] or [(row["min_driver"], row["min_source"])]
        floor, floor_source = max(((v, src) for v, src in floors if v), key=lambda vs: version_key(vs[0]),
                                  default=(None, None))
        if floor:
            want.append("driver >= %s" % floor)
            have = version_key(version["version"])
            if have is not None and have < version_key(floor):
                problems.append("driver %s predates support for these %s GPUs (first in %s: %s)" % (
                    version["version"], row["name"], floor, floor_source))
        if row.get("max_branch"):
            want.append("a branch <= %s" % row["max_branch"])
            have = version_key(version["version"])
            if have is not None and have[0] > int(row["max_branch"]):
                problems.append("branch %d no longer supports %s GPUs (last branch %s: %s)" % (
                    have[0], row["name"], row["max_branch"], row["max_source"]))
        item["expected"] = ", ".join(want) or None
        if problems:
            item.update(status="fail", message="%s: %s" % (names, "; ".join(problems)))
        items.append(item)
    return items


def _ct_items(runtime, host_version):
    items = []
    for ct in runtime.get("cts") or ():
        libs = ct.get("libs") or {}
        item = {"name": "CT %s" % ct["ctid"], "status": "pass", "current": None,
                "expected": "user-space driver %s" % host_version, "message": libs.get("root") or ""}
        if libs.get("reason"):
            item.update(status="skip", message=libs["reason"])
            items.append(item)
            continue
        versions, how = ct_driver(libs)
        item["current"] = ", ".join(versions) or "none"
        if not versions:
            item.update(status="warn", message="no libcuda.so.<version> / libnvidia-ml.so.<version> in %s of %s: "
                        "CUDA cannot start in this CT (or a hook mounts them at start)" % (
                            ", ".join(libs.get("dirs") or ["its library directories"]), libs.get("root")))
        elif versions != [host_version]:
            item.update(status="fail", message=(
                "%s %s, the host's kernel module is %s: every CUDA and NVML call in the CT fails with "
                "'Driver/library version mismatch'. Install %s" % (how, ", ".join(versions), host_version,
                                                                   install_command(host_version))))
        else:
            item["message"] = "%s %s (%s)" % (how, host_version, libs.get("root"))
        items.append(item)
    return items


def check_stack(facts, policy):
    cid = "nvidia.stack"
    err = section_error(facts, "nvidia") or section_error(facts, "pci")
    if err:
        return make_result(cid, policy, "error", None, err)
    nv = facts.get("nvidia") or {}
    runtime = facts.get("ct_runtime") or {}
    ev = list(nv.get("evidence") or [])[:1] + list(runtime.get("evidence") or [])
    gpus = gpu_functions(facts)
    host = [g for g in gpus if g.get("driver") != "vfio-pci"]
    if not gpus:
        return make_result(cid, policy, "skip", None, "no NVIDIA GPU found", evidence=ev)
    if not host:
        return make_result(cid, policy, "skip", "vfio-pci", "all NVIDIA GPUs are bound to vfio-pci (VM passthrough)",
                           evidence=ev)
    version = nv.get("version")
    if not version:
        return make_result(cid, policy, "skip", None, "the NVIDIA driver is not loaded (see nvidia.driver)",
                           evidence=ev)
    items = _generation_items(host, version)
    ct_items = [] if section_error(facts, "ct_runtime") else _ct_items(runtime, version["version"])
    items += ct_items
    if section_error(facts, "ct_runtime"):
        items.append({"name": "GPU CTs", "status": "error", "current": None, "expected": None,
                      "message": section_error(facts, "ct_runtime")})
    current = "%s (%s kernel modules); %d GPU CTs checked" % (
        version["version"], "open" if version.get("open") else "proprietary",
        len([i for i in ct_items if i["status"] != "skip"]))
    for status in ("fail", "error", "warn"):
        bad = [i for i in items if i["status"] == status]
        if bad:
            return make_result(cid, policy, status, current, " | ".join("%s: %s" % (i["name"], i["message"])
                                                                        for i in bad), items, ev)
    return make_result(cid, policy, "pass", current, "driver %s fits the GPUs; every checked GPU CT runs it" %
                       version["version"], items, ev)


def _cc_need(gpus):
    """(the newest compute capability among the GPUs, the first CUDA for it, its source, {cc: [bdf]}); the first
    three None when no GPU's capability is known."""
    by_cc = {}
    for gpu in gpus:
        by_cc.setdefault(compute_capability(gpu.get("device_id"), gpu.get("model")), []).append(gpu["bdf"])
    known = [cc for cc in by_cc if cc in FIRST_CUDA]
    if not known:
        return None, None, None, by_cc
    cc = max(known, key=lambda c: version_tuple(FIRST_CUDA[c][0]))
    return cc, FIRST_CUDA[cc][0], FIRST_CUDA[cc][1], by_cc


def _cuda_item(ct, cc, need):
    libs = ct.get("libs") or {}
    item = {"name": "CT %s" % ct["ctid"], "status": "pass", "current": None,
            "expected": "CUDA >= %s (sm_%s)" % (need, cc.replace(".", "")), "message": ""}
    if libs.get("reason"):
        item.update(status="skip", message=libs["reason"])
        return item
    found = {}
    for lib in CUDA_LIBS:
        for version in (libs.get("versions") or {}).get(lib) or ():
            if version_tuple(version):
                found.setdefault(version_tuple(version), []).append("%s.%s" % (lib, version))
    if not found:
        where = ", ".join(libs.get("dirs") or ["its library directories"])
        item.update(status="skip", message="no libcudart.so.<ver> / libcublas.so.<ver> in %s (a CUDA runtime inside "
                    "a Python environment is not searched)" % where)
        return item
    want = version_tuple(need)
    old = sorted(v for v in found if v < want)
    item["current"] = "CUDA " + ", ".join("%d.%d" % v for v in sorted(found))

    def names(versions):
        return ", ".join(n for v in versions for n in found[v])
    if len(old) == len(found):
        item.update(status="fail", message="CUDA runtime %s (%s) cannot target the GPUs' compute capability %s "
                    "(sm_%s, first in CUDA %s): kernels fail with 'no kernel image is available for execution on the "
                    "device'" % ("/".join("%d.%d" % v for v in old), names(old), cc, cc.replace(".", ""), need))
    elif old:
        item.update(status="warn", message="CUDA %s fits, but %s predates CUDA %s: what links it fails on sm_%s" % (
            "/".join("%d.%d" % v for v in sorted(found) if v >= want), names(old), need, cc.replace(".", "")))
    else:
        item["message"] = names(sorted(found))
    return item


def check_compute_capability(facts, policy):
    cid = "nvidia.compute_capability"
    # The GPU CTs are known only from the CT configs and the NVIDIA majors: without them ct_runtime lists none.
    err = (section_error(facts, "pci") or section_error(facts, "nvidia") or section_error(facts, "lxc")
           or section_error(facts, "ct_runtime"))
    if err:
        return make_result(cid, policy, "error", None, err)
    runtime = facts.get("ct_runtime") or {}
    ev = list(runtime.get("evidence") or [])
    host = [g for g in gpu_functions(facts) if g.get("driver") != "vfio-pci"]
    if not host:
        return make_result(cid, policy, "skip", None, "no host-owned NVIDIA GPU", evidence=ev)
    cc, need, source, by_cc = _cc_need(host)
    groups = sorted(by_cc.items(), key=lambda kv: kv[0] or "")
    ev.append("compute capability: %s" % "; ".join("%s: %s" % (c or "unknown", ", ".join(b)) for c, b in groups))
    if cc is None:
        return make_result(cid, policy, "skip", None, "the GPUs' compute capability is not in the table (device ids "
                           "%s)" % ", ".join(sorted({"%04x" % g["device_id"] for g in host
                                                     if isinstance(g.get("device_id"), int)})), evidence=ev)
    ev.append("compute capability %s: first CUDA %s (%s)" % (cc, need, source))
    items = [_cuda_item(ct, cc, need) for ct in runtime.get("cts") or ()]
    current = "GPUs sm_%s; %d GPU CTs with a CUDA runtime checked" % (
        cc.replace(".", ""), len([i for i in items if i["status"] != "skip"]))
    return worst_of(cid, policy, items, current, "every checked GPU CT's CUDA runtime targets sm_%s" %
                    cc.replace(".", ""), ev, skip_message="no running GPU CT with a CUDA runtime in its library "
                    "directories" if items else "no GPU CT")


SECTIONS = ()
CHECKS = {"nvidia.stack": check_stack, "nvidia.compute_capability": check_compute_capability}
