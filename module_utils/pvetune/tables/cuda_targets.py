# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compute capability of NVIDIA GPUs and the first CUDA release that targets each (nvidia.compute_capability).

A GPU's compute capability comes from the chip code name in its pci.ids model name (GB202GL -> GB202), else from
its device id.  Chips and capabilities: NVIDIA's "CUDA GPU Compute Capability" list.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

CC_SOURCE = "NVIDIA, CUDA GPU Compute Capability (https://developer.nvidia.com/cuda-gpus)"
CUTLASS = ("NVIDIA CUTLASS documentation, Blackwell architectures table (minimum CUDA toolkit per SM: SM100 12.8, "
           "SM103 13.0, SM120 12.8, SM121 13.0)")
BLACKWELL_GUIDE = ("NVIDIA, Blackwell Compatibility Guide (https://docs.nvidia.com/cuda/blackwell-compatibility-"
                   "guide): applications built with CUDA 12.7 or earlier carry no Blackwell code, CUDA 12.8 targets it")
SELECT_ARCH = ("Kitware/CMake Modules/FindCUDA/select_compute_arch.cmake @2edf0fc6 and pytorch cmake "
               "select_compute_arch.cmake: the CUDA version from which each architecture is built")

# (chip code-name pattern, compute capability), first match wins.
CHIPS = (
    (r"GB20B", "12.1"), (r"GB20[0-9]", "12.0"), (r"GB11[0-9]", "10.3"), (r"GB10[0-9]", "10.0"),
    (r"GH10[0-9]", "9.0"), (r"AD10[0-9]", "8.9"), (r"GA100", "8.0"), (r"GA10[1-9]", "8.6"),
    (r"TU1[01][0-9]", "7.5"), (r"GV10[0-9]", "7.0"),
)
# Device-id ranges where the model name does not tell (pci.ids missing): (low, high, compute capability).
DEVICE_RANGES = (
    (0x2900, 0x29FF, "10.0"), (0x3100, 0x31FF, "10.3"), (0x2E00, 0x2EFF, "12.1"), (0x2B00, 0x2DFF, "12.0"),
    (0x2F00, 0x2FFF, "12.0"), (0x2302, 0x23F0, "9.0"), (0x2681, 0x28F8, "8.9"), (0x2080, 0x20FF, "8.0"),
    (0x2200, 0x25FB, "8.6"), (0x1E02, 0x1FF9, "7.5"), (0x2182, 0x21D1, "7.5"), (0x1D81, 0x1DF6, "7.0"),
)
# Compute capability -> (first CUDA release that targets it, source).
FIRST_CUDA = {
    "12.1": ("13.0", CUTLASS), "12.0": ("12.8", BLACKWELL_GUIDE + "; " + CUTLASS),
    "10.3": ("13.0", CUTLASS), "10.0": ("12.8", BLACKWELL_GUIDE + "; " + CUTLASS),
    "9.0": ("11.8", SELECT_ARCH), "8.9": ("11.8", SELECT_ARCH), "8.6": ("11.1", SELECT_ARCH),
    "8.0": ("11.0", SELECT_ARCH), "7.5": ("10.0", SELECT_ARCH), "7.0": ("9.0", SELECT_ARCH),
}
_CHIP = re.compile(r"\A(?:NVIDIA Corporation\s+)?((?:G[A-Z]|AD|TU)[0-9]{2}[0-9A-Z])")


def compute_capability(device_id, model=None):
    """"12.0" for an RTX PRO 6000 Blackwell, None when neither the model name nor the device id tells."""
    match = _CHIP.match(model or "")
    if match:
        for pattern, cc in CHIPS:
            if re.match(pattern + r"\Z", match.group(1)):
                return cc
    if isinstance(device_id, int):
        for low, high, cc in DEVICE_RANGES:
            if low <= device_id <= high:
                return cc
    return None


def version_tuple(version):
    """"12.8" / "12.4.127" -> (12, 8) / (12, 4); None for anything else."""
    match = re.match(r"\A([0-9]{1,2})\.([0-9]{1,2})(?:\.[0-9]{1,5}){0,2}\Z", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None
