"""The demo fleet's memory, storage and platform inputs (issue 31's checks): /proc/meminfo, huge pages, the ZFS ARC
(parameters, arcstats, modprobe.d), the pools' devices and datasets (as zpool list / zfs get print them), /proc/mounts,
the NVMe controllers and block queues, the GPUs' interrupts and irqbalance, the running CTs' /dev/shm and limits.

Each file keeps the real format of a file in tests/fixtures/realdata (memory/, storage/, irq/; sources in
SOURCES.md there): the meminfo and arcstats rows are the real files' rows with this host's sizes.
``write_platform(t, host, spec)`` is called by demo_fleet.write_host; the spec keys it reads are documented at
HOST_DEFAULTS.
"""
import os

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = os.path.join(TOP, "tests", "fixtures", "realdata")
GIB = 1 << 30

# What a spec may set (demo_fleet.HOSTS), and what a host gets without it.
HOST_DEFAULTS = {
    "ram_gib": 768,                # MemTotal
    "swappiness": "10",            # /proc/sys/vm/swappiness
    "arc": "installer",            # "installer": PVE 8.1+'s modprobe.d cap, loaded; "runtime-ignored": see ARC
    "models": "zfs",               # what /tank/models (CT 101's mp0) is: "zfs" (pool tank) or "nfs"
    "models_recordsize": "1M",
    "slow_nvme": None,             # an NVMe index trained at 8 GT/s x4 of 16 GT/s x4
    "hugepages_1g": 0,             # 1 GiB pages reserved (and left free)
    "irqbalance": True,            # running: each GPU's IRQ on its node; else every IRQ on CPU 0
    "memlock": "8388608",          # the CTs' init RLIMIT_MEMLOCK (bytes or unlimited)
    "zfs_root": False,             # / is rpool/ROOT/pve-1 (else the LVM pve-root)
}
NVME_MODEL = "SAMSUNG_MZQL23T8HCLS-00A07"
# rpool: a mirror of nvme0/nvme1 (the installer's); tank: raidz1 of nvme2-nvme5 (the models).
POOLS = {"rpool": (0, 1), "tank": (2, 3, 4, 5)}


def _real(*parts):
    with open(os.path.join(REAL, *parts)) as handle:
        return handle.read()


def meminfo(spec):
    """The real 48 GiB meminfo's rows (memory/proc_meminfo_duaneya_...), MemTotal and the huge pages this host's."""
    total = spec["ram_gib"] << 20
    pages = spec["hugepages_1g"]
    rows = {"MemTotal": total, "MemFree": total // 3, "MemAvailable": total * 3 // 4, "HugePages_Total": pages,
            "HugePages_Free": pages, "Hugepagesize": 2048, "Hugetlb": pages << 20}
    out = []
    for line in _real("memory", "proc_meminfo_duaneya_48g_anonhuge_4g_hugepages_0.txt").splitlines():
        key, rest = line.split(":", 1)
        if key in rows:
            unit = " kB" if rest.endswith("kB") else ""
            line = "%s:%s%d%s" % (key, " " * max(1, 15 - len(key) - len(str(rows[key])) + 1), rows[key], unit)
        out.append(line)
    return "\n".join(out) + "\n"


def arc_state(spec):
    """(zfs_arc_max parameter, zfs_arc_min parameter, c_max, c_min, modprobe.d text or None) in bytes.

    installer: /etc/modprobe.d/zfs.conf caps the ARC at 10% of RAM, at most 16 GiB, read at module load, where
    arc_init() lowers c_min below it (RAM/32 would be above). runtime-ignored: no modprobe.d cap (a pre-8.1 install)
    and 16 GiB written to the parameter at runtime, which arc_tuning_update() ignored: it is not above c_min
    (RAM/32 = 16 GiB on 512 GiB), so c_max stays the default half of RAM."""
    ram = spec["ram_gib"] * GIB
    cap = min(ram // 10, 16 * GIB)
    if spec["arc"] == "runtime-ignored":
        return cap, 0, ram // 2, ram // 32, None
    return cap, 0, cap, cap // 2, "options zfs zfs_arc_max=%d\n" % cap


def arcstats(c_max, c_min, ram):
    """The real OpenZFS 2.x arcstats (storage/arcstats_xruins_...) with this host's sizes."""
    values = {"c": c_max, "c_min": c_min, "c_max": c_max, "size": c_max - (3 << 30), "memory_all_bytes": ram}
    out = []
    for line in _real("storage", "arcstats_xruins_mackerel_64g_ram_arc_full.txt").splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] in values:
            line = "%-32s%-5s%d" % (fields[0], fields[1], values[fields[0]])
        out.append(line)
    return "\n".join(out) + "\n"


