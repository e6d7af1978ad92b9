# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Known kernel problems of GPU hosts: kernel series x CPU family x GPU generation -> the problem, the versions it
affects, the version that fixed it, and its public source.

A row applies to a host when its ``cpu`` (vendor_id and, optionally, x86 family and model range) and its ``gpu``
(generation key of tables/nvidia_generations.py, None = any) match; it affects a kernel whose version (the numeric
part of ``6.8.12-4-pve``) is below ``fixed_in``, unless a stable release of that series in ``backports`` already
has the fix.  kernel.known_issues evaluates the running and the next boot's kernel against it.  Only rows with a
public source belong here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.formats.kernel_version import in_series, version_compare

_NUMERIC = re.compile(r"\A(\d+(?:\.\d+){0,2})")

AMD = "AuthenticAMD"
INTEL = "GenuineIntel"
LORE = "https://lore.kernel.org/all/%s/"
PM_612 = LORE % "CAJZ5v0gJXBx0jM4n8eO3-_bh1xcCaZVCHRA2K+Y468dFSJf4yg@mail.gmail.com"   # PM pull for 6.12-rc1
PM_613 = LORE % "CAJZ5v0i90sb6CC=obDdmji-WeJnkwSp4Agd3UhGhuo+TVm4uXg@mail.gmail.com"   # PM pull for 6.13-rc1
INTEL_FAMILY = "torvalds/linux arch/x86/include/asm/intel-family.h: INTEL_GRANITERAPIDS_X IFM(6, 0xAD), _D IFM(6, 0xAE)"

# status: what a hit makes the check ("fail": the host runs slower or without the CPU's own drivers, "warn": a
# tuning or telemetry difference); mitigated_by: kernel arguments that work around it (boot.cmdline adds them).
KNOWN_ISSUES = (
    {"id": "zen5-amd-pstate-not-default", "cpu": {"vendor": AMD, "family": (0x1A,)}, "gpu": None,
     "fixed_in": "6.13", "status": "fail", "mitigated_by": ("amd_pstate",),
     "problem": ("EPYC servers of CPU family 1Ah (Zen 5, Turin) boot with acpi-cpufreq, not amd-pstate, unless "
                 "amd_pstate= is on the kernel command line"),
     "source": LORE % "20241021101836.9047-3-gautham.shenoy@amd.com",
     "quote": ("Currently the default cpufreq driver for all the AMD EPYC servers is acpi-cpufreq. Going forward, "
               "switch to amd-pstate as the default driver on the AMD EPYC server platforms with CPU family 0x1A or "
               "higher. The default mode will be active mode.")},
    {"id": "zen5-no-cpu-detection", "cpu": {"vendor": AMD, "family": (0x1A,)}, "gpu": None,
     "fixed_in": "6.8", "status": "fail",
     "problem": "no Zen 5 detection (X86_FEATURE_ZEN5): the kernel skips the Zen 5 specific CPU setup",
     "source": LORE % "20240128100657.GAZbYnQVcyLF9Vm5KR@fat_crate.local",
     "quote": "Add detection for AMD's Zen5 generation CPUs and Intel's Clearwater Forest CPU model number"},
    {"id": "zen5-models-10-1f-undetected", "cpu": {"vendor": AMD, "family": (0x1A,), "models": (0x10, 0x1F)},
     "gpu": None, "since": "6.8", "fixed_in": "6.9", "backports": ("6.8.9",), "status": "fail",
     "problem": ("Zen 5 models 10h-1Fh (Turin dense) are not in the kernel's Zen 5 range: no Zen 5 setup, and a "
                 "warning at boot"),
     "source": LORE % "171396108538.10875.18372163140114322675.tip-bot2@tip-bot2",
     "quote": "x86/CPU/AMD: Add models 0x10-0x1f to the Zen5 range ... Add some more Zen5 models."},
    {"id": "zen5-no-rapl-powercap", "cpu": {"vendor": AMD, "family": (0x1A,)}, "gpu": None,
     "fixed_in": "6.12", "status": "warn",
     "problem": "the intel_rapl powercap driver does not know family 1Ah: no RAPL power telemetry or limits",
     "source": PM_612,
     "quote": "Add support for AMD family 1Ah processors to the intel_rapl power capping driver (Dhananjay Ugwekar)."},
    {"id": "amd-pstate-no-preferred-core", "cpu": {"vendor": AMD, "family": (0x19, 0x1A)}, "gpu": None,
     "fixed_in": "6.9", "status": "warn",
     "problem": "amd-pstate has no preferred-core support: the scheduler gets no per-core ranking from it",
     "source": LORE % "CAJZ5v0h_E0zBPFdv37HkG_zom3g=JWoT9YtjtSKO5Dquh4jb7g@mail.gmail.com",
     "quote": "Enable preferred core support in the amd-pstate cpufreq driver (Meng Li)."},
    {"id": "acpi-cpufreq-amd-boost-ratio", "cpu": {"vendor": AMD, "family": (0x19, 0x1A)}, "gpu": None,
     "fixed_in": "6.12", "status": "warn",
     "problem": "acpi-cpufreq computes the boost ratio wrongly on AMD CPUs with preferred cores",
     "source": PM_612,
     "quote": ("Move the calculation of the AMD boost numerator outside of amd-pstate, correcting acpi-cpufreq on "
               "systems with preferred cores (Mario Limonciello).")},
    {"id": "gnr-intel-idle-not-native", "cpu": {"vendor": INTEL, "family": (6,), "models": (0xAD, 0xAD)},
     "gpu": None, "fixed_in": "6.12", "status": "fail",
     "problem": "intel_idle has no Granite Rapids C-state table (C1, C1E, C6, C6P); the idle states come from ACPI",
     "source": PM_612 + "; " + INTEL_FAMILY,
     "quote": "the intel_idle driver will now handle Granite Rapids Xeon processors natively"},
    {"id": "gnr-epp-balance-performance", "cpu": {"vendor": INTEL, "family": (6,), "models": (0xAD, 0xAD)},
     "gpu": None, "fixed_in": "6.13", "status": "warn",
     "problem": "intel_pstate uses the generic balance_performance EPP on Granite Rapids (6.13 biases it to speed)",
     "source": PM_613 + "; " + INTEL_FAMILY,
     "quote": ("Change the Balance-performance EPP value for Granite Rapids in the intel_pstate driver to a more "
               "performance-biased one (Srinivas Pandruvada).")},
    {"id": "gnr-d-intel-idle-table", "cpu": {"vendor": INTEL, "family": (6,), "models": (0xAE, 0xAE)},
     "gpu": None, "fixed_in": "6.13", "status": "warn",
     "problem": "intel_idle has no built-in idle-state table for Granite Rapids Xeon D",
     "source": PM_613 + "; " + INTEL_FAMILY,
     "quote": ("Add a built-in idle states table for Granite Rapids Xeon D to the intel_idle driver (Artem "
               "Bityutskiy).")},
    {"id": "nvidia-570.153-no-build-6.15", "cpu": None, "gpu": "any", "since": "6.15", "fixed_in": None,
     "driver_below": "570.169", "status": "fail",
     "problem": ("NVIDIA drivers before 570.169 do not build on kernel 6.15 and later: the kernel comes up "
                 "without the NVIDIA module (a package maintainer's report, not NVIDIA's)"),
     "source": "https://github.com/damentz/liquorix-package/issues/198",
     "quote": "For the nvidia driver, 570.153 is incompatible with kernel 6.15.  Version 570.169 is compatible"},
    {"id": "nvidia-550-555-no-build-6.17-pve", "cpu": None, "gpu": "any", "since": "6.17", "fixed_in": None,
     "driver_branches": (550, 555), "status": "fail",
     "problem": ("the NVIDIA 550 and 555 branches do not build on the PVE 9.1 kernel 6.17.13-2-pve (open issue): "
                 "use a current 570 or later branch"),
     "source": "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1143",
     "quote": ("NVIDIA Open GPU Kernel Modules Version 555.58.02 (Issue also present on 550.163.01) ... Kernel "
               "Release 6.17.13-2-pve")},
)


