# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA concern: the one reader of the host's NVIDIA state, and the ``nvidia.driver`` check.

``read_state(fsroot, runner, smi)`` reads the driver version (/proc/driver/nvidia/version), the registered majors
(/proc/devices), the device nodes (/dev/nvidia*, or a snapshot's ``ls -l`` capture) and, for the audit, the GPUs'
persistence mode (``nvidia-smi`` on a live host, the snapshot's ``nvidia-smi -q`` capture otherwise).  The audit
(facts section "nvidia"), the LXC GPU fix and the boot helper all read the host through it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.concerns.pcie.checks import gpu_functions
from ansible.module_utils.pvetune.core.fsroot import SNAPSHOT_DIR, FsError
from ansible.module_utils.pvetune.core.runner import captured_output
from ansible.module_utils.pvetune.core.result import make_result, section_error
from ansible.module_utils.pvetune.formats import dev_nodes, proc_devices
from ansible.module_utils.pvetune.formats.modprobe_conf import read_options
from ansible.module_utils.pvetune.formats.nvidia_smi_q import parse_gpu_state
from ansible.module_utils.pvetune.tables.nvidia_hmm import hmm_issues

VERSION_FILE = "/proc/driver/nvidia/version"
GPUS_DIR = "/proc/driver/nvidia/gpus"
SMI_SNAPSHOT = SNAPSHOT_DIR + "/nvidia-smi-q.txt"
# The one nvidia-smi call of the audit: -q, the text a snapshot carries too, so live and snapshot parse alike.
SMI_ARGS = ["-q"]
UVM_NODE = "/dev/nvidia-uvm"
HMM_PARAM = "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm"
# The values a bool module parameter takes (the kernel's param_set_bool: kstrtobool's first character).
HMM_VALUES = {"Y": True, "y": True, "1": True, "N": False, "n": False, "0": False}
# nvidia-persistenced writes its pid here (its --help, and the driver's init scripts); /var/run is a link to /run.
PERSISTENCED_PID = "/run/nvidia-persistenced/nvidia-persistenced.pid"
PERSISTENCED_COMM = "nvidia-persiste"       # /proc/<pid>/comm: the name cut to 15 characters
CTL_NODE = "/dev/nvidiactl"


def read_state(fsroot, runner=None, smi=False):
    """The host's NVIDIA state; raises FsError only when /proc/devices cannot be read.

    Keys: ``version`` (parse_nvidia_version() or None), ``driver_loaded``; ``devices`` (parse_proc_devices()),
    ``majors`` ({driver name: major}) and ``char_majors`` (every registered char major), all None with
    ``devices_error`` set when /proc/devices is no listing; ``nodes`` (None when neither stat() nor a snapshot
    capture tells) and ``nodes_source``; ``gpu_minors`` ({bdf: N of /dev/nvidiaN}); with ``smi`` also ``smi`` (with
    ``state``, each GPU's runtime state) / ``smi_reason``; ``evidence``.
    """
    out = {"evidence": [], "devices_error": None}
    out["driver_loaded"] = fsroot.isfile(VERSION_FILE)
    if out["driver_loaded"]:
        out["version"] = parse_nvidia_version(fsroot.read_text(VERSION_FILE))
        out["evidence"].append("%s: %s" % (VERSION_FILE, (out["version"] or {}).get("version")))
    else:
        out["version"] = None
        out["evidence"].append("%s: missing" % VERSION_FILE)
    text = fsroot.read_text("/proc/devices")
    out["devices_error"] = proc_devices.listing_problem(text)
    if out["devices_error"]:
        out["devices"] = out["majors"] = out["char_majors"] = None
        out["evidence"].append("/proc/devices: %s" % out["devices_error"])
    else:
        out["devices"] = proc_devices.parse_proc_devices(text)
        out["majors"] = proc_devices.nvidia_majors(out["devices"])
        out["char_majors"] = sorted(out["devices"]["char"])
        out["evidence"].append("/proc/devices: %s" % (", ".join("%s=%s" % kv for kv in sorted(out["majors"].items()))
                                                      or "no nvidia majors"))
    out["gpu_minors"], minor_errors = _read_minors(fsroot)
    out["evidence"].extend(minor_errors)
    nodes, source = dev_nodes.stat_dev_nodes(fsroot)
    out["nodes"] = None if source == dev_nodes.SOURCE_NONE else nodes
    out["nodes_source"] = source
    out["evidence"].append("/dev/nvidia* (%s): %d nodes" % (source, len(nodes)))
    if smi:
        out["smi"], out["smi_reason"] = _read_smi(fsroot, runner, out["evidence"])
        out["persistenced"] = read_persistenced(fsroot)
        out["hmm"] = read_hmm(fsroot)
    return out


def read_persistenced(fsroot):
    """``{"pid", "running"}``: the pid in nvidia-persistenced's pid file and whether that process is the daemon."""
    pid = fsroot.try_value(PERSISTENCED_PID)
    if not (pid and re.match(r"\A[0-9]{1,9}\Z", pid)):
        return {"pid": None, "running": False}
    return {"pid": int(pid), "running": fsroot.try_value("/proc/%s/comm" % pid) == PERSISTENCED_COMM}


def read_hmm(fsroot):
    """``{"disabled": the loaded nvidia_uvm's uvm_disable_hmm (bool, None when not loaded), "configured": the value
    modprobe.d gives it (bool or None), "configured_in": that file, "error": a parameter value that is no bool}``.
    modprobe reads the files in the order of their names (a name in /etc hides the same name below), and the last
    value of an option wins."""
    raw = fsroot.try_value(HMM_PARAM)
    out = {"disabled": HMM_VALUES.get(raw), "configured": None, "configured_in": None, "error": None}
    if raw is not None and out["disabled"] is None:
        out["error"] = "%s: %r is not Y or N" % (HMM_PARAM, raw[:40])
    conf = read_options(fsroot, "nvidia_uvm", ("uvm_disable_hmm",))["uvm_disable_hmm"]
    if conf is not None and conf["value"] in HMM_VALUES:
        out["configured"], out["configured_in"] = HMM_VALUES[conf["value"]], conf["file"]
    return out


def _read_minors(fsroot):
    """``({bdf: device minor}, [problem])`` from /proc/driver/nvidia/gpus/<bdf>/information (/dev/nvidia<minor>)."""
    minors, problems = {}, []
    for bdf in fsroot.listdir(GPUS_DIR) if fsroot.isdir(GPUS_DIR) else ():
        path = "%s/%s/information" % (GPUS_DIR, bdf)
        try:
            info = parse_gpu_information(fsroot.read_text(path, limit=16384))
        except FsError as exc:
            problems.append("%s: %s" % (path, exc.reason))
            continue
        if info.get("minor") is None:
            problems.append("%s: no 'Device Minor:' line" % path)
        else:
            minors[bdf.lower()] = info["minor"]
    return minors, problems


def _read_smi(fsroot, runner, evidence):
    """``(parse_nvidia_smi() output with ``state`` (parse_gpu_state()) or None, why not)``: ``nvidia-smi -q`` on a
    live host, the snapshot's capture of it otherwise (never run for a snapshot)."""
    text, why, where = captured_output(fsroot, runner, ("nvidia-smi", SMI_ARGS), SMI_SNAPSHOT)
    if text is None:
        return None, why
    evidence.append(where if not fsroot.live else "nvidia-smi -q")
    smi = parse_nvidia_smi(text)
    smi["state"] = parse_gpu_state(text)
    return smi, None


def read_nvidia(ctx):
    """Reader of the facts section "nvidia" (concerns/__init__.py)."""
    return read_state(ctx.fsroot, ctx.runner, smi=True)


def char_node(state, path):
    """The character node ``path`` from a read_state(), or None."""
    for node in state["nodes"] or ():
        if node["path"] == path and node["type"] == "c":
            return node
    return None


def uvm_ready(state):
    """(ready, why not): nvidia-uvm registered and /dev/nvidia-uvm carries that major."""
    major = (state["majors"] or {}).get("nvidia-uvm")
    if major is None:
        return False, "nvidia-uvm is not in /proc/devices (module not loaded)"
    node = char_node(state, UVM_NODE)
    if node is None:
        return False, "%s does not exist" % UVM_NODE
    if node["major"] != major:
        return False, "%s is %d:%d but nvidia-uvm is major %d" % (UVM_NODE, node["major"], node["minor"], major)
    return True, None


# -- parsers (the driver's and nvidia-smi's own text formats) --------------------
# The version is a word of its own (580.95.05, 390.157): not the tail of a longer number.
_NVRM = re.compile(r"NVRM version:.*?(?<![0-9.])([0-9]{2,4}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)(?![0-9.])")


def parse_nvidia_version(text):
    """Driver version and flavour from /proc/driver/nvidia/version."""
    match = _NVRM.search(text or "")
    if not match:
        return None
    return {"version": match.group(1), "open": "Open Kernel Module" in text}


def parse_gpu_information(text):
    """The "Key: value" lines of /proc/driver/nvidia/gpus/<bdf>/information; ``minor`` is the Device Minor as int."""
    info = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    minor = info.get("Device Minor", "")
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses.
    info["minor"] = int(minor) if re.match(r"\A[0-9]{1,5}\Z", minor) else None
    return info


_LIB = re.compile(r"\A(libcuda\.so|libnvidia-ml\.so)\.([0-9]{2,4}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)\Z")
# The CUDA runtime and cuBLAS carry their CUDA release in the name: libcudart.so.12.4.127, libcublas.so.12.4.5.8.
_CUDA_LIB = re.compile(r"\A(libcudart\.so|libcublas\.so)\.([0-9]{1,2}\.[0-9]{1,2}(?:\.[0-9]{1,5}){0,2})\Z")
DRIVER_LIBS = ("libcuda.so", "libnvidia-ml.so")
CUDA_LIBS = ("libcudart.so", "libcublas.so")


def lib_versions(names):
    """{"libcuda.so": ["580.95.05"], "libnvidia-ml.so": [...], "libcudart.so": ["12.4.127"], "libcublas.so": [...]}:
    the driver and CUDA versions in user-space library names."""
    out = {}
    for name in names:
        if not name.startswith(("libcuda.so.", "libnvidia-ml.so.", "libcudart.so.", "libcublas.so.")):
            continue   # ~1500 names in a distribution's libdir
        match = _LIB.match(name) or _CUDA_LIB.match(name)
        if match:
            out.setdefault(match.group(1), set()).add(match.group(2))
    return {lib: sorted(found) for lib, found in out.items()}


def parse_nvidia_smi(text):
    """Per-GPU persistence mode and driver version from nvidia-smi output (from ``-q`` also the index, the product
    name and the FB and BAR1 totals in MiB).

    Understands ``nvidia-smi -q`` ("Persistence Mode : Enabled"), the default
    table ("Persistence-M" column, On/Off) and
    ``--query-gpu=pci.bus_id,persistence_mode,driver_version[,index] --format=csv,noheader``.
    """
    text = text or ""
    gpus = []
    driver = None
    m = re.search(r"Driver Version\s*:?\s*([0-9][0-9.]+)", text)
    if m:
        driver = m.group(1)
    if re.search(r"^\s*Persistence Mode\s*:", text, re.M):
        current = block = None
        for line in text.splitlines():
            gm = re.match(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line.strip())
            if gm:
                # -q lists the GPUs in nvidia-smi's index order.
                current = {"bus_id": gm.group(1).lower(), "persistence": None, "index": len(gpus), "name": None,
                           "fb_total": None, "bar1_total": None}
                gpus.append(current)
                continue
            if current is None:
                continue
            km = re.match(r"^\s*(Product Name|Persistence Mode|Total)\s*:\s*(.+?)\s*$", line)
            bm = re.match(r"^\s*(FB|BAR1) Memory Usage\s*$", line)
            if bm:
                block = bm.group(1)
            elif km and km.group(1) == "Persistence Mode" and current["persistence"] is None:
                current["persistence"] = km.group(2).lower().startswith("enabled")
            elif km and km.group(1) == "Product Name" and current["name"] is None:
                current["name"] = km.group(2)
            elif km and block:
                mib = re.match(r"([0-9]{1,9}) MiB\Z", km.group(2))
                key = "fb_total" if block == "FB" else "bar1_total"
                if mib and current[key] is None:
                    current[key] = int(mib.group(1))
                block = None
        return {"driver": driver, "gpus": gpus, "format": "query"}
    if "Persistence-M" in text:
        lines = text.splitlines()
        for line in lines:
            # data rows look like "|   0  NVIDIA H100 80GB HBM3   On  |   00000000:18:00.0 Off |"
            rm = re.match(r"^\|\s*([0-9]{1,4})\s+(.+?)\s+(On|Off)\s*\|\s*"
                          r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])", line)
            if rm:
                gpus.append({"index": int(rm.group(1)), "name": rm.group(2).strip(),
                             "persistence": rm.group(3) == "On", "bus_id": rm.group(4).lower()})
        return {"driver": driver, "gpus": gpus, "format": "table"}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and re.match(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$", parts[0]):
            gpus.append({"bus_id": parts[0].lower(), "persistence": parts[1].lower() in ("enabled", "on")})
            if len(parts) >= 3 and not driver:
                driver = parts[2]
            if len(parts) >= 4 and re.match(r"\A[0-9]{1,4}\Z", parts[3]):
                gpus[-1]["index"] = int(parts[3])
    return {"driver": driver, "gpus": gpus, "format": "csv" if gpus else "unknown"}


# -- evaluator -------------------------------------------------------------------
def _driver_or_result(cid, facts, policy):
    """(the NVIDIA facts, evidence, None), or (.., .., the result) when there is no host-owned GPU or no driver."""
    err = section_error(facts, "nvidia")
    if err:
        return None, None, make_result(cid, policy, "error", None, err)
    nv = facts.get("nvidia") or {}
    ev = list(nv.get("evidence", []))
    gpus = gpu_functions(facts)
    if not gpus:
        return nv, ev, make_result(cid, policy, "skip", None, "no NVIDIA GPU found", evidence=ev)
    drivers = sorted({g.get("driver") or "none" for g in gpus})
    if drivers == ["vfio-pci"]:
        return nv, ev, make_result(cid, policy, "skip", "vfio-pci", "all NVIDIA GPUs are bound to vfio-pci (VM "
                                   "passthrough)", evidence=ev)
    if cid != "nvidia.driver" and not nv.get("version"):
        return nv, ev, make_result(cid, policy, "skip", None, "the NVIDIA driver is not loaded (see nvidia.driver)",
                                   evidence=ev)
    return nv, ev, None


def check_nvidia_driver(facts, policy):
    cid = "nvidia.driver"
    nv, ev, early = _driver_or_result(cid, facts, policy)
    if early:
        return early
    drivers = sorted({g.get("driver") or "none" for g in gpu_functions(facts)})
    version = nv.get("version")
    if not version and nv.get("driver_loaded"):
        return make_result(cid, policy, "error", None, "%s: no NVRM version line (unreadable as the driver writes it)"
                           % VERSION_FILE, evidence=ev)
    if not version:
        return make_result(cid, policy, "fail", "not loaded (GPU drivers: %s)" % ", ".join(drivers),
                           "/proc/driver/nvidia/version is missing: the NVIDIA driver is not loaded", evidence=ev)
    current = "%s%s" % (version["version"], " (open kernel module)" if version.get("open") else "")
    return make_result(cid, policy, "pass", current, "driver %s loaded" % version["version"], evidence=ev)


def check_persistence(facts, policy):
    cid = "nvidia.persistence"
    if not policy["nvidia_persistence"]:
        return make_result(cid, policy, "skip", None, "policy nvidia_persistence is false")
    nv, ev, early = _driver_or_result(cid, facts, policy)
    if early:
        return early
    smi, daemon = nv.get("smi"), nv.get("persistenced") or {}
    if daemon.get("pid"):
        seen = "pid %s, %s" % (daemon["pid"], "nvidia-persistenced runs" if daemon["running"] else
                               "no such daemon process")
    else:
        seen = "none"
    ev.append("%s: %s" % (PERSISTENCED_PID, seen))
    if not smi or not smi.get("gpus"):
        return make_result(cid, policy, "skip", None, "persistence mode not read (%s)" % (
            nv.get("smi_reason") or "nvidia-smi output has no GPU"), evidence=ev)
    items = [{"name": g.get("bus_id"), "status": "pass" if g.get("persistence") else "fail",
              "current": "persistence %s" % ("on" if g.get("persistence") else "off"), "expected": "persistence on",
              "message": g.get("name") or ""} for g in smi["gpus"]]
    off = [i for i in items if i["status"] == "fail"]
    current = "persistence on %d/%d GPUs, nvidia-persistenced %s" % (
        len(items) - len(off), len(items), "running" if daemon.get("running") else "not running")
    if off:
        return make_result(cid, policy, "fail", current, "persistence mode off on %d GPUs: start "
                           "nvidia-persistenced" % len(off), items, ev)
    if not daemon.get("running"):
        return make_result(cid, policy, "warn", current, "persistence mode is on, but nvidia-persistenced does not "
                           "run: the legacy mode (nvidia-smi -pm 1) NVIDIA deprecates, and it is off again after a "
                           "reboot", items, ev)
    return make_result(cid, policy, "pass", current, "nvidia-persistenced holds persistence mode on every GPU",
                       items, ev)


def check_uvm_hmm(facts, policy):
    cid = "nvidia.uvm_hmm"
    if policy["nvidia_uvm_hmm"] == "any":
        return make_result(cid, policy, "skip", None, "policy nvidia_uvm_hmm is any")
    nv, ev, early = _driver_or_result(cid, facts, policy)
    if early:
        return early
    version, hmm = nv["version"], nv.get("hmm") or {}
    modes = sorted({g.get("addressing") for g in ((nv.get("smi") or {}).get("state") or {}).values()
                    if g.get("addressing")})
    ev.append("%s: %s; modprobe.d: %s; nvidia-smi Addressing Mode: %s" % (
        HMM_PARAM, {True: "Y", False: "N", None: "missing"}[hmm.get("disabled")],
        "uvm_disable_hmm=%d in %s" % (hmm["configured"], hmm["configured_in"]) if hmm.get("configured_in") else
        "no uvm_disable_hmm", ", ".join(modes) or "not read"))
    branch = int(version["version"].split(".")[0])
    rows = hmm_issues(branch)
    for row in rows:
        ev.append("HMM issue of branch %d: %s (%s)" % (branch, row["problem"], row["source"]))
    want_off = policy["nvidia_uvm_hmm"] == "disable" or bool(rows)
    expected = "uvm_disable_hmm=Y" if want_off else "either"
    if hmm.get("error"):
        return make_result(cid, policy, "error", None, hmm["error"], evidence=ev)
    if hmm.get("disabled") is None:
        return make_result(cid, policy, "skip", "nvidia_uvm not loaded", "nvidia_uvm is not loaded (%s missing)" %
                           HMM_PARAM, evidence=ev)
    active = not hmm["disabled"] and version.get("open") and modes != ["None"]
    shown_modes = ", Addressing Mode %s" % "/".join(modes) if modes else ""
    flag = "Y" if hmm["disabled"] else "N"
    current = "HMM %s (uvm_disable_hmm=%s%s)" % ("on" if active else "off", flag, shown_modes)
    if not want_off or not active:
        why = ("HMM is off" if hmm["disabled"] else "HMM is not in use (%s)" % (
            "proprietary kernel modules" if not version.get("open") else "the kernel lacks HMM support"))
        return make_result(cid, policy, "pass", current, why if want_off else "no known HMM issue in branch %d" %
                           branch, evidence=ev)
    if hmm.get("configured"):
        # Configured by hand (without nvidia_uvm_hmm_fix): the operator's reboot, not one fix.yml plans.
        return make_result(cid, policy, "pending", current, "uvm_disable_hmm=1 is set in %s but the loaded "
                           "nvidia_uvm still runs HMM: effective when nvidia_uvm reloads or at the next reboot" %
                           hmm["configured_in"], evidence=ev, reboot_required=True)
    status = "fail" if policy["nvidia_uvm_hmm"] == "disable" else "warn"
    why = "; ".join(row["problem"] for row in rows) or "policy nvidia_uvm_hmm is disable"
    return make_result(cid, policy, status, current, "HMM is on with driver %s (%s); expected %s" % (
        version["version"], why, expected), evidence=ev, reboot_required=True)


SECTIONS = (("nvidia", read_nvidia),)
CHECKS = {"nvidia.driver": check_nvidia_driver, "nvidia.persistence": check_persistence,
          "nvidia.uvm_hmm": check_uvm_hmm}
