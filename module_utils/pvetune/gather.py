# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Gather every input of every check in one pass over a root.

``gather(fsroot, runner, policy)`` returns a dict with one section per area.
A section that cannot be read becomes ``{"error": "<path>: <problem>"}``; the
other sections are still gathered.  Nothing here writes anything.

Sections: host, cpu, cpuidle, cmdline, sysctl, pci, boot, kernel, nvidia,
lxc, iommu, errors.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import traceback

from ansible.module_utils.pvetune import bootcfg, hostinfo, lxcgpu, pci
from ansible.module_utils.pvetune.core.fsroot import FsError

SNAPSHOT_DIR = "/.pvetune"
STATE_FILE = "/var/lib/pvetune/nvidia-majors.json"
SYSCTL_KEYS = ("kernel.numa_balancing",)
PROC_DEVICES_HEADER = re.compile(r"^Character devices:", re.M)
# Fields of pci.parse_config() the checks use (the rest of the decoded config stays out of the facts).
PCI_FIELDS = ("cap_exp", "devctl", "mps", "mrrs", "devcap_mps", "lnkcap_speed", "lnkcap_width", "lnksta_speed",
              "lnksta_width", "pcie_type_name")


def _section(facts, name, func, *args):
    try:
        facts[name] = func(*args)
    except FsError as exc:
        facts[name] = {"error": "%s: %s" % (exc.path, exc.reason)}
        facts["errors"].append({"section": name, "path": exc.path, "error": exc.reason})
    except Exception as exc:  # keep the other sections; say where it broke
        msg = "%s: %s" % (type(exc).__name__, exc)
        facts[name] = {"error": msg}
        facts["errors"].append({"section": name, "path": None, "error": msg,
                                "trace": traceback.format_exc(limit=3)})


def gather_host(fsroot):
    out = {"hostname": fsroot.try_value("/proc/sys/kernel/hostname"), "snapshot": None, "live": fsroot.live}
    if not fsroot.live and fsroot.isfile(SNAPSHOT_DIR + "/snapshot.json"):
        try:
            out["snapshot"] = json.loads(fsroot.read_text(SNAPSHOT_DIR + "/snapshot.json"))
        except ValueError as exc:
            out["snapshot"] = {"error": "%s/snapshot.json: %s" % (SNAPSHOT_DIR, exc)}
    return out


def gather_cpu(fsroot):
    out = hostinfo.read_cpuinfo_identity(fsroot)
    out.update(hostinfo.read_cpufreq(fsroot))
    out["evidence"].insert(0, "/proc/cpuinfo: %s (%s)" % (out.get("model"), out.get("vendor")))
    return out


def gather_cmdline(fsroot):
    raw = fsroot.read_text("/proc/cmdline", limit=65536)
    return {"raw": raw.strip(), "args": bootcfg.split_cmdline(raw)}


def gather_sysctl(fsroot):
    persisted = hostinfo.read_sysctl_persisted(fsroot, SYSCTL_KEYS)
    out = {}
    for key in SYSCTL_KEYS:
        out[key] = {"runtime": fsroot.try_value(hostinfo.sysctl_path(key)),
                    "persisted": persisted["values"][key], "files": persisted["files"]}
    out["errors"] = persisted["errors"]
    return out


def gather_pci(fsroot, policy):
    fns = pci.list_functions(fsroot, vendor=policy["pcie_vendor"], class_prefix=policy["pcie_class_prefix"])
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


