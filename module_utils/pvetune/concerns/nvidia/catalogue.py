# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nvidia concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "nvidia.driver",
        "summary": "the NVIDIA driver is loaded (`/proc/driver/nvidia/version`)",
        "title": "NVIDIA driver loaded",
        "severity": "medium",
        "expected": "driver loaded (/proc/driver/nvidia/version)",
        "rationale": (
            "Without the kernel module no GPU is usable on the host or in a CT; a GPU left on nouveau or no driver "
            "after a kernel update (DKMS not built for it) is the usual cause."
        ),
        "remediation": "Install the NVIDIA driver for the running kernel (DKMS or the .run installer) and load it.",
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "nvidia.persistence",
        "summary": (
            "persistence mode on every GPU, held by the `nvidia-persistenced` daemon (legacy `nvidia-smi -pm 1` "
            "warns: NVIDIA deprecates it and it is gone after a reboot)"
        ),
        "title": "Persistence mode on every GPU, held by nvidia-persistenced",
        "severity": "medium",
        "expected": "persistence mode enabled on every GPU and nvidia-persistenced running (policy "
                    "nvidia_persistence: {nvidia_persistence})",
        "rationale": (
            "Without persistence the driver tears a GPU's state down when its last client exits; the next CUDA "
            "context pays seconds of initialisation, and in CTs the first call can time out. NVIDIA's Driver "
            "Persistence guide (docs.nvidia.com/deploy/driver-persistence) names the nvidia-persistenced daemon as "
            "the way to keep it and the legacy persistence mode (nvidia-smi -pm 1) as deprecated; the legacy mode "
            "also does not survive a reboot."
        ),
        "remediation": "systemctl enable --now nvidia-persistenced (shipped with the driver).",
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "nvidia.uvm_hmm",
        "summary": (
            "nvidia-uvm's HMM (`uvm_disable_hmm`, `Addressing Mode: HMM`) against a sourced table of driver "
            "branches where HMM breaks CUDA initialisation or deadlocks; configured in modprobe.d but not loaded is "
            "pending"
        ),
        "title": "nvidia-uvm HMM off where the driver branch has known HMM failures",
        "severity": "medium",
        "expected": "uvm_disable_hmm=Y where the driver branch is in the HMM issues table (policy "
                    "nvidia_uvm_hmm: {nvidia_uvm_hmm})",
        "rationale": (
            "From the r535 open kernel modules nvidia-uvm enables HMM on x86_64 when the kernel supports it. On some "
            "kernels (KASLR) HMM initialisation fails and cuInit returns CUDA_ERROR_NOT_INITIALIZED, and multi-GPU "
            "Blackwell hosts hit HMM deadlocks (the issues table in docs/checks.md, with NVIDIA's CUDA release "
            "notes' known issue). Serving engines do not use HMM: turning it off costs them nothing."
        ),
        "remediation": (
            "Add 'options nvidia_uvm uvm_disable_hmm=1' to /etc/modprobe.d/ (pvetune writes it with policy "
            "nvidia_uvm_hmm_fix), update the initramfs when it loads nvidia_uvm, and reload nvidia_uvm with no GPU "
            "process running, or reboot."
        ),
        "fix_tag": "nvidia",
        "opt_in": "nvidia_uvm_hmm_fix",
        "reboot": "when the loaded nvidia_uvm still runs HMM",
    },
)
