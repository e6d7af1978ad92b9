# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The policy: what a well-configured Proxmox VE GPU host looks like.

``DEFAULT_POLICY`` holds the documented defaults; inventory sets
``pvetune_policy`` to override keys.  ``merge_policy`` validates every
override before anything uses it, because policy values end up on kernel
command lines, in sysctl files and in setpci arguments.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible.module_utils.pvetune.core.catalogue import BY_ID
from ansible.module_utils.pvetune.formats.kernel_cmdline import MAX_CONFIGURED_CMDLINE

DEFAULT_POLICY = {
    # CPU frequency scaling, per vendor (core/cpuprofile.py PSTATE): the P-state driver's mode on AMD
    # (amd_pstate) and on Intel (intel_pstate) hosts; "" for scaling_driver = the driver that mode shows
    # (amd-pstate-epp, intel_pstate).
    "amd_pstate_mode": "active",
    "intel_pstate_mode": "active",
    "scaling_driver": "",
    # Drivers that count as acceptable when amd_pstate cannot be used (e.g. no CPPC in firmware):
    # the check reports them as "warn" with the reason instead of "fail".
    "scaling_driver_fallback": [],
    "governor": "performance",
    "epp": "performance",
    # C-states: the deepest allowed state (1 = C1; POLL is always allowed), set with the boot argument of the
    # idle driver in use (processor.max_cstate for acpi_idle, intel_idle.max_cstate for intel_idle).
    "max_cstate": 1,
    # Runtime sysctls.
    "numa_balancing": 0,
    # PCIe Max Read Request Size for NVIDIA functions, in bytes.
    "pcie_mrrs": 4096,
    "pcie_vendor": "0x10de",
    "pcie_class_prefix": "0x03",
    # GPU peer-to-peer through PCIe switches: "auto" fails ACS redirect bits on switch ports between two GPUs
    # (ports above a vfio-pci device excepted), "ignore" skips the check. pcie_acs_fix lets the fix clear them.
    "gpu_p2p": "auto",
    "pcie_acs_fix": False,
    # Host-owned GPUs should sit in identity IOMMU domains (iommu=pt): the fix adds iommu=pt where they do not.
    "iommu_passthrough": True,
    # Kernel series the host should run (e.g. "6.14"); "" disables the check.
    "kernel_series": "6.14",
    "kernel_package": "proxmox-kernel-6.14",
    # Kernel command line: args that must be configured and effective, and keys that must be absent.
    # cmdline_cpu_args adds the CPU's own (amd_pstate=<mode> on AMD, the idle driver's C-state limit); an
    # inventory that sets cmdline_required without it gets exactly its list (merge_policy).
    "cmdline_required": [],
    "cmdline_cpu_args": True,
    "cmdline_forbidden": [],
    # LXC GPU containers: check allow lines / mount entries of every CT that passes NVIDIA devices.
    "lxc_check": True,
    # GPU CTs (lxc.resources): CPUs and memory (MiB) per GPU the CT uses; lxc_numa_pin lets the fix write
    # lxc.cgroup2.cpuset.cpus with the CPUs of the CT's GPUs' NUMA nodes.
    "lxc_min_cpus_per_gpu": 4,
    "lxc_min_memory_per_gpu": 16384,
    "lxc_numa_pin": False,
    # NVIDIA driver: require persistence mode when nvidia-smi is available.
    "nvidia_persistence": True,
    # Checks to skip entirely (by id), with the reason shown in the report.
    "skip_checks": {},
}

# \Z, not $: "$" also matches before a trailing newline, which would let "quiet\n" through. [0-9], not \d: \d
# also matches other scripts' digits ("６.14" in fullwidth), which validate here and fail later in a command.
_KEY_ARG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(=[A-Za-z0-9_.,:/+@-]{1,190})?\Z")
_SERIES = re.compile(r"^([0-9]{1,2}\.[0-9]{1,3})?\Z")
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9.+-]{1,80}\Z")
_WORD = re.compile(r"^[a-z][a-z0-9_-]{0,31}\Z")
_HEX = re.compile(r"^0x[0-9a-f]{2,6}\Z")
MRRS_SIZES = (128, 256, 512, 1024, 2048, 4096)


class PolicyError(ValueError):
    pass


def _is_int(value):
    # 4096.0 == 4096 and True == 1: only a real int is a valid byte count or sysctl value.
    return isinstance(value, int) and not isinstance(value, bool)


def _expect(cond, key, what):
    if not cond:
        raise PolicyError("pvetune_policy.%s: %s" % (key, what))


