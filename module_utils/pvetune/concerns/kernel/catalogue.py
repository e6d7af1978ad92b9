# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "kernel.version",
        "summary": "the policy's kernel series running (pinned but not running = pending)",
        "title": "Kernel series {kernel_series} running",
        "severity": "medium",
        "expected": "a {kernel_series}.x kernel running, and pinned or default for the next boot",
        "rationale": (
            "The reference host needed the 6.14 series: the 6.8 kernel it ran lacked the amd-pstate and platform "
            "support this hardware needs. Pinning keeps an apt upgrade from silently switching series."
        ),
        "remediation": (
            "apt install {kernel_package}; proxmox-boot-tool kernel pin <version>; reboot."
        ),
        "fix_tag": "kernel",
        "reboot": "yes",
    },
    {
        "id": "kernel.known_issues",
        "summary": (
            "the running and the next boot's kernel against a sourced table (CPU family and model, GPU generation, "
            "driver): e.g. kernels before 6.13 boot EPYC Turin with acpi-cpufreq unless `amd_pstate=` is set"
        ),
        "title": "No known kernel problem for this CPU and GPU generation (running and pinned kernel)",
        "severity": "high",
        "expected": "the running and the pinned kernel outside every affected range of the known-issues table",
        "rationale": (
            "Support for new CPUs and GPUs lands in the kernel over several releases: an older series boots, but "
            "misses the CPU's frequency and power management, its sensors, or fixes the GPU driver needs. The "
            "table (docs/checks.md) lists each problem with the versions it affects and its public source."
        ),
        "remediation": "Pin a kernel of the fixed series (check kernel.version) and reboot.",
        "fix_tag": "kernel",
        "reboot": "yes",
    },
)