def gather_boot(fsroot):
    det = bootcfg.detect_loader(fsroot)
    out = dict(det)
    out["evidence"] = list(det.get("evidence") or [])
    out["evidence"].append("boot loader: %s (rule: %s)" % (det["loader"], det.get("rule")))
    if det["loader"] == "systemd-boot":
        path = "/etc/kernel/cmdline"
        out["config_path"] = path
        if not fsroot.isfile(path):
            out["configured_args"] = None
            out["evidence"].append("%s missing: proxmox-boot-tool falls back to /proc/cmdline" % path)
            return out
        args, info = bootcfg.parse_kernel_cmdline_file(fsroot.read_text(path))
        out["configured_args"] = args
        out["evidence"].append("%s (first line): %s" % (path, " ".join(args)))
        return out
    files = []
    dropins = ["/etc/default/grub.d/" + n for n in fsroot.listdir("/etc/default/grub.d") if n.endswith(".cfg")]
    for path in ["/etc/default/grub"] + dropins:
        if fsroot.isfile(path):
            files.append((path, fsroot.read_text(path)))
    out["config_path"] = "/etc/default/grub" + (" + grub.d" if len(files) > 1 else "")
    if not files:
        out["configured_args"] = None
        out["evidence"].append("/etc/default/grub missing")
        return out
    try:
        eff = bootcfg.grub_effective(files)
    except bootcfg.GrubParseError as exc:
        return {"error": str(exc), "loader": det["loader"], "evidence": out["evidence"]}
    linux = eff.get("GRUB_CMDLINE_LINUX") or ""
    default = eff.get("GRUB_CMDLINE_LINUX_DEFAULT") or ""
    out["configured_args"] = bootcfg.split_cmdline(linux) + bootcfg.split_cmdline(default)
    out["grub"] = eff
    out["evidence"].append("GRUB files: %s" % ", ".join(entry[0] for entry in files))
    out["evidence"].append('GRUB_CMDLINE_LINUX="%s" GRUB_CMDLINE_LINUX_DEFAULT="%s"' % (linux, default))
    return out


def gather_kernel(fsroot):
    return bootcfg.kernel_state(fsroot)


def gather_nvidia(fsroot, runner):
    out = {"evidence": []}
    if fsroot.isfile("/proc/driver/nvidia/version"):
        out["version"] = hostinfo.parse_nvidia_version(fsroot.read_text("/proc/driver/nvidia/version"))
        out["evidence"].append("/proc/driver/nvidia/version: %s" % (out["version"] or {}).get("version"))
    else:
        out["version"] = None
        out["evidence"].append("/proc/driver/nvidia/version: missing")
    text = fsroot.read_text("/proc/devices")
    if not PROC_DEVICES_HEADER.search(text):
        # An empty or foreign file (a /proc copy that trusted st_size = 0, a truncated collect) would
        # otherwise read as "no majors registered" and hide stale CT allow lines.
        out["majors"] = out["char_majors"] = None
        out["devices_error"] = "no 'Character devices:' section (%d bytes): not a /proc/devices listing" % len(text)
        out["evidence"].append("/proc/devices: %s" % out["devices_error"])
    else:
        devices = lxcgpu.parse_proc_devices(text)
        out["majors"] = lxcgpu.nvidia_majors(devices)
        out["char_majors"] = sorted(devices["char"])
        out["evidence"].append("/proc/devices: %s" % (", ".join("%s=%s" % kv for kv in sorted(out["majors"].items()))
                                                      or "no nvidia majors"))
    nodes, source = lxcgpu.stat_dev_nodes(fsroot)
    out["nodes"] = nodes
    out["nodes_source"] = source
    out["evidence"].append("/dev/nvidia* (%s): %d nodes" % (source, len(nodes)))
    out["smi"] = None
    out["smi_reason"] = None
    if fsroot.live:
        exe = runner.which("nvidia-smi") if runner else None
        if exe:
            rc, stdout, stderr = runner.run("nvidia-smi", ["--query-gpu=pci.bus_id,persistence_mode,driver_version",
                                                           "--format=csv,noheader"])
            if rc == 0:
                out["smi"] = hostinfo.parse_nvidia_smi(stdout)
                out["evidence"].append("nvidia-smi --query-gpu=pci.bus_id,persistence_mode,driver_version")
            else:
                out["smi_reason"] = "nvidia-smi exited %d: %s" % (rc, (stderr or stdout).strip()[:200])
        else:
            out["smi_reason"] = "nvidia-smi not installed"
    else:
        path = SNAPSHOT_DIR + "/nvidia-smi-q.txt"
        if fsroot.isfile(path):
            out["smi"] = hostinfo.parse_nvidia_smi(fsroot.read_text(path))
            out["evidence"].append(path)
        else:
            out["smi_reason"] = "snapshot has no %s" % path
    return out


