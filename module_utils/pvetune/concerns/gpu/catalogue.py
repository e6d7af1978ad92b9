# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "gpu.power_limit",
        "summary": (
            "each GPU's enforced power limit at its default (or the policy's watts); a cap names the watts lost "
            "(restored with policy `gpu_power_fix`, re-applied at boot)"
        ),
        "title": "Every GPU at its default (or the policy's) power limit",
        "severity": "high",
        "expected": "power.limit at the {gpu_power_limit} limit on every GPU",
        "rationale": (
            "A power limit below the default lowers the clocks the GPU may hold under load. Throughput does not "
            "fall in proportion (a published RTX PRO 6000 sweep lost 5% of LLM output at 300 W of 600 W, and 16% at "
            "250 W), but a cap left by a test or another tool is silent: nvidia-smi shows it only in -q or "
            "--query-gpu=power.limit. An enforced limit below the requested one means the board or platform "
            "holds it (power brake)."
        ),
        "remediation": (
            "nvidia-smi -i <GPU> -pl <default watts> (or a lower cap on purpose: set the policy's gpu_power_limit "
            "to it); re-apply at every boot, the limit does not persist."
        ),
        "fix_tag": "gpu",
        "opt_in": "gpu_power_fix",
        "reboot": "no",
    },
    {
        "id": "gpu.clocks",
        "summary": (
            "no applications clocks left set (reset with policy `gpu_clocks_fix`), no sign of locked clocks, no "
            "hardware clock event reason active (HW Slowdown, HW Thermal, Power Brake, SW Thermal: advice)"
        ),
        "title": "GPU clocks at their defaults, no hardware slowdown",
        "severity": "medium",
        "expected": "applications clocks at their defaults, no clock setting and no hardware slowdown holding the "
                    "clocks",
        "rationale": (
            "Applications clocks (nvidia-smi -ac) and locked clocks (-lgc/-lmc) survive until reset or reboot and "
            "hold every workload at them; NVML reports them as the clock event reason 'Applications Clocks "
            "Setting'. HW Slowdown, HW Thermal, HW Power Brake and SW Thermal reasons mean the GPU lowers its own "
            "clocks for heat or power delivery: no setting fixes that (NVML clock event reasons)."
        ),
        "remediation": (
            "nvidia-smi -i <GPU> -rac (applications clocks), -rgc and -rmc (locked clocks). For hardware reasons: "
            "the GPU's cooling, the inlet temperature, the PSU and the platform's power brake."
        ),
        "fix_tag": "gpu",
        "opt_in": "gpu_clocks_fix",
        "reboot": "no",
    },
    {
        "id": "gpu.health",
        "summary": (
            "no Xid errors in this boot's kernel log (graded by NVIDIA's Xid catalogue), no uncorrectable AER "
            "errors on a GPU or its ports, no pending row remap, retired page or uncorrectable ECC error (advice)"
        ),
        "title": "GPUs healthy: no Xid, AER or memory errors",
        "severity": "high",
        "expected": "no Xid errors, no uncorrectable PCIe or memory errors",
        "rationale": (
            "A GPU that fell off the bus (Xid 79), lost memory (Xid 48/95, a failed row remap) or whose firmware "
            "stopped (Xid 119/120) serves nothing or corrupts results until it is reset, reseated or replaced; "
            "uncorrectable AER errors on its link usually come first. NVIDIA's Xid catalogue (docs.nvidia.com/"
            "deploy/xid-errors) grades each code; the kernel's AER counters are in sysfs."
        ),
        "remediation": (
            "Per the Xid code: reset the GPU (nvidia-smi -r with no process on it) or reboot; for Xid 79 and AER "
            "errors check the riser, the slot's seating and power; for a failed remap replace the GPU."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
)
