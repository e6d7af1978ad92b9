# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The iommu concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "iommu.mode",
        "summary": (
            "host-owned GPUs in identity IOMMU domains (`iommu=pt`, added by the cmdline fix); vfio-pci GPUs skip"
        ),
        "title": "Host-owned GPUs in an identity (passthrough) IOMMU domain",
        "severity": "medium",
        "expected": "IOMMU off, or each host-owned GPU's IOMMU group of type identity (iommu=pt; policy "
                    "iommu_passthrough: {iommu_passthrough})",
        "rationale": (
            "With the IOMMU translating (domain DMA or DMA-FQ) every DMA of a host-owned GPU is translated: IOTLB "
            "misses on host-device copies and peer traffic, and map/unmap work in the driver. iommu=pt gives host "
            "devices identity mappings and keeps the IOMMU for VFIO passthrough (a GPU bound to vfio-pci gets its "
            "own domain when a VM uses it)."
        ),
        "remediation": "Add iommu=pt to the kernel command line (check boot.cmdline) and reboot.",
        "fix_tag": "cmdline",
        "reboot": "yes",
    },
)
