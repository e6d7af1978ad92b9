# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lxcres concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "lxc.resources",
        "summary": (
            "per GPU CT, configured (the CT config) against effective (its cgroup, while it runs): CPUs on its GPUs' "
            "NUMA nodes, >= 4 CPUs and >= 16 GiB per GPU (policy), no `cpulimit`, no swap; the pin is fixed with "
            "policy `lxc_numa_pin` (`lxc.cgroup2.cpuset.cpus`, in place, pending until the CT restarts)"
        ),
        "title": "GPU CTs get CPUs on their GPUs' NUMA nodes, enough CPUs and memory, no CPU quota, no swap",
        "severity": "high",
        "expected": ("per GPU CT: CPUs on its GPUs' NUMA nodes, >= {lxc_min_cpus_per_gpu} CPUs and >= "
                     "{lxc_min_memory_per_gpu} MiB per GPU, no cpulimit, swap 0"),
        "rationale": (
            "A CT's cgroup limits are invisible inside it: nproc and /proc/meminfo show the host. A serving engine "
            "runs one busy host thread per GPU plus its NCCL proxy, tokenizer and scheduler; too few CPUs, a CPU "
            "quota (cpulimit, throttled every 100 ms period) or CPUs on the other socket stall every kernel launch. "
            "CUDA pins host memory for transfers and the engine loads weights through it; a small memory.max ends "
            "in the OOM killer, and swap turns a memory shortfall into seconds-long stalls."
        ),
        "remediation": (
            "In the CT config: cores >= the CPUs above, no cpulimit, memory >= the minimum, swap: 0, and "
            "lxc.cgroup2.cpuset.cpus set to the CPUs of the GPUs' NUMA nodes (policy lxc_numa_pin lets pvetune "
            "write it); restart the CT for it to take effect."
        ),
        "fix_tag": "lxc",
        "reboot": "no",
    },
    {
        "id": "lxc.shm_memlock",
        "summary": (
            "each running GPU CT's `/dev/shm` >= 1 GiB (policy) and unlimited locked memory for its init "
            "(`/proc/<init>/mounts`, `/proc/<init>/limits`); advice with the CT config lines to add"
        ),
        "title": "GPU CTs get shared memory and unlimited locked memory",
        "severity": "medium",
        "expected": "/dev/shm >= {lxc_min_shm_mib} MiB, Max locked memory unlimited",
        "rationale": (
            "NCCL creates its shared memory segments in /dev/shm and fails to initialise without enough (NCCL "
            "troubleshooting: Shared memory); NVIDIA's container guidance runs with --shm-size=1g --ulimit "
            "memlock=-1. A Proxmox VE system CT gets the /dev/shm its own systemd mounts (tmpfs without a size: half "
            "of RAM, charged to the CT's memory) and pve-container sets no lxc.prlimit.memlock, so the CT inherits "
            "the 8 MiB default RLIMIT_MEMLOCK (Linux 5.16+, systemd's DefaultLimitMEMLOCK)."
        ),
        "remediation": (
            "Add lxc.prlimit.memlock: unlimited (and, for a small /dev/shm, lxc.mount.entry: tmpfs dev/shm tmpfs "
            "rw,nosuid,nodev,size=<size>,create=dir 0 0) to /etc/pve/lxc/<vmid>.conf and restart the CT; services in "
            "the CT may still set LimitMEMLOCK= themselves."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
)
