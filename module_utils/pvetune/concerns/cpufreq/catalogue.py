# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cpufreq concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "cpu.scaling_driver",
        "summary": (
            "the vendor's P-state driver in active mode: amd-pstate-epp on AMD, intel_pstate (HWP) on Intel; not "
            "acpi-cpufreq"
        ),
        "title": "CPU frequency driver: {pstate_driver} in {pstate_mode} mode",
        "severity": "high",
        "expected": "{scaling_driver} on every policy",
        "rationale": (
            "acpi-cpufreq only knows the few ACPI P-states of a server CPU and reacts in milliseconds; amd-pstate "
            "(CPPC) and intel_pstate (HWP) let the hardware pick each core's frequency within microseconds, and in "
            "active mode the EPP hint keeps the cores that feed the GPUs (kernel launches, NCCL, tokenisation) at "
            "full boost. acpi-cpufreq was one of the causes of the reference host serving 10 tok/s instead of 309."
        ),
        "remediation": "{pstate_remediation}",
        "fix_tag": "cpu",
        "fix_tags": ("cpu", "cmdline"),
        "reboot": "when the P-state driver is not loaded",
    },
    {
        "id": "cpu.governor",
        "summary": "`performance` on every cpufreq policy",
        "title": "CPU frequency governor: performance on every policy",
        "severity": "high",
        "expected": "{governor} on every policy",
        "rationale": (
            "powersave/schedutil/ondemand lower clocks between bursts; GPU-bound serving is a stream of short "
            "CPU bursts, each of which then starts at a low clock."
        ),
        "remediation": (
            "Set scaling_governor to performance on every policy (cpupower frequency-set -g performance) and "
            "make it persistent; pvetune installs pvetune-cpufreq.service."
        ),
        "fix_tag": "cpu",
        "reboot": "no",
    },
    {
        "id": "cpu.epp",
        "summary": "EPP `performance` where the driver offers EPP",
        "title": "Energy-performance preference: performance (where the driver offers EPP)",
        "severity": "medium",
        "expected": "{epp} on every policy that has energy_performance_preference",
        "rationale": (
            "In amd-pstate active mode the EPP hint decides how eagerly a core boosts; balance_power and power "
            "trade latency for watts. With the performance governor the driver forces EPP to performance."
        ),
        "remediation": (
            "Write performance to energy_performance_preference on every policy (after the governor); "
            "pvetune-cpufreq.service re-applies it at boot."
        ),
        "fix_tag": "cpu",
        "reboot": "no",
    },
    {
        "id": "cpu.boost",
        "summary": (
            "CPU boost on (policy `cpu_boost`): every online policy's `boost`, else the global `cpufreq/boost`, "
            "intel_pstate's `no_turbo` 0; amd_pstate `prefcore` and SMT as information"
        ),
        "title": "CPU boost (turbo) on",
        "severity": "high",
        "expected": "boost 1 (no_turbo 0 on intel_pstate)",
        "rationale": (
            "Without boost the cores run at their base clock: an EPYC 9335 at 3.0 GHz instead of up to 4.4 GHz, "
            "and every host-side step of the serving loop (scheduling, sampling, tokenizing, kernel launches) takes "
            "longer. TuneD's throughput-performance, accelerator-performance and latency-performance profiles set "
            "boost=1 (redhat-performance/tuned, plugin_cpu.py writes policyN/boost); the kernel's cpufreq.rst "
            "describes the global boost file, intel_pstate's no_turbo replaces it."
        ),
        "remediation": (
            "Write 1 to /sys/devices/system/cpu/cpufreq/policy*/boost (or the global cpufreq/boost; 0 to "
            "intel_pstate/no_turbo) and enable Core Performance Boost / Turbo in the firmware setup; pvetune-cpufreq."
            "service re-applies it at boot."
        ),
        "fix_tag": "cpu",
        "reboot": "no",
    },
)