def _by_id(n):
    return "/dev/disk/by-id/nvme-%s_S64HNE0T%06d" % (NVME_MODEL, 412000 + n)


def zpool_list(spec):
    """zpool list -v -H -P: a pool row, its vdev rows and their devices (tab-separated, indented with a tab)."""
    pools = [("rpool", "mirror-0", POOLS["rpool"], "-part3")]
    if spec["models"] == "zfs":
        pools.append(("tank", "raidz1-0", POOLS["tank"], ""))
    lines = []
    for pool, vdev, disks, part in pools:
        lines.append("%s\t13.9T\t4.12T\t9.78T\t-\t-\t2%%\t29%%\t1.00x\tONLINE\t-" % pool)
        lines.append("\t%s\t13.9T\t4.12T\t9.78T\t-\t-\t2%%\t29.6%%\t-\tONLINE" % vdev)
        lines.extend("\t%s%s\t3.49T\t-\t-\t-\t-\t-\t-\t-\tONLINE" % (_by_id(n), part) for n in disks)
    return "\n".join(lines) + "\n"


def zfs_get(spec, ctids):
    """zfs get -H -p -o name,property,value,source recordsize,compression (byte values with -p)."""
    rows = []
    datasets = [("rpool", "131072", "on", "default"), ("rpool/data", "131072", "on", "inherited from rpool")]
    datasets += [("rpool/data/subvol-%d-disk-0" % c, "131072", "on", "inherited from rpool") for c in ctids]
    if spec["models"] == "zfs":
        size = {"1M": "1048576", "128K": "131072"}[spec["models_recordsize"]]
        datasets += [("tank", "131072", "lz4", "local"), ("tank/models", size, "lz4", "inherited from tank")]
    for name, rsize, comp, source in datasets:
        rows.append("%s\trecordsize\t%s\t%s" % (name, rsize, "local" if name == "tank/models" else "default"))
        rows.append("%s\tcompression\t%s\t%s" % (name, comp, source))
    return "\n".join(rows) + "\n"


def mounts(spec, root_fs, ctids):
    lines = ["sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0",
             "proc /proc proc rw,relatime 0 0",
             "udev /dev devtmpfs rw,nosuid,relatime,size=395983512k,nr_inodes=98995878,mode=755,inode64 0 0",
             "tmpfs /run tmpfs rw,nosuid,nodev,noexec,relatime,size=79199768k,mode=755,inode64 0 0"]
    lines.append(root_fs)
    lines.append("tmpfs /dev/shm tmpfs rw,nosuid,nodev,inode64 0 0")
    lines.append("rpool /rpool zfs rw,relatime,xattr,noacl,casesensitive 0 0")
    lines.append("rpool/data /rpool/data zfs rw,relatime,xattr,noacl,casesensitive 0 0")
    lines += ["rpool/data/subvol-%d-disk-0 /rpool/data/subvol-%d-disk-0 zfs rw,relatime,xattr,posixacl,"
              "casesensitive 0 0" % (c, c) for c in ctids]
    if spec["models"] == "zfs":
        lines.append("tank /tank zfs rw,relatime,xattr,noacl,casesensitive 0 0")
        lines.append("tank/models /tank/models zfs rw,relatime,xattr,noacl,casesensitive 0 0")
    else:
        lines.append("nas01:/export/models /tank/models nfs4 rw,relatime,vers=4.2,rsize=1048576,wsize=1048576,"
                     "namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.20.11,"
                     "local_lock=none,addr=10.0.20.5 0 0")
    lines.append("/dev/fuse /etc/pve fuse rw,nosuid,nodev,relatime,user_id=0,group_id=0,default_permissions,"
                 "allow_other 0 0")
    return "\n".join(lines) + "\n"


