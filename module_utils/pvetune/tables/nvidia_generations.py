# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA GPU generations: how to recognise one, the kernel modules it needs, its first and its last driver.

A GPU's generation comes from the chip code name that starts its pci.ids name ("GB202GL [RTX PRO 6000 Blackwell
Server Edition]" -> GB2 -> Blackwell).  Without a pci.ids name it comes from the device-id ranges the display
functions of each generation occupy in pci.ids; the spans overlap (Hopper and TU116 lie inside Ampere's), so the
names come first and the ranges are split where they interleave.  A host whose pci.ids predates a generation
(Debian 12's has no Blackwell) falls back to the ranges.  Every row cites its sources.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

PCI_IDS = "pci.ids Version 2026.08.22 (PCI ID Project, github pciutils/pciids @c1c12547), vendor 10de display functions"
BLOG = ("https://developer.nvidia.com/blog/nvidia-transitions-fully-towards-open-source-gpu-kernel-modules/: \"For "
        "cutting-edge platforms such as NVIDIA Grace Hopper or NVIDIA Blackwell, you must use the open-source GPU "
        "kernel modules. The proprietary drivers are unsupported on these platforms.\"")
PRE_TURING = ("https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html: \"Proprietary - "
              "... required for older GPUs from the Maxwell, Pascal, or Volta architectures. The open-source GPU "
              "kernel modules are not compatible with these platforms.\"")
OPEN_OK = ("https://github.com/NVIDIA/open-gpu-kernel-modules README.md: \"The NVIDIA open kernel modules can be used "
           "on any Turing or later GPU\"")
CUDA_TABLE = ("https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (Table 3: the minimum driver of the "
              "architecture's first CUDA toolkit in https://docs.nvidia.com/datacenter/tesla/drivers/"
              "cuda-toolkit-driver-and-architecture-matrix.html)")
OGKM = ("the first release of github NVIDIA/open-gpu-kernel-modules whose README.md 'Compatible GPUs' table lists the "
        "device (all 193 tags 515.43.04-595.45.04 read)")
LAST_580 = ("https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html: "
            "Last Driver Support R580 for Maxwell, Pascal and Volta")

GENERATIONS_TABLE = (
    # key, name, chip code-name prefixes, device-id ranges of the display functions (the fallback), kernel modules
    # ("required": open only, "supported": either, "unsupported": proprietary only) with the source, the first
    # driver of the generation with its source, the last branch with its source.
    {"key": "blackwell", "name": "Blackwell", "chips": ("GB1", "GB2"), "ranges": ((0x2900, 0x2FFF), (0x3100, 0x3340)),
     "open_modules": "required", "open_source": BLOG, "min_driver": "570.86.15",
     "min_source": OGKM + ": 10de:2901 B200 in 570.86.15 (tag commit 54d69484)", "max_branch": None,
     "max_source": None, "ids_source": PCI_IDS},
    {"key": "hopper", "name": "Hopper", "chips": ("GH1",), "ranges": ((0x2302, 0x23F0),),
     "open_modules": "supported", "open_source": OPEN_OK, "min_driver": "520.56.06",
     "min_source": OGKM + ": 10de:2331 H100 PCIe in 520.56.06", "max_branch": None, "max_source": None,
     "ids_source": PCI_IDS},
    {"key": "ada", "name": "Ada Lovelace", "chips": ("AD1",), "ranges": ((0x2681, 0x28F8),),
     "open_modules": "supported", "open_source": OPEN_OK, "min_driver": "520.61.05",
     "min_source": CUDA_TABLE + ": Ada first in CUDA 11.8, CUDA 11.8 GA >=520.61.05", "max_branch": None,
     "max_source": None, "ids_source": PCI_IDS},
    {"key": "turing", "name": "Turing", "chips": ("TU1",), "ranges": ((0x1E02, 0x1FF9), (0x2182, 0x21D1)),
     "open_modules": "supported", "open_source": OPEN_OK, "min_driver": "410.48",
     "min_source": CUDA_TABLE + ": Turing first in CUDA 10.0, CUDA 10.0.130 >= 410.48", "max_branch": None,
     "max_source": None, "ids_source": PCI_IDS},
    {"key": "ampere", "name": "Ampere", "chips": ("GA1",),
     "ranges": ((0x2080, 0x20FF), (0x2200, 0x223F), (0x2414, 0x25FB)),
     "open_modules": "supported", "open_source": OPEN_OK, "min_driver": "450.51.05",
     "min_source": CUDA_TABLE + ": Ampere first in CUDA 11.0, CUDA 11.0.2 GA >= 450.51.05", "max_branch": None,
     "max_source": None, "ids_source": PCI_IDS},
    {"key": "volta", "name": "Volta", "chips": ("GV1",), "ranges": ((0x1D81, 0x1DF6),),
     "open_modules": "unsupported", "open_source": PRE_TURING, "min_driver": "384.81",
     "min_source": CUDA_TABLE + ": Volta first in CUDA 9.0, CUDA 9.0.76 >= 384.81", "max_branch": "580",
     "max_source": LAST_580, "ids_source": PCI_IDS},
    {"key": "pascal", "name": "Pascal", "chips": ("GP1",),
     "ranges": ((0x15C2, 0x15FF), (0x1725, 0x172F), (0x1B00, 0x1D56)),
     "open_modules": "unsupported", "open_source": PRE_TURING, "min_driver": "367.48",
     "min_source": CUDA_TABLE + ": Pascal first in CUDA 8.0, CUDA 8.0.44 >= 367.48", "max_branch": "580",
     "max_source": LAST_580, "ids_source": PCI_IDS},
    {"key": "maxwell", "name": "Maxwell", "chips": ("GM1", "GM2"),
     "ranges": ((0x1340, 0x1436), (0x1613, 0x1676), (0x174D, 0x17FD)),
     "open_modules": "unsupported", "open_source": PRE_TURING, "min_driver": None, "min_source": None,
     "max_branch": "580", "max_source": LAST_580, "ids_source": PCI_IDS},
)
GENERATIONS = {row["key"]: row for row in GENERATIONS_TABLE}

# Blackwell runs only on the open modules, so the first open-module release that lists a device is its first
# driver (OGKM). Devices of other generations use their generation's floor.
DEVICE_MIN_DRIVER = {
    0x2901: "570.86.15",  # GB100 [B200]
    0x2941: "570.123.01",  # GB100 [HGX GB200]
    0x29bb: "580.82.07",  # GB102 [DRIVE P2021]
    0x2b85: "570.86.16",  # GB202 [GeForce RTX 5090]
    0x2b87: "570.86.16",  # GB202 [GeForce RTX 5090 D]
    0x2b8c: "580.76.05",  # GB202 [GeForce RTX 5090 D V2]
    0x2bb1: "570.123.07",  # GB202GL [RTX PRO 6000 Blackwell Workstation Edition]
    0x2bb2: "580.95.05",  # GB202GL [RTX PRO 6000D Blackwell Workstation Edition]
    0x2bb3: "570.153.02",  # GB202GL [RTX PRO 5000 Blackwell / RTX PRO 5000 72GB Blackwell]
    0x2bb4: "570.123.07",  # GB202GL [RTX PRO 6000 Blackwell Max-Q Workstation Edition]
    0x2bb5: "575.57.08",  # GB202GL [RTX PRO 6000 Blackwell Server Edition]
    0x2bb9: "580.82.07",  # GB202GL [RTX 6000D]
    0x2bbc: "580.95.05",  # GB202GL [RTX PRO 6000D Blackwell Max-Q Workstation Edition]
    0x2c02: "570.86.16",  # GB203 [GeForce RTX 5080]
    0x2c05: "570.123.01",  # GB203 [GeForce RTX 5070 Ti]
    0x2c18: "570.123.07",  # GB203M / GN22 [GeForce RTX 5090 Max-Q / Mobile]
    0x2c19: "570.123.07",  # GB203M / GN22 [GeForce RTX 5080 Max-Q / Mobile]
    0x2c31: "570.169",  # GB203GL [RTX PRO 4500 Blackwell]
    0x2c33: "570.190",  # GB203GL [RTX PRO 4000 Blackwell SFF Edition]
    0x2c34: "570.169",  # GB203GL [RTX PRO 4000 Blackwell]
    0x2c38: "570.158.01",  # GB203GLM [RTX PRO 5000 Blackwell Generation Laptop GPU]
    0x2c39: "570.158.01",  # GB203GLM [RTX PRO 4000 Blackwell Generation Laptop GPU]
    0x2c3a: "580.142",  # GB203GL [RTX PRO 4500 Blackwell Server Edition]
    0x2c58: "570.123.07",  # GB203M / GN22-X11 [GeForce RTX 5090 Max-Q / Mobile]
    0x2c59: "570.123.07",  # GB203M / GN22-X9 [GeForce RTX 5080 Max-Q / Mobile]
    0x2c77: "580.94.10",  # GB203GLM [RTX PRO 5000 Blackwell Embedded GPU]
    0x2c79: "570.207",  # GB203GLM [RTX PRO 4000 Blackwell Embedded GPU]
    0x2d04: "570.123.10",  # GB206 [GeForce RTX 5060 Ti]
    0x2d05: "570.158.01",  # GB206 [GeForce RTX 5060]
    0x2d18: "570.153.02",  # GB206M [GeForce RTX 5070 Max-Q / Mobile]
    0x2d19: "570.158.01",  # GB206M [GeForce RTX 5060 Max-Q / Mobile]
    0x2d30: "570.190",  # GB206GL [RTX PRO 2000 Blackwell]
    0x2d39: "570.158.01",  # GB206GLM [RTX PRO 2000 Blackwell Generation Laptop GPU]
    0x2d58: "570.153.02",  # GB206M [GeForce RTX 5070 Max-Q / Mobile]
    0x2d59: "570.158.01",  # GB206M [GeForce RTX 5060 Max-Q / Mobile]
    0x2d79: "570.207",  # GB206GLM [RTX PRO 2000 Blackwell Embedded GPU]
    0x2d83: "575.64.03",  # GB207 [GeForce RTX 5050]
    0x2d98: "570.172.08",  # GB207M [GeForce RTX 5050 Max-Q / Mobile]
    0x2db8: "570.158.01",  # GB207GLM [RTX PRO 1000 Blackwell Generation Laptop GPU]
    0x2db9: "570.158.01",  # GB207GLM [RTX PRO 500 Blackwell Generation Laptop GPU]
    0x2dd8: "570.172.08",  # GB207M [GeForce RTX 5050 Max-Q / Mobile]
    0x2df9: "570.207",  # GB207GLM [RTX PRO 500 Blackwell Embedded GPU]
    0x2e12: "580.94.13",  # GB20B [GB10]
    0x2f04: "570.123.07",  # GB205 [GeForce RTX 5070]
    0x2f18: "570.123.07",  # GB205M [GeForce RTX 5070 Ti Mobile]
    0x2f38: "570.158.01",  # GB205GLM [RTX PRO 3000 Blackwell Generation Laptop GPU]
    0x2f58: "570.123.07",  # GB205M [GeForce RTX 5070 Ti Mobile]
    0x3182: "580.82.07",  # GB110 [B300 SXM6 AC]
    0x31c2: "580.82.07",  # GB110 [GB300]
}
# Grace Hopper needs the open modules as Blackwell does (BLOG); pci.ids names both GH100.
OPEN_REQUIRED_DEVICES = {0x2342: "GH200 120GB / 480GB", 0x2348: "GH200 144G HBM3e"}
_CHIP = re.compile(r"\A(?:NVIDIA Corporation\s+)?((?:G[A-Z]|AD|TU)[0-9])[0-9]{2}")


def generation_of(device_id, model=None):
    """The generation key of an NVIDIA GPU from its pci.ids model name, else its device id; None when unknown."""
    match = _CHIP.match(model or "")
    if match:
        for row in GENERATIONS_TABLE:
            if match.group(1) in row["chips"]:
                return row["key"]
    if isinstance(device_id, str):
        device_id = int(device_id, 16) if re.match(r"\A(0x)?[0-9a-fA-F]{1,4}\Z", device_id) else None
    for row in GENERATIONS_TABLE if isinstance(device_id, int) else ():
        if any(lo <= device_id <= hi for lo, hi in row["ranges"]):
            return row["key"]
    return None


def min_driver(row, device_id):
    """(first driver, its source) for a device of a generation: the device's own where the table has one."""
    if isinstance(device_id, int) and device_id in DEVICE_MIN_DRIVER:
        return DEVICE_MIN_DRIVER[device_id], "%s: 10de:%04x" % (OGKM, device_id)
    return row["min_driver"], row["min_source"]


def open_required(row, device_id):
    return row["open_modules"] == "required" or device_id in OPEN_REQUIRED_DEVICES
