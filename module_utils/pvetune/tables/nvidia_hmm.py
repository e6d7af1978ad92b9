# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Driver branches with public reports of nvidia-uvm HMM failures (nvidia.uvm_hmm, policy nvidia_uvm_hmm "auto").

HMM is on by default on x86_64 from the r535 open kernel modules when the kernel has CONFIG_HMM_MIRROR and
CONFIG_DEVICE_PRIVATE (open-gpu-kernel-modules kernel-open/nvidia-uvm/uvm_hmm.c: "Default: false (HMM is enabled if
possible)"; r530 shipped it off as not ready).  No public source names a driver that fixes the failures below, so a
row stays until one does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

OGKM = "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/"
DEFAULT_ON = ("open-gpu-kernel-modules kernel-open/nvidia-uvm/uvm_hmm.c @eb5c7665 (535.43.02): uvm_disable_hmm "
              "\"Default: false (HMM is enabled if possible)\" on x86_64")

HMM_ISSUES = (
    {"branches": (570, 575, 580),
     "problem": "cuInit returns CUDA_ERROR_NOT_INITIALIZED when HMM initialisation fails (kernels with KASLR)",
     "source": ("NVIDIA CUDA Toolkit release notes, known issue 'CUDA initialization can fail on certain Linux kernels "
                "with KASLR enabled' (workaround: options nvidia_uvm uvm_disable_hmm=1); " + OGKM + "797 (570.86.16), "
                + OGKM + "901 (570.158.01, 575.57.08), " + OGKM + "947 (570.133.20, 580.82.07, 580.95.05); "
                "github ollama/ollama#11593 (RTX PRO 6000 Blackwell, 575.57.08)")},
    {"branches": (595,),
     "problem": "HMM deadlocks and a NULL dereference in uvm_hmm_unregister_gpu on multi-GPU Blackwell hosts",
     "source": (OGKM + "968 (595.58.03, RTX PRO 5000 Blackwell, two containers), " + OGKM + "1082 and pull 1110 "
                "(595.58.03, RTX PRO 6000), " + OGKM + "1223 (595.71.05, RTX PRO 4500 Blackwell)")},
)


def hmm_issues(branch):
    """The rows of HMM_ISSUES that name a driver branch (an int, 580 for 580.95.05)."""
    return [row for row in HMM_ISSUES if branch in row["branches"]]