def write_nvme(t, spec):
    for n in range(6):
        slow = spec["slow_nvme"] == n
        ctrl = "/sys/class/nvme/nvme%d/device" % n
        t.write(ctrl + "/current_link_speed", "8.0 GT/s PCIe\n" if slow else "16.0 GT/s PCIe\n")
        t.write(ctrl + "/max_link_speed", "16.0 GT/s PCIe\n")
        t.write(ctrl + "/current_link_width", "4\n")
        t.write(ctrl + "/max_link_width", "4\n")
        t.write(ctrl + "/numa_node", "%d\n" % (n // 3))
        disk = "nvme%dn1" % n
        t.write("/sys/block/%s/queue/scheduler" % disk, "[none] mq-deadline \n")
        t.write("/sys/block/%s/queue/read_ahead_kb" % disk, "128\n")
        t.link("%s%s" % (_by_id(n), "-part3" if n in POOLS["rpool"] else ""),
               "../../%s%s" % (disk, "p3" if n in POOLS["rpool"] else ""))


def interrupts(spec, gpus, ncpu):
    """/proc/interrupts with the GPUs' MSI lines (the real files' layout: irq/proc_interrupts_duaneya_...)."""
    head = " " * 11 + "".join("CPU%-8d" % cpu for cpu in range(ncpu))
    lines = [head.rstrip() + "      "]
    for irq, bdf, cpu, count in gpus:
        counts = "".join("%10d " % (count if c == cpu else 0) for c in range(ncpu))
        lines.append("%4d: %s IR-PCI-MSI %d-edge      nvidia" % (irq, counts, int(bdf[5:7], 16) << 19))
    return "\n".join(lines) + "\n"


# /proc/<pid>/limits (fs/proc/base.c proc_pid_limits: "%-25s %-20s %-20s %-10s\n" per row, units padded).
LIMIT_ROWS = (("Max cpu time", "unlimited", "unlimited", "seconds"),
              ("Max file size", "unlimited", "unlimited", "bytes"),
              ("Max data size", "unlimited", "unlimited", "bytes"), ("Max stack size", "8388608", "unlimited", "bytes"),
              ("Max core file size", "0", "unlimited", "bytes"),
              ("Max resident set", "unlimited", "unlimited", "bytes"),
              ("Max processes", "1545297", "1545297", "processes"), ("Max open files", "1048576", "1048576", "files"),
              ("Max locked memory", "{memlock}", "{memlock}", "bytes"),
              ("Max address space", "unlimited", "unlimited", "bytes"),
              ("Max file locks", "unlimited", "unlimited", "locks"),
              ("Max pending signals", "1545297", "1545297", "signals"),
              ("Max msgqueue size", "819200", "819200", "bytes"), ("Max nice priority", "0", "0", ""),
              ("Max realtime priority", "0", "0", ""), ("Max realtime timeout", "unlimited", "unlimited", "us"))


def limits(memlock):
    rows = [("Limit", "Soft Limit", "Hard Limit", "Units")] + list(LIMIT_ROWS)
    return "".join("%-25s %-20s %-20s %-10s\n" % tuple(f.format(memlock=memlock) for f in row) for row in rows)


CT_MOUNTS = """\
rpool/data/subvol-{ctid}-disk-0 / zfs rw,relatime,xattr,posixacl,casesensitive 0 0
none /dev tmpfs rw,relatime,size=492k,mode=755,uid=100000,gid=100000,inode64 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
sysfs /sys sysfs ro,nosuid,nodev,noexec,relatime 0 0
udev /dev/nvidia0 devtmpfs rw,nosuid,relatime,size=395983512k,nr_inodes=98995878,mode=755,inode64 0 0
tmpfs /dev/shm tmpfs rw,nosuid,nodev,inode64 0 0
tmpfs /run tmpfs rw,nosuid,nodev,size=79199768k,nr_inodes=819200,mode=755,inode64 0 0
"""


def write_platform(t, host, spec, gpus, running, ncpu, node_of):
    """Everything above for one demo host. ``gpus``: [(index, bdf, sysfs dir, NUMA node)]; ``running``: {ctid: init
    pid} of the running GPU CTs; ``node_of``: NUMA node -> its first CPU."""
    spec = dict(HOST_DEFAULTS, **{k: v for k, v in spec.items() if k in HOST_DEFAULTS})
    ram = spec["ram_gib"] * GIB
    t.write("/proc/meminfo", meminfo(spec))
    for size, total in (("2048kB", 0), ("1048576kB", spec["hugepages_1g"])):
        t.write("/sys/kernel/mm/hugepages/hugepages-%s/nr_hugepages" % size, "%d\n" % total)
        t.write("/sys/kernel/mm/hugepages/hugepages-%s/free_hugepages" % size, "%d\n" % total)
    t.write("/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    t.write("/sys/kernel/mm/transparent_hugepage/defrag", "always defer defer+madvise [madvise] never\n")
    t.write("/proc/sys/vm/swappiness", spec["swappiness"] + "\n")
    t.write("/proc/sys/vm/zone_reclaim_mode", "0\n")
    param_max, param_min, c_max, c_min, conf = arc_state(spec)
    t.write("/sys/module/zfs/parameters/zfs_arc_max", "%d\n" % param_max)
    t.write("/sys/module/zfs/parameters/zfs_arc_min", "%d\n" % param_min)
    t.write("/proc/spl/kstat/zfs/arcstats", arcstats(c_max, c_min, ram))
    if conf:
        t.write("/etc/modprobe.d/zfs.conf", conf)
    ctids = sorted(set(running) | {101})
    t.write("/.pvetune/zpool-list.txt", zpool_list(spec))
    t.write("/.pvetune/zfs-get.txt", zfs_get(spec, ctids))
    root_fs = ("rpool/ROOT/pve-1 / zfs rw,relatime,xattr,noacl,casesensitive 0 0" if spec.get("zfs_root")
               else "/dev/mapper/pve-root / ext4 rw,relatime,errors=remount-ro 0 0")
    t.write("/proc/mounts", mounts(spec, root_fs, ctids))
    write_nvme(t, spec)
    t.write("/sys/module/pcie_aspm/parameters/policy", "[default] performance powersave powersupersave \n")
    rows = []
    for idx, bdf, ddir, node in gpus:
        irq = 164 + idx * 2                     # as /proc/driver/nvidia/gpus/<bdf>/information says
        t.write("%s/msi_irqs/%d" % (ddir, irq), "msi\n")
        cpu = node_of[node] + idx % 4 if spec["irqbalance"] else 0
        t.write("/proc/irq/%d/smp_affinity_list" % irq, "%s\n" % (cpu if spec["irqbalance"] else "0-%d" % (ncpu - 1)))
        t.write("/proc/irq/%d/effective_affinity_list" % irq, "%d\n" % cpu)
        t.write("/proc/irq/%d/node" % irq, "%d\n" % node)
        rows.append((irq, bdf, cpu, 1844000 + idx * 7331))
    t.write("/proc/interrupts", interrupts(spec, rows, ncpu))
    if spec["irqbalance"]:
        t.write("/sys/fs/cgroup/system.slice/irqbalance.service/cgroup.procs", "1543\n")
    for ctid, pid in sorted(running.items()):
        t.write("/proc/%d/limits" % pid, limits(spec["memlock"]))
        t.write("/proc/%d/mounts" % pid, CT_MOUNTS.format(ctid=ctid))
