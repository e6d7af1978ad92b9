# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The numa concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "kernel.numa_balancing",
        "summary": "0 at runtime and persisted",
        "title": "Automatic NUMA balancing off",
        "severity": "high",
        "expected": "kernel.numa_balancing = {numa_balancing} at runtime and persisted in /etc/sysctl.d",
        "rationale": (
            "NUMA balancing periodically unmaps pages to sample which node touches them (NUMA hinting faults) "
            "and migrates them: latency spikes in the serving process and migrations of memory the GPUs DMA "
            "from. Placement on a dual-socket GPU host is better done explicitly (numactl, CPU affinity)."
        ),
        "remediation": (
            "sysctl -w kernel.numa_balancing={numa_balancing} and persist it in /etc/sysctl.d/90-pvetune.conf "
            "(or numa_balancing=disable on the kernel command line)."
        ),
        "fix_tag": "sysctl",
        "reboot": "no",
    },
    {
        "id": "numa.gpu_locality",
        "summary": (
            "every GPU reports its NUMA node on a multi-node host (`-1` warns, naming the firmware's ACPI SRAT/_PXM); "
            "nodes per socket (NPS) in the evidence"
        ),
        "title": "Every GPU reports its NUMA node",
        "severity": "medium",
        "expected": "on a host with several NUMA nodes, numa_node >= 0 for every GPU",
        "rationale": (
            "The driver allocates a GPU's host buffers and the scheduler places its serving process by the GPU's "
            "NUMA node. A GPU whose numa_node is -1 on a multi-node host gets them wherever the kernel happens to "
            "run: host-to-device copies then cross the socket link, and CTs cannot be pinned to the GPU's CPUs. "
            "The nodes per socket (NPS1/2/4 on EPYC) in the evidence say how fine the placement can be."
        ),
        "remediation": (
            "Update the BIOS; check that its NUMA settings expose the PCIe roots' proximity domains (ACPI SRAT/_PXM; "
            "NUMA enabled, node/memory interleaving off)."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
)
