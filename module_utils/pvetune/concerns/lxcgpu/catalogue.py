# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lxcgpu concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "lxc.gpu_devices",
        "summary": (
            "GPU CTs allow the *current* NVIDIA majors; stale lines named. Judged as pct and LXC read the config "
            "(docs/DESIGN.md): a trailing `# comment` after `rwm` is ignored as LXC ignores it and kept on rewrite; "
            "nodes bound from any directory count by their target; hooks that mknod are read; an unprivileged CT's "
            "allow lines have no effect (Proxmox makes its device list allow-all). A running CT whose config is "
            "right but whose last start (`/var/lib/lxc/<id>/config`, written by Proxmox) had other majors is "
            "pending until it restarts"
        ),
        "title": "GPU containers allow the host's current NVIDIA device majors",
        "severity": "critical",
        "expected": ("every NVIDIA node a CT mounts is covered by an allow line with its current major, "
                     "mount sources exist"),
        "rationale": (
            "nvidia-uvm, nvidia-caps and nvidia-nvlink get dynamic character majors that change across reboots "
            "and driver updates. A CT whose lxc.cgroup2.devices.allow lines name an old major cannot open "
            "/dev/nvidia-uvm and CUDA fails inside it (cuInit error 999 / 'no CUDA-capable device')."
        ),
        "remediation": (
            "Regenerate the CT's NVIDIA allow lines from /proc/devices (or use devN: entries, Proxmox 8.1+, which "
            "follow the major automatically) and restart the CT. pvetune installs pvetune-lxc-gpu.service to do "
            "this at boot before pve-guests.service."
        ),
        "fix_tag": "lxc",
        "reboot": "no",
    },
)
