# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The policy: what a well-configured Proxmox VE GPU host looks like.

``POLICY_KEYS`` is the one table of policy keys: each key's default, the check of its value, what it means and the
rule it must follow (docs/checks.md shows both), the checks that read it, and values it accepts and refuses (the
unit tests try every one).  ``DEFAULT_POLICY`` derives from it; inventory sets ``pvetune_policy`` to override keys.
``merge_policy`` validates every override before anything uses it, because policy values end up on kernel command
lines, in sysctl files and in setpci arguments.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible.module_utils.pvetune.core.catalogue import BY_ID
from ansible.module_utils.pvetune.formats.kernel_cmdline import MAX_CONFIGURED_CMDLINE

# \Z, not $: "$" also matches before a trailing newline, which would let "quiet\n" through. [0-9], not \d: \d
# also matches other scripts' digits ("\uff16.14" in fullwidth), which validate here and fail later in a command.
_KEY_ARG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(=[A-Za-z0-9_.,:/+@-]{1,190})?\Z")
_SERIES = re.compile(r"^([0-9]{1,2}\.[0-9]{1,3})?\Z")
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9.+-]{1,80}\Z")
_WORD = re.compile(r"^[a-z][a-z0-9_-]{0,31}\Z")
_HEX = re.compile(r"^0x[0-9a-f]{2,6}\Z")
MRRS_SIZES = (128, 256, 512, 1024, 2048, 4096)


class PolicyError(ValueError):
    pass


class PolicyKey(object):
    """One policy key.  ``check(value)`` returns None for a valid value, else what is wrong with it."""

    __slots__ = ("name", "default", "check", "meaning", "rule", "checks", "good", "bad")

    def __init__(self, name, default, check, meaning, rule, checks, good, bad):
        self.name, self.default, self.check = name, default, check
        self.meaning, self.rule, self.checks, self.good, self.bad = meaning, rule, tuple(checks), good, bad


# -- value checks (each returns a function value -> None or the error) ------------------------------------------
def _is_int(value):
    # 4096.0 == 4096 and True == 1: only a real int is a valid byte count or sysctl value.
    return isinstance(value, int) and not isinstance(value, bool)


def _word(value):
    return isinstance(value, str) and _WORD.match(value) is not None


def one_of(*choices, **kw):
    error = kw.get("error") or "must be one of %s" % ", ".join(choices)
    return lambda v: None if isinstance(v, str) and v in choices else error


def lower_case_word(value):
    return None if _word(value) else "must be a lower-case word"


def driver_name_or_empty(value):
    ok = isinstance(value, str) and (value == "" or _word(value))
    return None if ok else "must be a driver name like amd-pstate-epp, or empty for the mode's driver"


def list_of_driver_names(value):
    ok = isinstance(value, list) and all(_word(d) for d in value)
    return None if ok else "must be a list of driver names"


def integer(low, high, error):
    return lambda v: None if _is_int(v) and low <= v <= high else error


def integer_in(allowed, error):
    return lambda v: None if _is_int(v) and v in allowed else error


def matching(regex, error, length=None):
    def check(value):
        ok = isinstance(value, str) and regex.match(value) is not None and (length is None or len(value) == length)
        return None if ok else error
    return check


def power_limit(value):
    ok = value == "default" or (_is_int(value) and 50 <= value <= 2000)
    return None if ok else "must be default or watts, an integer from 50 to 2000"


def arc_max(value):
    ok = value == "auto" or (_is_int(value) and 64 <= value <= 1 << 24)
    return None if ok else "must be auto or MiB, an integer from 64 to 16777216"


def boolean(value):
    return None if isinstance(value, bool) else "must be true or false"


def kernel_arguments(value):
    if not isinstance(value, list):
        return "must be a list of kernel arguments"
    for arg in value:
        if not (isinstance(arg, str) and _KEY_ARG.match(arg)):
            return "%r is not a plain kernel argument (key or key=value without spaces or quotes)" % (arg,)
    return None


