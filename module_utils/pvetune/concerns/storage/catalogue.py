# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The storage concern's checks in the catalogue, as data.

The fields are core/catalogue.py's; the entries' concern is this package's name, their place in every list
core/catalogue.ORDER.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ENTRIES = (
    {
        "id": "storage.zfs_arc",
        "summary": (
            "the ARC's effective `c_max` (arcstats) fits beside the running CTs' memory and within the policy "
            "(`auto`: 10% of RAM, at most 16 GiB, as the PVE 8.1+ installer writes); a `zfs_arc_max` the module "
            "ignored fails, one configured in modprobe.d but not loaded is pending; fixed with policy `zfs_arc_fix`"
        ),
        "title": "ZFS ARC capped beside the CTs' memory",
        "severity": "medium",
        "expected": ("ARC c_max <= the policy's cap (zfs_arc_max {zfs_arc_max}) and c_max + running CTs' memory <= "
                     "RAM"),
        "rationale": (
            "OpenZFS sizes the ARC at half of RAM (before 2.3) or all but 1 GiB of it (2.3+, man zfs(4) zfs_arc_max). "
            "On an LLM host the CTs that load and serve hundreds of GB of weights need that memory: an ARC that may "
            "grow into it means reclaim stalls or the OOM killer. The Proxmox VE admin guide (Limit ZFS Memory "
            "Usage) sets 10% of RAM, at most 16 GiB, and warns that a zfs_arc_max at or below zfs_arc_min (1/32 of "
            "RAM by default) is ignored: arc_tuning_update() (module/zfs/arc.c) takes a runtime zfs_arc_max only "
            "above arc_c_min; at module load arc_init() lowers arc_c_min instead (OpenZFS 2.1.16, 2.2+)."
        ),
        "remediation": (
            "Set zfs_arc_min below zfs_arc_max and both in /etc/modprobe.d/zfs.conf (options zfs zfs_arc_min=... "
            "zfs_arc_max=...), write them to /sys/module/zfs/parameters (min first when lowering), and with root on "
            "ZFS run update-initramfs -u -k all."
        ),
        "fix_tag": "zfs",
        "opt_in": "zfs_arc_fix",
        "reboot": "no",
    },
    {
        "id": "storage.weights",
        "summary": (
            "each GPU CT's rootfs and mount points (CT config -> storage.cfg, /proc/mounts) are local; the NVMe "
            "devices under them run at their maximum link speed and width on a NUMA node with GPUs, `none` "
            "scheduler and `read_ahead_kb` >= "
            "4096 (policy) on disks that are not ZFS vdevs; a network mount warns, naming it"
        ),
        "title": "GPU CTs load weights from local NVMe at full link speed",
        "severity": "medium",
        "expected": ("local NVMe at its max link speed and width; scheduler none, read_ahead_kb >= "
                     "{storage_read_ahead_kb}"),
        "rationale": (
            "A 180 GB model loads in about 25 s at 7 GB/s and in 6 minutes at 0.5 GB/s: every restart of the "
            "serving engine pays it. An NVMe trained below its link (current_link_speed/width against max_link_*, "
            "drivers/pci/pci-sysfs.c) halves its bandwidth; network storage (pve-storage nfs, cifs, cephfs, rbd) caps "
            "it at the network's. TuneD's throughput-performance and accelerator-performance profiles set "
            "readahead >4096 KiB ([disk] readahead=>4096); NVMe is fastest without an I/O scheduler (queue-sysfs: "
            "scheduler). ZFS schedules its own vdevs and prefetches itself."
        ),
        "remediation": (
            "Put model weights on a local NVMe storage (a zfspool, lvmthin or directory storage) and mount it into "
            "the CT; reseat or move an NVMe that trained below its link; echo none > /sys/block/<disk>/queue/"
            "scheduler and echo 4096 > .../read_ahead_kb (a udev rule keeps them)."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
    {
        "id": "storage.zfs_dataset",
        "summary": (
            "the ZFS datasets behind GPU CTs' mount points (or their rootfs when they have none) use a recordsize >= "
            "1M (policy `zfs_recordsize`, KiB) and no gzip compression (`zfs get`); advice: a new recordsize applies "
            "to new files only"
        ),
        "title": "ZFS datasets of the weights suit large sequential reads",
        "severity": "low",
        "expected": "recordsize >= {zfs_recordsize} KiB, compression lz4, zstd or off",
        "rationale": (
            "OpenZFS's Workload Tuning guide: set recordsize=1M on datasets subject to sequential workloads, and "
            "compression=lz4. Weights are read whole, sequentially; the default 128K records mean eight times the "
            "block pointers and I/Os. zfsprops(7): changing the recordsize affects only files created afterward."
        ),
        "remediation": (
            "zfs set recordsize=1M <dataset> (and compression=lz4), then copy the weights again: the files "
            "already written keep their record size."
        ),
        "fix_tag": "",
        "reboot": "no",
    },
)
