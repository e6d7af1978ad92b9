# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA Xid codes the gpu.health check judges: what each means for the host, from NVIDIA's Xid catalogue.

``grade``: "fail" for a GPU that is gone or corrupts memory (needs a reset, a reboot or a replacement), "warn" for
an event that needs a look (memory errors contained, firmware faults), "info" for what an application's own bug
causes (the GPU itself is fine). A code not in the table warns with its number.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

SOURCE = ("NVIDIA, Xid catalogue (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html; older GPUs: "
          "docs.nvidia.com/deploy/xid-errors/index.html) for the meanings; the codes an application's own fault causes "
          "(13, 31, 43, 45, 68, 109: 'the GPU should still be healthy') as NVIDIA's k8s-device-plugin "
          "internal/rm/health.go @a9e8bafe lists them")

XID = {
    13: ("info", "graphics engine exception (usually an application's out-of-range access)"),
    31: ("info", "GPU memory page fault (usually an application's illegal access)"),
    43: ("info", "GPU stopped processing (an application's fault, the GPU stays usable)"),
    45: ("info", "preemptive cleanup after an earlier error or a killed application"),
    48: ("fail", "double-bit ECC error (uncorrectable; reset the GPU, replace it if it recurs)"),
    61: ("warn", "internal micro-controller breakpoint/warning"),
    62: ("fail", "internal micro-controller halt (reset the GPU)"),
    63: ("warn", "ECC page retirement or row remapping recorded (reset the GPU to apply)"),
    64: ("fail", "ECC page retirement or row remapping FAILED to record (replace the GPU)"),
    68: ("info", "video processor exception (an application's fault)"),
    74: ("fail", "NVLink error"),
    79: ("fail", "GPU has fallen off the bus (PCIe link, power or thermals: the GPU is gone until a reboot)"),
    92: ("warn", "high single-bit ECC error rate"),
    94: ("warn", "contained ECC error (the application that hit it was stopped; reset the GPU)"),
    95: ("fail", "uncontained ECC error (every application on the GPU was stopped; reset the GPU)"),
    109: ("info", "context switch timeout (an application's fault)"),
    119: ("fail", "GSP RPC timeout (the GPU's firmware stopped answering; reset the GPU)"),
    120: ("fail", "GSP error (the GPU's firmware faulted; reset the GPU)"),
    154: ("warn", "GPU recovery action changed (the driver asks for a reset, a reboot or a drain)"),
}


def grade(code):
    """(grade, meaning) of an Xid code."""
    return XID.get(code, ("warn", "Xid %d (see NVIDIA's Xid catalogue)" % code))