def check_reasons(value):
    if not (isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
        return "must map check ids to a reason"
    unknown = sorted(set(value) - set(BY_ID))
    if unknown:
        return "unknown check id(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(BY_ID)))
    return None


# -- the table ---------------------------------------------------------------------------------------------------
POLICY_KEYS = (
    # CPU frequency scaling, per vendor (core/cpuprofile.py PSTATE): the P-state driver's mode on AMD (amd_pstate)
    # and on Intel (intel_pstate) hosts.
    PolicyKey(
        "amd_pstate_mode", "active", one_of("active", "passive", "guided", error="must be active, passive or guided"),
        meaning=("amd_pstate mode an AMD host should run; `amd_pstate=<mode>` is the kernel argument "
                 "cpu.scaling_driver looks for and boot.cmdline requires (with `cmdline_cpu_args`)."),
        rule="one of `active`, `passive`, `guided`",
        checks=("cpu.scaling_driver",),
        good=["active", "passive", "guided"],
        bad=["ACTIVE", "disable", "", None, 1, "active\n", "act ive", ["active"]]),
    PolicyKey(
        "intel_pstate_mode", "active", one_of("active", "passive", error="must be active or passive"),
        meaning=("intel_pstate mode an Intel host should run (switched at runtime and at boot through "
                 "`/sys/devices/system/cpu/intel_pstate/status`); `intel_pstate=<mode>` is required on the command "
                 "line only where intel_pstate is not loaded."),
        rule="`active` or `passive`",
        checks=("cpu.scaling_driver",),
        good=["active", "passive"],
        bad=["guided", "off", "ACTIVE", "", None, 1, "active\n", ["active"]]),
    # "" = the driver that mode shows (amd-pstate-epp, intel_pstate).
    PolicyKey(
        "scaling_driver", "", driver_name_or_empty,
        meaning=("cpufreq driver every policy should report (scaling_driver); empty: the driver of the vendor's mode "
                 "(`amd-pstate-epp` or `amd-pstate` on AMD, `intel_pstate` or `intel_cpufreq` on Intel). A value set "
                 "here applies to every vendor, so set it per group."),
        rule=("empty, or a lower-case driver name: a letter, then letters, digits, `_` or `-` (32 characters at "
              "most)"),
        checks=("cpu.scaling_driver",),
        good=["", "amd-pstate-epp", "amd-pstate", "acpi-cpufreq", "intel_pstate", "intel_cpufreq"],
        bad=["amd pstate", "Amd-pstate", None, "x" * 40, "amd-pstate\n", "$(id)", 1]),
    # Accepted when amd_pstate cannot be used (no CPPC in firmware): the check warns instead of failing.
    PolicyKey(
        "scaling_driver_fallback", [], list_of_driver_names,
        meaning=("Drivers accepted instead of `scaling_driver` (e.g. no CPPC in the firmware): cpu.scaling_driver "
                 "reports them as warn, not fail."),
        rule="a list of driver names (same rule as `scaling_driver`)",
        checks=("cpu.scaling_driver",),
        good=[[], ["acpi-cpufreq"], ["acpi-cpufreq", "amd-pstate"]],
        bad=["acpi-cpufreq", ["acpi cpufreq"], [1], ["ACPI"], ["acpi-cpufreq\n"], None, {}]),
    PolicyKey(
        "governor", "performance", lower_case_word,
        meaning="cpufreq governor every policy should use.",
        rule="a lower-case word: a letter, then letters, digits, `_` or `-` (32 characters at most)",
        checks=("cpu.governor",),
        good=["performance", "schedutil", "powersave"],
        bad=["Performance", "perf ormance", "", "performance\n", "performance;reboot", 0, None, "-performance"]),
    PolicyKey(
        "epp", "performance", lower_case_word,
        meaning="energy_performance_preference every policy that has one should use.",
        rule="a lower-case word (same rule as `governor`)",
        checks=("cpu.epp",),
        good=["performance", "balance_performance", "power"],
        bad=["balance power", "", "performance\n", None, 3, "POWER"]),
    # 0 is no limit but the opposite: intel_idle.max_cstate=0 disables intel_idle altogether (and
    # processor.max_cstate=0 is out of acpi_idle's range), so the deepest allowed state is C1 at least.
    PolicyKey(
        "max_cstate", 1, integer(1, 9, error="must be an integer 1-9 (1 = C1; 0 would disable intel_idle altogether)"),
        meaning=("Deepest allowed C-state (1 = C1; POLL is always allowed), set with the argument of the idle driver "
                 "in use: `processor.max_cstate=<n>` for acpi_idle (AMD hosts), `intel_idle.max_cstate=<n>` for "
                 "intel_idle (intel_idle ignores processor.max_cstate); it must be effective and no deeper idle "
                 "state enabled."),
        rule=("an integer 1-9 (not a boolean, not a string; 0 is refused: intel_idle.max_cstate=0 disables "
              "intel_idle altogether)"),
        checks=("cpu.cstates",),
        good=[1, 2, 9],
        bad=[0, -1, 10, "1", 1.0, True, False, None, [1]]),
    PolicyKey(
        "cpu_boost", True, boolean,
        meaning=("Require CPU boost (turbo) on (cpu.boost); fix.yml (tag cpu) turns it on and pvetune-cpufreq.service "
                 "at every boot. `false` does not judge boost and leaves it as it is."),
        rule="`true` or `false`",
        checks=("cpu.boost",),
        good=[True, False],
        bad=[1, "true", None]),
    PolicyKey(
        "numa_balancing", 0, integer(0, 1, error="must be 0 or 1"),
        meaning="Required value of kernel.numa_balancing, at runtime and persisted in sysctl.d.",
        rule="the integer 0 or 1 (not a boolean, not a float, not a string)",
        checks=("kernel.numa_balancing",),
        good=[0, 1],
        bad=[2, -1, "0", 0.0, 1.0, True, False, None]),
    PolicyKey(
        "vm_swappiness", 10, integer(0, 200, error="must be an integer 0-200"),
        meaning="Required vm.swappiness, at runtime and persisted in sysctl.d (mem.sysctl; fix.yml tag sysctl).",
        rule="an integer 0-200 (the kernel's range)",
        checks=("mem.sysctl",),
        good=[0, 10, 60, 200],
        bad=[-1, 201, "10", 10.0, True, None]),
    PolicyKey(
        "vm_zone_reclaim_mode", 0, integer(0, 7, error="must be an integer 0-7"),
        meaning="Required vm.zone_reclaim_mode, at runtime and persisted in sysctl.d (mem.sysctl; fix.yml tag sysctl).",
        rule="an integer 0-7 (the kernel's bits: 1 reclaim, 2 write dirty pages, 4 swap)",
        checks=("mem.sysctl",),
        good=[0, 1, 7],
        bad=[-1, 8, "0", 0.0, False, None]),
    PolicyKey(
        "pcie_mrrs", 4096, integer_in(MRRS_SIZES, error="must be one of %s" % (MRRS_SIZES,)),
        meaning="PCIe Max Read Request Size, in bytes, every NVIDIA function must use.",
        rule="an integer, one of 128, 256, 512, 1024, 2048, 4096",
        checks=("pcie.mrrs",),
        good=list(MRRS_SIZES),
        bad=[4095, 8192, 0, "4096", 4096.0, 512.0, True, None, 64]),
    PolicyKey(
        "pcie_vendor", "0x10de", matching(_HEX, "must look like 0x10de", length=6),
        meaning="PCI vendor id of the GPUs the PCIe and NVIDIA checks look at.",
        rule="`0x` and four lower-case hex digits (like `0x10de`)",
        checks=("pcie.mrrs", "pcie.link", "nvidia.driver"),
        good=["0x10de", "0x1002"],
        bad=["10de", "0x10DE", "0x10de0", "0x10d", "0x10de\n", "0xzzzz", 0x10de, None]),
    PolicyKey(
        "pcie_class_prefix", "0x03", matching(_HEX, "must look like 0x03 or 0x0302"),
        meaning="PCI class prefix of those functions (`0x03`: display controllers).",
        rule="`0x` and 2-6 lower-case hex digits (like `0x03` or `0x0302`)",
        checks=("pcie.mrrs", "pcie.link", "nvidia.driver"),
        good=["0x03", "0x0302", "0x030200"],
        bad=["03", "0x", "0x0", "0x03\n", "0X03", "0x0300000", 3, None, "0x03;"]),
    PolicyKey(
        "gpu_p2p", "auto", one_of("auto", "ignore", error="must be auto or ignore"),
        meaning=("GPU peer-to-peer through PCIe switches: `auto` fails ACS redirect bits on the switch ports between "
                 "two GPUs (ports with a vfio-pci device in their switch skip), `ignore` skips pcie.acs."),
        rule="`auto` or `ignore`",
        checks=("pcie.acs",),
        good=["auto", "ignore"],
        bad=["AUTO", "off", "", None, True, "auto\n", ["auto"]]),
    PolicyKey(
        "pcie_acs_fix", False, boolean,
        meaning=("Let fix.yml (tag pcie) clear the ACS redirect bits pcie.acs fails on, with a masked setpci write, "
                 "re-applied at every boot; off by default because it changes IOMMU isolation."),
        rule="`true` or `false`",
        checks=("pcie.acs",),
        good=[True, False],
        bad=[1, "true", "yes", None]),
    PolicyKey(
        "pcie_aspm", "disable", one_of("disable", "any", error="must be disable or any"),
        meaning=("ASPM on the GPU links: `disable` fails L0s or L1 enabled on either end of a GPU's link (pcie.aspm), "
                 "`any` does not judge it."),
        rule="`disable` or `any`",
        checks=("pcie.aspm",),
        good=["disable", "any"],
        bad=["off", False, "Disable", None, ""]),
    PolicyKey(
        "pcie_aspm_fix", False, boolean,
        meaning=("Let fix.yml (tag cmdline) add `pcie_aspm.policy=performance` to the kernel command line where a GPU "
                 "link has ASPM on (boot.cmdline then requires it); effective after the reboot. Off by default: it "
                 "changes every link's power management."),
        rule="`true` or `false`",
        checks=("pcie.aspm", "boot.cmdline"),
        good=[True, False],
        bad=[1, "true", None]),
    PolicyKey(
        "iommu_passthrough", True, boolean,
        meaning=("Host-owned GPUs must sit in identity IOMMU domains: iommu.mode fails translated ones and "
                 "boot.cmdline then requires `iommu=pt`."),
        rule="`true` or `false`",
        checks=("iommu.mode", "boot.cmdline"),
        good=[True, False],
        bad=[0, "false", None]),
    PolicyKey(
        "kernel_series", "6.14", matching(_SERIES, "must look like 6.14 (or be empty to disable)"),
        meaning="Kernel series the host should run (and boot next); empty disables kernel.version.",
        rule="`<major>.<minor>` (1-2 and 1-3 ASCII digits, like `6.14`) or the empty string",
        checks=("kernel.version",),
        good=["", "6.14", "6.8", "10.123"],
        bad=["6", "6.14.1", "v6.14", "6.14\n", "6.1234", 6.14, None, "6.14 ", "\uff16.14", "6.\u0661\u0664"]),
    PolicyKey(
        "kernel_package", "proxmox-kernel-6.14", matching(_PACKAGE, "must be a Debian package name"),
        meaning="Package that provides the series (named in the remediation).",
        rule=("a Debian package name: lower-case letters, digits, `.`, `+`, `-`; 2-81 characters, starting with a "
              "letter or digit"),
        checks=("kernel.version",),
        good=["proxmox-kernel-6.14", "proxmox-default-kernel", "pve-kernel-6.2", "linux-image-6.1+x"],
        bad=["", "p", "Proxmox-kernel", "proxmox kernel", "proxmox-kernel-6.14\n", "-x", "pkg;reboot", "$(id)", None,
             "a" * 90]),
    PolicyKey(
        "cmdline_required", [], kernel_arguments,
        meaning=("Kernel arguments that must be configured in the active boot loader and present on /proc/cmdline "
                 "(boot.cmdline; the last occurrence of a key wins). With `cmdline_cpu_args` the CPU's own arguments "
                 "come first; setting this key without `cmdline_cpu_args` makes it the whole list."),
        rule=("a list of plain kernel arguments: `key` or `key=value`; key `[A-Za-z0-9_][A-Za-z0-9_.-]` (64 "
              "characters at most), value `[A-Za-z0-9_.,:/+@-]` (1-190 characters). No spaces, quotes, `$`, `;`, `=` "
              "in the value, newlines or other characters a shell or boot loader would interpret; all of them "
              "together at most 1,919 bytes (x86 keeps 2,047 bytes of the command line, the rest is cut at boot; 128 "
              "are left for the boot loader's own)"),
        checks=("boot.cmdline",),
        good=[[], ["amd_pstate=active", "processor.max_cstate=1", "iommu=pt"], ["quiet"], ["pcie_aspm=off"],
              ["video=efifb:off"], ["nvidia-drm.modeset=1"], ["isolcpus=2-15,18-31"], ["console=ttyS0,115200n8"],
              ["x=@a+b/c:d"]],
        bad=["amd_pstate=active", [1], None, {"a": 1}]),
    PolicyKey(
        "cmdline_cpu_args", True, boolean,
        meaning=("Add the CPU's own boot arguments to `cmdline_required`: `amd_pstate=<amd_pstate_mode>` on AMD, "
                 "`intel_pstate=<intel_pstate_mode>` on Intel where intel_pstate is not loaded, and the C-state "
                 "limit of the idle driver in use. Turned off when the inventory sets `cmdline_required` without it, "
                 "so an explicit list keeps exactly what it says."),
        rule="`true` or `false`",
        checks=("boot.cmdline",),
        good=[True, False],
        bad=[1, 0, "yes", None]),
    PolicyKey(
        "cmdline_forbidden", [], kernel_arguments,
        meaning=("Kernel arguments that must not be configured or effective: a key forbids every value, `key=value` "
                 "only that value."),
        rule="a list of plain kernel arguments (same rule as `cmdline_required`)",
        checks=("boot.cmdline",),
        good=[[], ["nomodeset"], ["processor.max_cstate=5"]],
        bad=["quiet", [None], ["quiet; reboot"], [["quiet"]], ["nomodeset\n"], ["$(id)"]]),
    PolicyKey(
        "lxc_check", True, boolean,
        meaning="Check the NVIDIA device allow lines of every CT config (lxc.gpu_devices).",
        rule="`true` or `false` (a boolean, not 0/1 or a string)",
        checks=("lxc.gpu_devices",),
        good=[True, False],
        bad=[1, 0, "yes", "true", None]),
    PolicyKey(
        "lxc_min_cpus_per_gpu", 4, integer(0, 256, error="must be an integer 0-256 (0 disables the CPU count check)"),
        meaning=("CPUs a GPU CT needs per GPU it uses (lxc.resources): one busy host thread per GPU worker, its NCCL "
                 "proxy thread, and a share of the tokenizer, scheduler and API server. 0 disables the count."),
        rule="an integer 0-256",
        checks=("lxc.resources",),
        good=[0, 4, 256],
        bad=[-1, 257, 4.0, "4", True, None]),
    PolicyKey(
        "lxc_min_memory_per_gpu", 16384,
        integer(0, 4194304, error="must be MiB per GPU, an integer 0-4194304 (0 disables the memory check)"),
        meaning=("Memory (MiB) a GPU CT needs per GPU it uses (lxc.resources): pinned host buffers (CUDA, NCCL, the "
                 "engine's CPU swap space, 4 GiB per GPU in vLLM) and the page cache the weights load through. 0 "
                 "disables the check."),
        rule="an integer 0-4194304",
        checks=("lxc.resources",),
        good=[0, 16384, 4194304],
        bad=[-1, 4194305, 16384.0, "16G", False]),
    PolicyKey(
        "lxc_numa_pin", False, boolean,
        meaning=("Let fix.yml (tag lxc) write `lxc.cgroup2.cpuset.cpus` with the CPUs of the NUMA nodes of a GPU "
                 "CT's GPUs where its CPUs miss them; effective at the CT's next start."),
        rule="`true` or `false`",
        checks=("lxc.resources",),
        good=[True, False],
        bad=[1, "true", None]),
    PolicyKey(
        "lxc_min_shm_mib", 1024, integer(0, 1048576, error="must be MiB, an integer 0-1048576 (0 disables the check)"),
        meaning=("/dev/shm (MiB) a running GPU CT needs (lxc.shm_memlock): NCCL's shared memory segments; NVIDIA's "
                 "container guidance uses 1 GiB. A /dev/shm without a size (half of RAM) passes. 0 disables it."),
        rule="an integer 0-1048576",
        checks=("lxc.shm_memlock",),
        good=[0, 1024, 1048576],
        bad=[-1, 1048577, "1g", 1024.0, True, None]),
    PolicyKey(
        "lxc_memlock_unlimited", True, boolean,
        meaning="Require unlimited locked memory (RLIMIT_MEMLOCK) for a running GPU CT's init (lxc.shm_memlock).",
        rule="`true` or `false`",
        checks=("lxc.shm_memlock",),
        good=[True, False],
        bad=[1, "true", None]),
    PolicyKey(
        "zfs_arc_max", "auto", arc_max,
        meaning=("The ARC maximum storage.zfs_arc holds c_max to and the ARC fix sets: `auto` is the PVE 8.1+ "
                 "installer's 10% of RAM, at most 16 GiB; or MiB."),
        rule="`auto` or an integer from 64 to 16777216 (MiB)",
        checks=("storage.zfs_arc",),
        good=["auto", 64, 16384, 1 << 24],
        bad=[63, (1 << 24) + 1, "16G", 16384.0, True, None, "max"]),
    PolicyKey(
        "zfs_arc_fix", False, boolean,
        meaning=("Let fix.yml (tag zfs) write zfs_arc_min and zfs_arc_max to /etc/modprobe.d/zz-pvetune-zfs.conf and "
                 "/sys/module/zfs/parameters (and update the initramfs with root on ZFS); off by default: the ARC "
                 "size is the storage's."),
        rule="`true` or `false`",
        checks=("storage.zfs_arc",),
        good=[True, False],
        bad=[1, "true", None]),
    PolicyKey(
        "storage_read_ahead_kb", 4096, integer(0, 65536, error="must be KiB, an integer 0-65536 (0 disables)"),
        meaning=("Least read_ahead_kb of the disks under a GPU CT's volumes that are not ZFS vdevs (storage.weights; "
                 "TuneD's readahead=>4096). 0 disables it."),
        rule="an integer 0-65536",
        checks=("storage.weights",),
        good=[0, 4096, 65536],
        bad=[-1, 65537, "4096", 4096.0, True, None]),
    PolicyKey(
        "zfs_recordsize", 1024, integer_in(tuple(1 << n for n in range(2, 15)),
                                           error="must be KiB, a power of two from 4 to 16384"),
        meaning="Least recordsize (KiB) of the ZFS datasets GPU CTs read weights from (storage.zfs_dataset).",
        rule="a power of two from 4 to 16384 (KiB; 1024 = 1M)",
        checks=("storage.zfs_dataset",),
        good=[128, 1024, 16384],
        bad=[1000, 0, 32768, "1M", 1024.0, True, None]),
    PolicyKey(
        "nvidia_persistence", True, boolean,
        meaning="Require persistence mode on every GPU, held by nvidia-persistenced (nvidia.persistence).",
        rule="`true` or `false`",
        checks=("nvidia.persistence",),
        good=[True, False],
        bad=[1, "false", None]),
    PolicyKey(
        "nvidia_uvm_hmm", "auto", one_of("auto", "disable", "any"),
        meaning=("nvidia-uvm's HMM: `auto` wants it off where the driver branch is in the HMM issues table, "
                 "`disable` wants it off everywhere, `any` does not judge it (not `off`: YAML reads an unquoted off "
                 "as false)."),
        rule="`auto`, `disable` or `any`",
        checks=("nvidia.uvm_hmm",),
        good=["auto", "disable", "any"],
        bad=["off", False, "on", "Auto", True, None, ""]),
    PolicyKey(
        "nvidia_uvm_hmm_fix", False, boolean,
        meaning=("Let fix.yml (tag nvidia) write /etc/modprobe.d/zz-pvetune-nvidia-uvm.conf (uvm_disable_hmm=1) where "
                 "nvidia_uvm_hmm wants HMM off; effective when nvidia_uvm loads again (a reboot)."),
        rule="`true` or `false`",
        checks=("nvidia.uvm_hmm",),
        good=[True, False],
        bad=[1, "true", None]),
    PolicyKey(
        "gpu_power_limit", "default", power_limit,
        meaning=("The power limit every GPU should run at: `default` (each GPU's own default limit) or watts "
                 "(a deliberate cap, e.g. 450)."),
        rule="`default` or an integer from 50 to 2000 (watts)",
        checks=("gpu.power_limit",),
        good=["default", 450, 50, 2000],
        bad=["450", "450W", 49, 2001, 450.5, True, None, "max"]),
    PolicyKey(
        "gpu_clocks_fix", False, boolean,
        meaning=("Let fix.yml (tag gpu) reset applications clocks left set on a GPU (nvidia-smi -rac); off by default, "
                 "a clock setting may be deliberate."),
        rule="`true` or `false`",
        checks=("gpu.clocks",),
        good=[True, False],
        bad=[1, "true", None]),
    PolicyKey(
        "gpu_power_fix", False, boolean,
        meaning=("Let fix.yml (tag gpu) set each GPU below its gpu_power_limit to it (nvidia-smi -pl), and re-apply "
                 "it at every boot; off by default, a cap may be on purpose."),
        rule="`true` or `false`",
        checks=("gpu.power_limit",),
        good=[True, False],
        bad=[1, "true", None]),
    PolicyKey(
        "skip_checks", {}, check_reasons,
        meaning="Checks not to evaluate at all, with the reason shown in their skip result.",
        rule="a mapping of check id (one of the ids above) to a reason string",
        checks=(),
        good=[{}, {"pcie.mrrs": "VFIO host"}, dict.fromkeys(BY_ID, "")],
        bad=[["pcie.mrrs"], "pcie.mrrs", {"pcie.mrrs": 1}, {"pcie.mrrs": None}, {1: "x"}, {"pcie.mrr": "typo"},
             {"no.such.check": "x"}, None]),
)
BY_KEY = {key.name: key for key in POLICY_KEYS}
DEFAULT_POLICY = {key.name: key.default for key in POLICY_KEYS}


def _expect(cond, key, what):
    if not cond:
        raise PolicyError("pvetune_policy.%s: %s" % (key, what))


def validate_policy(policy):
    """Raise PolicyError unless every key is known and every value is safe."""
    unknown = sorted(str(k) for k in set(policy) - set(DEFAULT_POLICY))
    _expect(not unknown, ", ".join(unknown), "unknown key(s); known keys: %s" % ", ".join(sorted(DEFAULT_POLICY)))
    for key in POLICY_KEYS:
        error = key.check(policy[key.name])
        _expect(error is None, key.name, error)
    length = len(" ".join(policy["cmdline_required"]))
    _expect(length <= MAX_CONFIGURED_CMDLINE, "cmdline_required",
            "the arguments take %d bytes, more than the %d of a kernel command line that boots whole on x86 "
            "(COMMAND_LINE_SIZE 2048, less room for the boot loader's own arguments)"
            % (length, MAX_CONFIGURED_CMDLINE))
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