def cgroup_version_of(fsroot):
    """2 on a unified (cgroup v2) host, 1 on a legacy/hybrid one, None when the root does not say."""
    if fsroot.isfile("/sys/fs/cgroup/cgroup.controllers"):
        return 2
    if fsroot.isdir("/sys/fs/cgroup/devices"):
        return 1
    return None


def gather_lxc(fsroot, nvidia):
    base = "/etc/pve/lxc"
    out = {"present": fsroot.isdir(base), "cts": [], "evidence": []}
    if not out["present"]:
        return out
    known = []
    if fsroot.isfile(STATE_FILE):
        try:
            known = [int(m) for m in json.loads(fsroot.read_text(STATE_FILE)).get("nvidia_majors", [])]
        except (ValueError, AttributeError, TypeError):
            out["evidence"].append("%s: unreadable, ignored" % STATE_FILE)
    if isinstance(nvidia, dict) and nvidia.get("majors") is not None:
        majors, nodes, registered = nvidia["majors"], nvidia["nodes"], set(nvidia["char_majors"])
    else:
        raise FsError("/proc/devices", "NVIDIA device state unavailable: %s"
                      % ((nvidia or {}).get("devices_error") or (nvidia or {}).get("error")))
    out["host_majors"] = majors
    cgroup_version = cgroup_version_of(fsroot)
    out["cgroup_version"] = cgroup_version
    names = [n for n in fsroot.listdir(base) if n.endswith(".conf") and n[:-5].isdigit()]
    names.sort(key=lambda n: int(n[:-5]))
    for name in names:
        path = "%s/%s" % (base, name)
        try:
            data = fsroot.read_bytes(path)
        except FsError as exc:
            out["cts"].append({"ctid": name[:-5], "path": path, "uses_nvidia": True, "status": "error",
                               "messages": ["%s: %s" % (exc.path, exc.reason)]})
            continue
        ct = lxcgpu.parse_ct_config(data, path)
        res = lxcgpu.evaluate_ct(ct, majors, nodes, known_nvidia_majors=known, char_majors_registered=registered,
                                 cgroup_version=cgroup_version)
        res["path"] = path
        out["cts"].append(res)
    out["evidence"].append("%s/*.conf: %d CT configs" % (base, len(names)))
    return out


def gather(fsroot, runner=None, policy=None):
    """All facts for all checks, in one pass."""
    from ansible.module_utils.pvetune.core.policy import merge_policy

    policy = policy or merge_policy(None)
    facts = {"schema": 1, "root": fsroot.root, "errors": []}
    _section(facts, "host", gather_host, fsroot)
    _section(facts, "cpu", gather_cpu, fsroot)
    _section(facts, "cpuidle", hostinfo.read_cpuidle, fsroot)
    _section(facts, "cmdline", gather_cmdline, fsroot)
    _section(facts, "sysctl", gather_sysctl, fsroot)
    _section(facts, "pci", gather_pci, fsroot, policy)
    _section(facts, "boot", gather_boot, fsroot)
    _section(facts, "kernel", gather_kernel, fsroot)
    _section(facts, "nvidia", gather_nvidia, fsroot, runner)
    if policy.get("lxc_check", True):
        _section(facts, "lxc", gather_lxc, fsroot, facts.get("nvidia"))
    _section(facts, "iommu", hostinfo.read_iommu, fsroot)
    return facts