def validate_policy(policy):
    """Raise PolicyError unless every key is known and every value is safe."""
    unknown = sorted(str(k) for k in set(policy) - set(DEFAULT_POLICY))
    _expect(not unknown, ", ".join(unknown), "unknown key(s); known keys: %s" % ", ".join(sorted(DEFAULT_POLICY)))
    for key in ("amd_pstate_mode", "intel_pstate_mode", "governor", "epp"):
        _expect(isinstance(policy[key], str) and _WORD.match(policy[key]), key, "must be a lower-case word")
    _expect(policy["amd_pstate_mode"] in ("active", "passive", "guided"), "amd_pstate_mode",
            "must be active, passive or guided")
    _expect(policy["intel_pstate_mode"] in ("active", "passive"), "intel_pstate_mode", "must be active or passive")
    _expect(isinstance(policy["scaling_driver"], str)
            and (policy["scaling_driver"] == "" or _WORD.match(policy["scaling_driver"])),
            "scaling_driver", "must be a driver name like amd-pstate-epp, or empty for the mode's driver")
    _expect(isinstance(policy["scaling_driver_fallback"], list)
            and all(isinstance(d, str) and _WORD.match(d) for d in policy["scaling_driver_fallback"]),
            "scaling_driver_fallback", "must be a list of driver names")
    # 0 is no limit but the opposite: intel_idle.max_cstate=0 disables intel_idle altogether (and
    # processor.max_cstate=0 is out of acpi_idle's range), so the deepest allowed state is C1 at least.
    _expect(_is_int(policy["max_cstate"]) and 1 <= policy["max_cstate"] <= 9, "max_cstate",
            "must be an integer 1-9 (1 = C1; 0 would disable intel_idle altogether)")
    _expect(_is_int(policy["numa_balancing"]) and policy["numa_balancing"] in (0, 1),
            "numa_balancing", "must be 0 or 1")
    _expect(_is_int(policy["pcie_mrrs"]) and policy["pcie_mrrs"] in MRRS_SIZES, "pcie_mrrs",
            "must be one of %s" % (MRRS_SIZES,))
    _expect(isinstance(policy["pcie_vendor"], str) and _HEX.match(policy["pcie_vendor"]) is not None
            and len(policy["pcie_vendor"]) == 6, "pcie_vendor", "must look like 0x10de")
    _expect(isinstance(policy["pcie_class_prefix"], str) and _HEX.match(policy["pcie_class_prefix"]),
            "pcie_class_prefix", "must look like 0x03 or 0x0302")
    _expect(isinstance(policy["kernel_series"], str) and _SERIES.match(policy["kernel_series"]),
            "kernel_series", "must look like 6.14 (or be empty to disable)")
    _expect(isinstance(policy["kernel_package"], str) and _PACKAGE.match(policy["kernel_package"]),
            "kernel_package", "must be a Debian package name")
    for key in ("cmdline_required", "cmdline_forbidden"):
        value = policy[key]
        _expect(isinstance(value, list), key, "must be a list of kernel arguments")
        for arg in value:
            _expect(isinstance(arg, str) and _KEY_ARG.match(arg), key,
                    "%r is not a plain kernel argument (key or key=value without spaces or quotes)" % (arg,))
    length = len(" ".join(policy["cmdline_required"]))
    _expect(length <= MAX_CONFIGURED_CMDLINE, "cmdline_required",
            "the arguments take %d bytes, more than the %d of a kernel command line that boots whole on x86 "
            "(COMMAND_LINE_SIZE 2048, less room for the boot loader's own arguments)"
            % (length, MAX_CONFIGURED_CMDLINE))
    _expect(policy["gpu_p2p"] in ("auto", "ignore"), "gpu_p2p", "must be auto or ignore")
    _expect(_is_int(policy["lxc_min_cpus_per_gpu"]) and 0 <= policy["lxc_min_cpus_per_gpu"] <= 256,
            "lxc_min_cpus_per_gpu", "must be an integer 0-256 (0 disables the CPU count check)")
    _expect(_is_int(policy["lxc_min_memory_per_gpu"]) and 0 <= policy["lxc_min_memory_per_gpu"] <= 4194304,
            "lxc_min_memory_per_gpu", "must be MiB per GPU, an integer 0-4194304 (0 disables the memory check)")
    for key in ("lxc_check", "nvidia_persistence", "cmdline_cpu_args", "pcie_acs_fix", "iommu_passthrough",
                "lxc_numa_pin"):
        _expect(isinstance(policy[key], bool), key, "must be true or false")
    skips = policy["skip_checks"]
    _expect(isinstance(skips, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in skips.items()),
            "skip_checks", "must map check ids to a reason")
    unknown_ids = sorted(set(skips) - set(BY_ID))
    _expect(not unknown_ids, "skip_checks", "unknown check id(s) %s; known: %s"
            % (", ".join(unknown_ids), ", ".join(sorted(BY_ID))))
    return policy


def merge_policy(overrides):
    """DEFAULT_POLICY updated with ``overrides`` (a dict or None), validated."""
    policy = copy.deepcopy(DEFAULT_POLICY)
    if overrides:
        if not isinstance(overrides, dict):
            raise PolicyError("pvetune_policy must be a mapping")
        policy.update(copy.deepcopy(overrides))
        if "cmdline_required" in overrides and "cmdline_cpu_args" not in overrides:
            # An explicit list is the whole list: nothing is added to what the inventory says.
            policy["cmdline_cpu_args"] = False
    return validate_policy(policy)
