# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mem concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "mem.sysctl",
        "summary": (
            "`vm.swappiness` 10 and `vm.zone_reclaim_mode` 0 at runtime and persisted (policy), no huge pages "
            "reserved and unused; THP as information; fixed by the sysctl drop-in"
        ),
        "title": "Memory sysctls: swappiness {vm_swappiness}, zone_reclaim_mode {vm_zone_reclaim_mode}",
        "severity": "medium",
        "expected": "vm.swappiness = {vm_swappiness}, vm.zone_reclaim_mode = {vm_zone_reclaim_mode}, persisted; no "
                    "idle huge page reservation",
        "rationale": (
            "With swappiness 60 (the kernel default) the kernel swaps out the anonymous memory of idle serving "
            "processes to keep page cache; the first request after that stalls on swap-in. The Proxmox VE admin "
            "guide (SWAP on ZFS) calls 10 a good value for servers, and TuneD's throughput-performance, "
            "accelerator-performance and latency-performance profiles set vm.swappiness=10. zone_reclaim_mode "
            "reclaims page cache on the local node instead of using a remote one; the kernel's sysctl/vm.rst says to "
            "leave it off for workloads that benefit from their data cached (weights read through the page cache). "
            "Huge pages reserved with vm.nr_hugepages or hugepages= and never used are RAM no CT gets."
        ),
        "remediation": (
            "sysctl -w vm.swappiness=10 vm.zone_reclaim_mode=0 and the same in a file in /etc/sysctl.d; release "
            "unused huge pages (echo 0 > /proc/sys/vm/nr_hugepages, remove hugepages= from the command line)."
        ),
        "fix_tag": "sysctl",
        "reboot": "no",
    },
)
