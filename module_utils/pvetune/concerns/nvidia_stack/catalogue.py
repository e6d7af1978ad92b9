# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvidia_stack concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "nvidia.stack",
        "summary": (
            "the kernel module flavour and first driver the GPU generation needs (Blackwell: open modules only; "
            "10de:2bb5 from 575.57.08), and in every running GPU CT the user-space driver of the host module's "
            "version (`libcuda.so.<ver>` read through `/proc/<init>/root`); the failure names both versions and the "
            "`--no-kernel-modules` install"
        ),
        "title": "NVIDIA driver fits the GPUs, and every GPU CT runs the host's user-space driver",
        "severity": "critical",
        "expected": ("the open kernel modules where the GPU generation needs them, a driver branch that supports "
                     "the GPUs, and in every running GPU CT libnvidia-ml/libcuda of the host module's version"),
        "rationale": (
            "The user-space driver (libcuda, libnvidia-ml) must be the exact version of the loaded kernel module: "
            "inside a CT that ships other libraries every CUDA and NVML call fails with 'Driver/library version "
            "mismatch', typically after the host's driver was updated. Blackwell GPUs work only with the open "
            "kernel modules, and each GPU generation needs a minimum driver branch."
        ),
        "remediation": (
            "Install the host's driver version in the CT without its kernel module (NVIDIA-Linux-x86_64-<version>"
            ".run --no-kernel-modules, or the distribution's matching user-space packages); on the host, the open "
            "kernel modules (nvidia-open / the .run installer's -m=kernel-open) of a supported branch."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "nvidia.compute_capability",
        "summary": (
            "every running GPU CT's CUDA runtime (`libcudart.so.<ver>`, `libcublas.so.<ver>`) can target the GPUs' "
            "compute capability (sourced table: sm_120 needs CUDA 12.8 or later)"
        ),
        "title": "Every GPU CT's CUDA runtime supports the GPUs' compute capability",
        "severity": "high",
        "expected": "in every GPU CT, a CUDA runtime at or above the first CUDA release of the GPUs' compute "
                    "capability",
        "rationale": (
            "CUDA libraries carry machine code for the GPU architectures their release knew. A runtime older than "
            "the GPU's compute capability has no code for it: cuBLAS, cuDNN and framework kernels fail with 'no "
            "kernel image is available for execution on the device' (e.g. CUDA 12.4 on Blackwell sm_120, which "
            "CUDA 12.8 first supports: the compute capability table in docs/checks.md)."
        ),
        "remediation": (
            "Install a CUDA runtime (or a framework build) of the release in the table or later in the CT; the "
            "host's driver must support that CUDA release too (nvidia.stack)."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
)
