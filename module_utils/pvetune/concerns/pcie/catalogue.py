# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pcie concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "pcie.mrrs",
        "summary": "MaxReadReq 4096 on every NVIDIA function, read from the binary config space",
        "title": "PCIe Max Read Request Size {pcie_mrrs} on every NVIDIA GPU",
        "severity": "high",
        "expected": ("MaxReadReq {pcie_mrrs} bytes on every NVIDIA function (vendor {pcie_vendor}, "
                     "class {pcie_class_prefix}xx)"),
        "rationale": (
            "MaxReadReq caps each DMA read the GPU issues to host memory; at 512 bytes a host-to-device copy "
            "needs eight times as many requests and completions as at 4096, which costs bandwidth on large "
            "transfers (model loading, KV-cache offload, tensor-parallel traffic through host memory)."
        ),
        "remediation": (
            "Masked write of Device Control bits 14:12: setpci -s <BDF> CAP_EXP+8.w=5000:7000 (never unmasked: "
            "bit 15 resets the function). Not persistent: pvetune installs pvetune-pcie-mrrs.service, ordered "
            "before pve-guests.service."
        ),
        "fix_tag": "pcie",
        "reboot": "no",
    },
    {
        "id": "pcie.link",
        "summary": "link speed/width vs capability (idle downclock is a warning, not a failure)",
        "title": "PCIe link of every NVIDIA GPU at its capability",
        "severity": "medium",
        "expected": "LnkSta speed and width equal to LnkCap (speed may drop at idle)",
        "rationale": (
            "A link trained at fewer lanes cuts host-device bandwidth for good. A lower speed at full width is "
            "usually idle power management (the GPU retrains to full speed under load), so it is reported as a "
            "warning: check it again under load (nvidia-smi -q -d PCIE)."
        ),
        "remediation": (
            "Width below capability: reseat the GPU or riser, check the slot's bifurcation and BIOS link settings. "
            "Speed below capability at idle: re-check under load before acting."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "pcie.topology",
        "summary": (
            "the path between every pair of GPUs (PIX/PXB/PHB/NODE/SYS, as `nvidia-smi topo -m`), from the sysfs "
            "device tree, so it works on a snapshot; a matrix in the HTML report"
        ),
        "title": "PCIe path between every pair of GPUs (informational)",
        "severity": "info",
        "expected": "informational: the nvidia-smi topo -m matrix, computed from the sysfs device tree",
        "rationale": (
            "Tensor-parallel serving moves activations between GPUs on every layer (NCCL all-reduce). GPUs behind "
            "one PCIe switch (PIX) exchange data through the switch; PHB goes through the CPU's root complex, NODE "
            "between root complexes of one socket and SYS over the inter-socket link, each slower than the one "
            "before. The matrix shows which GPUs to give one CT, and which ports the ACS check looks at."
        ),
        "remediation": "Give each tensor-parallel group GPUs with the closest path (PIX, else PXB, else PHB).",
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "pcie.acs",
        "summary": (
            "no ACS Request/Completion Redirect or Egress Control on the switch ports between two GPUs (ports of a "
            "switch with a vfio-pci device skip); fix opt-in with `pcie_acs_fix`"
        ),
        "title": "ACS lets GPU peer traffic stay inside the PCIe switch",
        "severity": "high",
        "expected": "ReqRedir- CmpltRedir- EgressCtrl- on every switch port between two GPUs (policy gpu_p2p: "
                    "{gpu_p2p})",
        "rationale": (
            "Access Control Services Request Redirect, Completion Redirect and Egress Control on a switch's "
            "downstream port send every peer-to-peer transaction of the GPU below it up to the root complex (and "
            "through the IOMMU) instead of across the switch: NCCL's P2P transfers between GPUs of one switch then "
            "run at a fraction of the switch's bandwidth, or hang. The kernel sets these bits on every port when an "
            "IOMMU is on, to keep IOMMU groups apart; that matters only where a device below the port is passed to "
            "a VM (bound to vfio-pci), and those ports are left as they are."
        ),
        "remediation": (
            "Clear only the redirect bits of ACS Control on the ports named: setpci -s <port> "
            "ECAP_ACS+6.w=0000:002c (a masked write; Source Validation and the other bits stay), re-applied at every "
            "boot; pvetune does this with policy pcie_acs_fix: true. Never on a port above a vfio-pci device. The "
            "kernel forms IOMMU groups at boot, with ACS on: afterwards the GPUs of that switch still show separate "
            "groups but are no longer isolated from each other, so do not pass one of them to a VM (hostpci) "
            "without rollback.yml and a reboot."
        ),
        "fix_tag": "pcie",
        "reboot": "no",
    },
    {
        "id": "pcie.bar1",
        "summary": (
            "each GPU's BAR1 at the largest size its Resizable BAR capability supports (a warning naming the "
            "firmware settings)"
        ),
        "title": "Every GPU maps the BAR1 its Resizable BAR capability allows",
        "severity": "medium",
        "expected": "BAR1 at the largest size the GPU's Resizable BAR capability supports",
        "rationale": (
            "BAR1 is the window through which the CPU and peer devices (GPUDirect RDMA and P2P, pinned host copies "
            "through the BAR) reach GPU memory. A GPU whose Resizable BAR capability supports the whole framebuffer "
            "but maps 256 MB has its BAR1 mappings recycled under load. The firmware sizes it at boot: the OS "
            "cannot fix it for a bound driver."
        ),
        "remediation": (
            "In the BIOS/UEFI setup enable Above 4G Decoding (MMIO above 4 GB, 64-bit MMIO) and Resizable BAR "
            "(Re-Size BAR Support), and give MMIO high enough space (MMIOH size) for every GPU; then reboot."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "pcie.sriov",
        "summary": "informational: GPUs that offer SR-IOV and how many VFs are on",
        "title": "SR-IOV on the GPUs (informational)",
        "severity": "info",
        "expected": "informational: the GPUs that offer SR-IOV virtual functions and how many are enabled",
        "rationale": (
            "GPUs that offer SR-IOV (vGPU on data-centre boards) can be split into virtual functions for VMs; "
            "enabled VFs take BAR space and IOMMU groups from the physical function."
        ),
        "remediation": ("Nothing to do for performance; disable unused VFs (echo 0 > sriov_numvfs) if the host keeps "
                        "the whole GPU."),
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "pcie.aspm",
        "summary": (
            "ASPM (L0s, L1) off on every GPU link: LnkCtl of the GPU and of its upstream port, "
            "`/sys/module/pcie_aspm/parameters/policy`; fixed with policy `pcie_aspm_fix` by "
            "`pcie_aspm.policy=performance` on the kernel command line (pending until the reboot)"
        ),
        "title": "PCIe ASPM off on the GPU links",
        "severity": "medium",
        "expected": "ASPM disabled in LnkCtl on both ends of every GPU link",
        "rationale": (
            "Active State Power Management puts an idle link into L0s or L1; the first transfer after it waits for "
            "the exit latency (LnkCap advertises up to 64 us for L1). A GPU serving a token stream idles between "
            "steps and pays it on doorbells and completions. The kernel's pcie_aspm policy performance "
            "(drivers/pci/pcie/aspm.c) disables ASPM on every link it controls; firmware that keeps ASPM control "
            "needs its own setting."
        ),
        "remediation": (
            "Disable ASPM for the GPU slots in the firmware setup, or add pcie_aspm.policy=performance to the "
            "kernel command line (echo performance > /sys/module/pcie_aspm/parameters/policy now) and reboot."
        ),
        "fix_tag": "cmdline",
        "opt_in": "pcie_aspm_fix",
        "reboot": "when a GPU link has ASPM on",
    },
)
