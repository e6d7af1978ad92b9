# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readers for CPU frequency/idle state, sysctl, NVIDIA driver and IOMMU state.

Pure functions over an FsRoot (and, for nvidia-smi, text).  Each reader
returns plain data plus the evidence it read; a missing or unreadable file is
reported, never raised past the reader.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.core.fsroot import FsError

CPU_DIR = "/sys/devices/system/cpu"


# -- small helpers -------------------------------------------------------
def parse_cpu_list(text):
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]; ValueError on garbage."""
    text = (text or "").strip()
    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            lo, hi = int(lo), int(hi)
            if hi < lo or hi - lo > 65536:
                raise ValueError("bad CPU range %r" % part)
            out.extend(range(lo, hi + 1))
        else:
            out.append(int(part))
    return out


def format_cpu_list(cpus):
    """[0, 1, 2, 5] -> '0-2,5'."""
    ranges = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join("%d-%d" % (lo, hi) if hi != lo else "%d" % lo for lo, hi in ranges)


def _natural_key(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


# -- CPU -----------------------------------------------------------------
def read_cpuinfo_identity(fsroot):
    """Vendor and model name from the first processor block of /proc/cpuinfo."""
    text = fsroot.read_text("/proc/cpuinfo", limit=16384)
    vendor = model = None
    for line in text.splitlines():
        if not line.strip():
            if vendor:
                break
            continue
        key, value = line.partition(":")[::2]
        key = key.strip()
        if key == "vendor_id" and vendor is None:
            vendor = value.strip()
        elif key == "model name" and model is None:
            model = value.strip()
    return {"vendor": vendor, "model": model}


def read_cpufreq(fsroot):
    """cpufreq state: one entry per policy, plus amd_pstate status.

    A policy whose ``affected_cpus`` is empty has no online CPU: the kernel keeps its
    directory but refuses reads of its scaling files (EBUSY).  It is listed in
    ``offline_policies``, not in ``policies``, so it is neither an error nor a mismatch.
    """
    out = {"policies": {}, "offline_policies": [], "errors": [], "evidence": []}
    out["amd_pstate_status"] = fsroot.try_value(CPU_DIR + "/amd_pstate/status")
    if out["amd_pstate_status"] is not None:
        out["evidence"].append(CPU_DIR + "/amd_pstate/status = %s" % out["amd_pstate_status"])
    out["online"] = fsroot.try_value(CPU_DIR + "/online")
    base = CPU_DIR + "/cpufreq"
    names = [n for n in fsroot.listdir(base) if re.match(r"^policy\d+$", n)]
    names.sort(key=_natural_key)
    for name in names:
        pdir = "%s/%s" % (base, name)
        if fsroot.try_value(pdir + "/affected_cpus") == "":
            out["offline_policies"].append(name)
            continue
        pol = {}
        for key, fname in (
            ("driver", "scaling_driver"),
            ("governor", "scaling_governor"),
            ("available_governors", "scaling_available_governors"),
            ("epp", "energy_performance_preference"),
            ("available_epp", "energy_performance_available_preferences"),
            ("affected_cpus", "affected_cpus"),
        ):
            try:
                pol[key] = fsroot.read_value("%s/%s" % (pdir, fname))
            except FsError as exc:
                pol[key] = None
                if key in ("driver", "governor"):
                    out["errors"].append({"path": exc.path, "error": exc.reason})
        for key in ("available_governors", "available_epp"):
            if pol[key] is not None:
                pol[key] = pol[key].split()
        out["policies"][name] = pol
    if names:
        out["evidence"].append("%s/policy*/scaling_driver, scaling_governor, energy_performance_preference "
                               "(%d policies)" % (base, len(names)))
        if out["offline_policies"]:
            out["evidence"].append("%s: %d policies without an online CPU (empty affected_cpus), not checked: %s"
                                   % (base, len(out["offline_policies"]), ", ".join(out["offline_policies"])))
    else:
        out["evidence"].append("%s: no cpufreq policies" % base)
    return out


def read_cpuidle(fsroot):
    """cpuidle state aggregated per state index over every CPU."""
    out = {"errors": [], "evidence": []}
    out["driver"] = fsroot.try_value(CPU_DIR + "/cpuidle/current_driver")
    out["governor"] = fsroot.try_value(CPU_DIR + "/cpuidle/current_governor") or fsroot.try_value(
        CPU_DIR + "/cpuidle/current_governor_ro")
    out["max_cstate_param"] = fsroot.try_value("/sys/module/processor/parameters/max_cstate")
    out["intel_max_cstate_param"] = fsroot.try_value("/sys/module/intel_idle/parameters/max_cstate")
    states = {}
    cpus = [n for n in fsroot.listdir(CPU_DIR) if re.match(r"^cpu\d+$", n)]
    cpus.sort(key=_natural_key)
    cpus_with_states = 0
    for cpu in cpus:
        num = int(cpu[3:])
        idle_dir = "%s/%s/cpuidle" % (CPU_DIR, cpu)
        entries = [n for n in fsroot.listdir(idle_dir) if re.match(r"^state\d+$", n)]
        if entries:
            cpus_with_states += 1
        for entry in entries:
            sdir = "%s/%s" % (idle_dir, entry)
            try:
                name = fsroot.read_value(sdir + "/name")
                latency = int(fsroot.read_value(sdir + "/latency"))
                disable = fsroot.read_value(sdir + "/disable")
                if disable not in ("0", "1"):
                    raise FsError(sdir + "/disable", "unexpected value %r" % disable)
            except FsError as exc:
                out["errors"].append({"path": exc.path, "error": exc.reason})
                continue
            except ValueError:
                out["errors"].append({"path": sdir + "/latency", "error": "not a number"})
                continue
            st = states.setdefault(entry, {"name": name, "latency": latency, "enabled": [], "disabled": [],
                                           "names": set()})
            st["names"].add(name)
            st["latency"] = max(st["latency"], latency)
            (st["disabled"] if disable == "1" else st["enabled"]).append(num)
    out["states"] = {}
    for key in sorted(states, key=_natural_key):
        st = states[key]
        out["states"][key] = {
            "name": "/".join(sorted(st["names"])),
            "latency_us": st["latency"],
            "enabled_cpus": format_cpu_list(st["enabled"]),
            "enabled_count": len(st["enabled"]),
            "disabled_count": len(st["disabled"]),
        }
    out["cpu_count"] = len(cpus)
    out["cpus_with_states"] = cpus_with_states
    out["evidence"].append("%s/cpu*/cpuidle/state*/{name,latency,disable} (%d CPUs with idle states)"
                           % (CPU_DIR, cpus_with_states))
    return out


# Letters right after the number name a deeper variant (C1E, C6S); what follows a separator is a
# driver tag (intel_idle's "C1-SKX", "C1_ACPI" for ACPI _CST states) and does not change the depth.
_CSTATE_NAME = re.compile(r"^C(\d+)([A-Za-z]*)")


def cstate_depth(name):
    """Depth of a cpuidle state by its name: POLL 0, C1 1, C1E 1.5, C2 2, C6 6, C1_ACPI 1.

    Unknown names get depth 99 so they are treated as deep (the safe side).
    """
    name = (name or "").strip()
    if name.upper() == "POLL":
        return 0
    match = _CSTATE_NAME.match(name)
    if not match:
        return 99
    depth = float(match.group(1))
    if match.group(2):
        depth += 0.5  # C1E and friends are deeper than plain C1
    return depth


# -- sysctl ----------------------------------------------------------------
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")


def sysctl_path(key):
    return "/proc/sys/" + key.replace(".", "/")


def render_sysctl_dropin(settings):
    """The /etc/sysctl.d drop-in pvetune owns, for {key: value}."""
    lines = ["# Managed by pvetune (fix.yml); rollback.yml removes this file.",
             "# Do not edit: changes are overwritten on the next fix run."]
    for key in sorted(settings):
        lines.append("%s = %s" % (key, settings[key]))
    return "\n".join(lines) + "\n"


def parse_sysctl_text(text):
    """[(line_no, key, value)] from a sysctl.conf-style file."""
    out = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if "=" not in line:
            continue
        key, value = line.partition("=")[::2]
        key = key.strip().lstrip("-").replace("/", ".")
        out.append((no, key, value.strip()))
    return out


def read_sysctl_persisted(fsroot, keys):
    """Effective persisted value of each key, in systemd-sysctl's order.

    Files are ordered by basename across the sysctl.d directories; for equal
    basenames the earlier directory (/etc before /run before /usr/lib) wins.
    /etc/sysctl.conf is read last (procps semantics; Debian also links it as
    /etc/sysctl.d/99-sysctl.conf).
    """
    chosen = {}
    for directory in SYSCTL_DIRS:
        for name in fsroot.listdir(directory):
            if name.endswith(".conf") and name not in chosen:
                chosen[name] = "%s/%s" % (directory, name)
    files = [chosen[n] for n in sorted(chosen)]
    if "/etc/sysctl.d/99-sysctl.conf" not in files and fsroot.isfile("/etc/sysctl.conf"):
        files.append("/etc/sysctl.conf")
    result = dict.fromkeys(keys)
    errors = []
    for path in files:
        try:
            text = fsroot.read_text(path)
        except FsError as exc:
            errors.append({"path": exc.path, "error": exc.reason})
            continue
        for no, key, value in parse_sysctl_text(text):
            if key in result:
                result[key] = {"value": value, "file": path, "line": no}
    return {"values": result, "files": files, "errors": errors}


# -- NVIDIA ------------------------------------------------------------------
_NVRM = re.compile(r"NVRM version:.*?(\d+\.\d+(?:\.\d+)?)")


def parse_nvidia_version(text):
    """Driver version and flavour from /proc/driver/nvidia/version."""
    match = _NVRM.search(text or "")
    if not match:
        return None
    return {"version": match.group(1), "open": "Open Kernel Module" in text}


def parse_nvidia_smi(text):
    """Per-GPU persistence mode and driver version from nvidia-smi output.

    Understands ``nvidia-smi -q`` ("Persistence Mode : Enabled"), the default
    table ("Persistence-M" column, On/Off) and
    ``--query-gpu=pci.bus_id,persistence_mode,driver_version --format=csv,noheader``.
    """
    text = text or ""
    gpus = []
    driver = None
    m = re.search(r"Driver Version\s*:?\s*([0-9][0-9.]+)", text)
    if m:
        driver = m.group(1)
    if re.search(r"^\s*Persistence Mode\s*:", text, re.M):
        current = None
        for line in text.splitlines():
            gm = re.match(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line.strip())
            if gm:
                current = {"bus_id": gm.group(1).lower(), "persistence": None}
                gpus.append(current)
                continue
            pm = re.match(r"^\s*Persistence Mode\s*:\s*(\w+)", line)
            if pm and current is not None and current["persistence"] is None:
                current["persistence"] = pm.group(1).lower() == "enabled"
        return {"driver": driver, "gpus": gpus, "format": "query"}
    if "Persistence-M" in text:
        lines = text.splitlines()
        for line in lines:
            # data rows look like "|   0  NVIDIA H100 80GB HBM3   On  |   00000000:18:00.0 Off |"
            rm = re.match(r"^\|\s*(\d+)\s+(.+?)\s+(On|Off)\s*\|\s*"
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
    return {"driver": driver, "gpus": gpus, "format": "csv" if gpus else "unknown"}


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