def _numeric(version):
    match = _NUMERIC.match(version or "")
    return match.group(1) if match else None


def _cpu_matches(want, cpu):
    if want is None:
        return True
    if not cpu or cpu.get("vendor") != want["vendor"]:
        return False
    if "family" in want and cpu.get("family") not in want["family"]:
        return False
    lo, hi = want.get("models", (None, None))
    return lo is None or (cpu.get("model_id") is not None and lo <= cpu["model_id"] <= hi)


def _driver_matches(row, driver):
    if "driver_below" not in row and "driver_branches" not in row:
        return True
    numeric = _numeric(driver)
    if numeric is None:
        return False
    if "driver_below" in row and version_compare(numeric, row["driver_below"]) >= 0:
        return False
    return "driver_branches" not in row or int(numeric.split(".")[0]) in row["driver_branches"]


def applicable(cpu, generations, driver=None):
    """The rows whose CPU, GPU and NVIDIA driver conditions match this host (cpu: facts section "cpu";
    generations: GPU generation keys; driver: the loaded NVIDIA driver version)."""
    return [row for row in KNOWN_ISSUES if _cpu_matches(row["cpu"], cpu)
            and (row["gpu"] is None or (generations and row["gpu"] in tuple(generations) + ("any",)))
            and _driver_matches(row, driver)]


def affects(row, version):
    """Whether a kernel version ("6.8.12-4-pve") has the row's problem."""
    numeric = _numeric(version)
    if numeric is None:
        return False
    if row["fixed_in"] and version_compare(numeric, row["fixed_in"]) >= 0:
        return False
    if row.get("since") and version_compare(numeric, row["since"]) < 0:
        return False
    for fixed in row.get("backports") or ():
        series = ".".join(fixed.split(".")[:2])
        if in_series(numeric, series) and version_compare(numeric, fixed) >= 0:
            return False
    return True
