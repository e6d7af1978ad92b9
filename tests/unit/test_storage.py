"""Storage the weights load from, memory and platform knobs (issue 31): storage.zfs_arc, storage.weights,
storage.zfs_dataset (concerns/storage), mem.sysctl (concerns/mem), cpu.boost (cpufreq), pcie.aspm (pcie) and
lxc.shm_memlock (lxcres): their parsers on real inputs (tests/fixtures/realdata/storage, memory; sources in
SOURCES.md there), their evaluators on pve-gpu02's facts (the demo host after the fix: every one passes),
and the fixes that write (the ARC, boost, the sysctls) applied, repeated and rolled back on a scratch tree."""
import copy
import json
import os

import pytest
from ansible.module_utils.pvetune.concerns.storage import checks as storage
from ansible.module_utils.pvetune.concerns.storage import fix as arc_fix
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.formats.proc_text import mount_of, parse_meminfo, parse_memlock, parse_mounts
from ansible.module_utils.pvetune.formats.pve_storage import parse_storage_cfg
from ansible.module_utils.pvetune.formats.zfs_text import parse_arcstats, parse_size, parse_zfs_get, parse_zpool_vdevs
from checkcases import audit_tree, assert_scenario, scenario_id, setv
from modharness import run_module

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(HERE, "..", "fixtures", "realdata")
DEMO = os.path.join(HERE, "..", "..", "demo", "snapshots")
GIB = 1 << 30


def real(*parts):
    with open(os.path.join(REAL, *parts)) as handle:
        return handle.read()


# -- parsers on real inputs ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,c_max,c_min,size", [
    ("arcstats_xruins_mackerel_64g_ram_arc_full.txt", 33676691456, 2104793216, 33743421984),
    ("arcstats_arcbeat_32g_ram_shrunk_to_c_min.txt", 16811368448, 1050710528, 1050849064),
    ("arcstats_esbv_nas02_16g_ram_arc_max_8g_zol065.txt", 8589934592, 1073741824, 50592752),
])
def test_arcstats_of_three_openzfs_generations(name, c_max, c_min, size):
    stats = parse_arcstats(real("storage", name))
    assert (stats["c_max"], stats["c_min"], stats["size"]) == (c_max, c_min, size)


@pytest.mark.parametrize("text,where", [
    ("", "not an SPL kstat"), ("13 1 0x01\nname type data\nc 4 12\nc_max 4 x\n", "arcstats:4: not a"),
    ("13 1 0x01\nNAME TYPE DATA\n", "no 'name type data' header"),
])
def test_malformed_arcstats_name_the_file_and_line(text, where):
    with pytest.raises(ValueError, match=where):
        parse_arcstats(text, "arcstats")


def test_zfs_get_in_the_column_form_of_a_real_proxmox_subvol():
    props = parse_zfs_get(real("storage", "zfs_get_all_pve_subvol_142_EXCERPT_openzfs8673.txt"),
                          ("recordsize", "compression", "mountpoint"))
    assert props == {"rpool/data/subvol-142-disk-0": {"recordsize": "128K",
                                                      "mountpoint": "/rpool/data/subvol-142-disk-0"}}
    zvol = parse_zfs_get(real("storage", "zfs_get_all_pve_zvol_vm103_EXCERPT_openzfs16075.txt"), ("compression",))
    assert zvol == {"rpool/data/vm-103-disk-1": {"compression": "lz4"}}
    assert parse_zfs_get("tank/models\trecordsize\t1048576\tlocal\n", ("recordsize",)) == {
        "tank/models": {"recordsize": "1048576"}}
    with pytest.raises(ValueError, match="zfs get:2: not a '<dataset> <property> <value> <source>' row"):
        parse_zfs_get("a\trecordsize\t1M\tlocal\nbroken\n", ("recordsize",))
    with pytest.raises(ValueError, match="zfs get:1: not a"):
        parse_zfs_get("recordsize is big\n", ("recordsize",))


@pytest.mark.parametrize("text,size", [("128K", 131072), ("1M", 1 << 20), ("1048576", 1 << 20), ("1.50G", 3 << 29),
                                       ("-", None), ("lots", None)])
def test_zfs_sizes(text, size):
    assert parse_size(text) == size


def test_zpool_vdevs_are_the_absolute_paths_under_each_pool():
    # zpool list -v -H -P as OpenZFS prints it (tab-separated; vdev rows indented): the layout of the demo fleet's
    # capture (no public capture of -H -P output was found).
    text = ("rpool\t3.48T\t412G\t3.08T\t-\t-\t3%\t11%\t1.00x\tONLINE\t-\n"
            "\tmirror-0\t3.48T\t412G\t3.08T\t-\t-\t3%\t11.5%\t-\tONLINE\n"
            "\t/dev/disk/by-id/nvme-A-part3\t3.49T\t-\t-\t-\t-\t-\t-\t-\tONLINE\n"
            "\t/dev/nvme1n1p3\t3.49T\t-\t-\t-\t-\t-\t-\t-\tONLINE\n"
            "tank\t13.9T\t4.12T\t9.78T\t-\t-\t2%\t29%\t1.00x\tONLINE\t-\n\t/dev/nvme2n1\t3.49T\t-\n")
    assert parse_zpool_vdevs(text) == {"rpool": ["/dev/disk/by-id/nvme-A-part3", "/dev/nvme1n1p3"],
                                       "tank": ["/dev/nvme2n1"]}
    with pytest.raises(ValueError, match="zpool list:1: a device before any pool"):
        parse_zpool_vdevs("\t/dev/sda\t1T\n")


@pytest.mark.parametrize("name,types", [
    ("storage_cfg_specimen67_dir_lvmthin_nfs_lvm.cfg", {"local": "dir", "local-lvm": "lvmthin", "ISO": "nfs",
                                                        "stockage-vm": "lvm"}),
    ("storage_cfg_lighteness_dir_lvmthin_3zfspool.cfg", None),
    ("storage_cfg_pvedocs_cifs_example_fragment.cfg", {"backup": "cifs"}),
])
def test_real_storage_cfgs_name_their_types(name, types):
    storages, warnings = parse_storage_cfg(real("storage", name))
    assert warnings == []
    if types:
        assert {k: v["type"] for k, v in storages.items()} == types
    else:
        assert sorted(v["type"] for v in storages.values()).count("zfspool") == 3


def test_meminfo_mounts_and_limits():
    info = parse_meminfo(real("memory", "proc_meminfo_duaneya_48g_anonhuge_4g_hugepages_0.txt"))
    assert info["MemTotal"] == 49158852 and info["HugePages_Total"] == 0 and info["Hugepagesize"] == 2048
    with pytest.raises(ValueError, match="line 2: not a '<key>: <number> \\[kB\\]' line"):
        parse_meminfo("MemTotal: 1 kB\nMemFree 2\n")
    mounts = parse_mounts("rpool/ROOT/pve-1 / zfs rw 0 0\nnas:/m /tank/models nfs4 rw,vers=4.2 0 0\n"
                          "a\\040b /mnt/x\\040y ext4 rw 0 0\n")
    assert mount_of("/tank/models/llama", mounts)["fstype"] == "nfs4"
    assert mount_of("/tank/other", mounts)["fstype"] == "zfs"
    assert mounts[2]["source"] == "a b" and mounts[2]["target"] == "/mnt/x y"
    with pytest.raises(ValueError, match="/proc/mounts:1: not a mount line"):
        parse_mounts("rootfs /\n")
    assert parse_memlock("Max locked memory         8388608              8388608              bytes\n") == (
        8388608, 8388608)
    assert parse_memlock("Max locked memory         unlimited            unlimited            bytes\n") == (None, None)
    with pytest.raises(ValueError, match="limits: no 'Max locked memory' row"):
        parse_memlock("Max open files 1024 1024 files\n")


@pytest.mark.parametrize("name,active", [("nvme_queue_scheduler_bfq_selected_liquorix50.txt", "bfq"),
                                         ("nvme_queue_scheduler_none_selected_liquorix50.txt", "none"),
                                         ("nvme_queue_scheduler_none_bfq_trailing_space_lucjan3.txt", "none")])
def test_the_active_scheduler_of_real_queue_files(name, active):
    raw = real("storage", name).strip()
    disks = {"disks": {"nvme0n1": {"scheduler": raw, "read_ahead_kb": "4096", "zfs_vdev": False, "nvme": "nvme0"}},
             "nvme": {"nvme0": {}}}
    problems = storage.disk_problems(disks, "nvme0n1", {"storage_read_ahead_kb": 4096})
    assert problems == ([] if active == "none" else ["nvme0n1 uses the bfq scheduler, not none"])


def test_a_real_nvme_below_its_link():
    speed, width = real("storage", "nvme_sysfs_current_link_speed_width_nvmecli1695.txt").split("\n")[:2]
    disks = {"disks": {"nvme0n1": {"scheduler": "[none]", "read_ahead_kb": "128", "zfs_vdev": True, "nvme": "nvme0"}},
             "nvme": {"nvme0": {"current_link_speed": speed, "max_link_speed": "16.0 GT/s PCIe",
                                "current_link_width": width, "max_link_width": "4"}}}
    assert storage.disk_problems(disks, "nvme0n1", {"storage_read_ahead_kb": 4096}) == [
        "nvme0 runs at 8.0 GT/s PCIe x4 of 16.0 GT/s PCIe x4"]


# -- evaluators on pve-gpu02's facts --------------------------------------------------------------------------------
_GOOD = {}


def good_facts():
    """pve-gpu02 (the demo host after the fix) gathered once: every check of this file passes on it."""
    if not _GOOD:
        _GOOD["facts"] = audit_tree(os.path.abspath(os.path.join(DEMO, "pve-gpu02")), as_returned=True)[0]
    return copy.deepcopy(_GOOD["facts"])


def _volume(key):
    def apply(facts):
        return next(v for v in facts["storage"]["volumes"] if (v["ctid"], v["key"]) == key)
    return apply


def vol(key, **values):
    return lambda facts: _volume(key)(facts).update(values)


def first_policy_boost(value):
    def apply(facts):
        files = facts["cpu"]["boost"]["files"]
        files[0] = [files[0][0], value, files[0][2]]
    return apply


def aspm_on(facts):
    facts["pci"]["functions"][3]["lnkctl_aspm"] = "L1"


SCENARIOS = [
    # -- storage.zfs_arc ---------------------------------------------------------------------------------------------
    ("storage.zfs_arc", "pass", [], None, "the ARC is capped at 16.0 GiB", False),
    ("storage.zfs_arc", "fail", [setv(("zfs", "params", "zfs_arc_max"), 16 * GIB), setv(("zfs", "configured"), {}),
                                 setv(("zfs", "arcstats", "c_max"), 384 * GIB)], None,
     "zfs_arc_max is 16.0 GiB but the ARC's c_max is 384.0 GiB: the cap is ignored (a zfs_arc_max written at "
     "runtime applies only above c_min, 8.0 GiB) and no modprobe.d file sets it for the next boot", False),
    ("storage.zfs_arc", "pending", [setv(("zfs", "params", "zfs_arc_max"), 0),
                                    setv(("zfs", "arcstats", "c_max"), 384 * GIB)], None,
     "/etc/modprobe.d/zfs.conf sets zfs_arc_max=16.0 GiB, the loaded module runs with c_max 384.0 GiB", True),
    ("storage.zfs_arc", "fail", [setv(("zfs", "params", "zfs_arc_max"), 0), setv(("zfs", "configured"), {}),
                                 setv(("zfs", "arcstats", "c_max"), 576 * GIB)], None,
     "the ARC may grow to 576.0 GiB while running CTs are promised 384.0 GiB of 768.0 GiB RAM", False),
    ("storage.zfs_arc", "warn", [], {"zfs_arc_max": 8192}, "more than the 8.0 GiB the policy allows", False),
    ("storage.zfs_arc", "warn", [setv(("ct_runtime", "cts", 0, "cgroup", "memory.max"), str(760 << 30))], None,
     "the ARC is capped at 16.0 GiB, but running CTs are promised 760.0 GiB of 768.0 GiB RAM: memory is "
     "overcommitted without it", False),
    ("storage.zfs_arc", "skip", [setv(("zfs", "loaded"), False)], None, "the zfs module is not loaded", False),
    ("storage.zfs_arc", "error", [setv(("zfs", "errors"), ["/proc/spl/kstat/zfs/arcstats:3: not a row"])], None,
     "/proc/spl/kstat/zfs/arcstats:3: not a row", False),
    ("storage.zfs_arc", "error", [setv(("memory",), {"error": "/proc/meminfo:1: not a line"})], None,
     "/proc/meminfo:1: not a line", False),
    # -- storage.weights ---------------------------------------------------------------------------------------------
    ("storage.weights", "pass", [], None, "every GPU CT volume is local", False),
    ("storage.weights", "warn", [vol(("101", "mp0"), fstype="nfs4", source="nas01:/export/models")], None,
     "CT 101 mp0 /models: on network storage (nfs4, nas01:/export/models)", False),
    ("storage.weights", "warn", [lambda f: [fn.update(numa_node=0) for fn in f["pci"]["functions"]]], None,
     "nvme3 is on NUMA node 1, where no GPU is: its reads cross the socket link", False),
    ("storage.weights", "warn", [setv(("storage", "nvme", "nvme3", "current_link_width"), "2")], None,
     "nvme3 runs at 16.0 GT/s PCIe x2 of 16.0 GT/s PCIe x4", False),
    ("storage.weights", "warn", [vol(("101", "mp0"), disks=["sda"]),
                                 setv(("storage", "disks", "sda"), {"scheduler": "mq-deadline [bfq] none",
                                                                     "read_ahead_kb": "128", "zfs_vdev": False,
                                                                     "nvme": None})], None,
     "sda reads ahead 128 KiB, less than 4096", False),
    ("storage.weights", "pass", [vol(("101", "mp0"), type=None, storage="gone", disks=[],
                                     why="storage gone is not in /etc/pve/storage.cfg")], None,
     "every GPU CT volume is local", False),
    ("storage.weights", "skip", [setv(("storage", "volumes"), [])], None, "no GPU CT with a volume", False),
    ("storage.weights", "error", [setv(("storage", "mounts_error"), "/proc/mounts:4: not a mount line")], None,
     "/proc/mounts:4: not a mount line", False),
    ("storage.weights", "error", [setv(("storage",), {"error": "/etc/pve/storage.cfg: Permission denied"})], None,
     "/etc/pve/storage.cfg: Permission denied", False),
    # -- storage.zfs_dataset -----------------------------------------------------------------------------------------
    ("storage.zfs_dataset", "pass", [], None, "the GPU CTs' datasets suit large sequential reads", False),
    ("storage.zfs_dataset", "warn", [setv(("zfs", "datasets", "tank/models", "recordsize"), "131072")], None,
     "recordsize 128K < 1M: large sequential reads of weights take many small records; a new recordsize applies "
     "to files written after the change only", False),
    ("storage.zfs_dataset", "warn", [setv(("zfs", "datasets", "tank/models", "compression"), "gzip-9")], None,
     "compression gzip-9 costs CPU on every read", False),
    ("storage.zfs_dataset", "pass", [setv(("zfs", "datasets", "tank/models", "recordsize"), "131072")],
     {"zfs_recordsize": 128}, "suit large sequential reads", False),
    ("storage.zfs_dataset", "skip", [vol(("101", "mp0"), dataset=None)], None, "no GPU CT mount point is a ZFS "
     "dataset", False),
    ("storage.zfs_dataset", "skip", [setv(("zfs", "datasets"), None), setv(("zfs", "datasets_reason"),
                                                                         "zfs not installed")], None,
     "dataset properties not read: zfs not installed", False),
    ("storage.zfs_dataset", "error", [setv(("lxc",), {"error": "/proc/devices: No such file or directory"})], None,
     "/proc/devices: No such file or directory", False),
    # -- mem.sysctl --------------------------------------------------------------------------------------------------
    ("mem.sysctl", "pass", [], None, "swappiness 10 and zone_reclaim_mode 0, persisted", False),
    ("mem.sysctl", "fail", [setv(("sysctl", "vm.swappiness", "runtime"), "60")], None,
     "vm.swappiness: swappiness is 60 at runtime, not 10, although 10 is persisted", False),
    ("mem.sysctl", "fail", [setv(("sysctl", "vm.swappiness", "persisted"), None)], None,
     "swappiness is 10 now but not persisted", False),
    ("mem.sysctl", "pass", [setv(("sysctl", "vm.zone_reclaim_mode", "persisted"), None)], None,
     "swappiness 10 and zone_reclaim_mode 0", False),
    ("mem.sysctl", "warn", [setv(("memory", "pools"), [{"size_kb": 1048576, "total": 64, "free": 64}])], None,
     "hugepages-1048576kB: 64.0 GiB reserved as 1 GiB huge pages and none in use", False),
    ("mem.sysctl", "skip", [setv(("sysctl", "vm.swappiness", "runtime"), None),
                            setv(("sysctl", "vm.zone_reclaim_mode", "runtime"), None)], None,
     "the kernel has neither vm.swappiness nor vm.zone_reclaim_mode", False),
    ("mem.sysctl", "error", [setv(("sysctl",), {"error": "/etc/sysctl.d: Permission denied"})], None,
     "/etc/sysctl.d: Permission denied", False),
    # -- cpu.boost ---------------------------------------------------------------------------------------------------
    ("cpu.boost", "pass", [], None, "boost is on; prefcore enabled", False),
    ("cpu.boost", "fail", [first_policy_boost("0")], None,
     "boost is off on 1 of 128 (/sys/devices/system/cpu/cpufreq/policy0/boost): the cores stay at their base clock",
     False),
    ("cpu.boost", "skip", [first_policy_boost("0")], {"cpu_boost": False}, "cpu_boost is off in the policy", False),
    ("cpu.boost", "skip", [setv(("cpu", "boost", "files"), [])], None, "no boost control", False),
    ("cpu.boost", "error", [setv(("cpu",), {"error": "/proc/cpuinfo: No such file or directory"})], None,
     "/proc/cpuinfo: No such file or directory", False),
    # -- pcie.aspm ---------------------------------------------------------------------------------------------------
    ("pcie.aspm", "pass", [], None, "ASPM is off on every GPU link", False),
    ("pcie.aspm", "fail", [aspm_on], None, "ASPM L1 enabled on the link to 0000:60:01.1 (LnkCtl)", False),
    ("pcie.aspm", "fail", [aspm_on], {"pcie_aspm_fix": True}, "ASPM L1 enabled", True),
    ("pcie.aspm", "pending", [aspm_on, setv(("boot", "configured_args"), ["pcie_aspm.policy=performance"])],
     {"pcie_aspm_fix": True}, "pcie_aspm.policy=performance is configured for the next boot", True),
    ("pcie.aspm", "skip", [aspm_on], {"pcie_aspm": "any"}, "pcie_aspm is any in the policy", False),
    ("pcie.aspm", "skip", [setv(("pci", "functions"), [])], None, "no NVIDIA GPU found", False),
    ("pcie.aspm", "error", [setv(("pci", "functions", 0, "lnkctl_aspm"), None)], None,
     "no PCI Express capability read from", False),
    # -- lxc.shm_memlock ---------------------------------------------------------------------------------------------
    ("lxc.shm_memlock", "pass", [], None, "every running GPU CT has enough /dev/shm", False),
    ("lxc.shm_memlock", "warn", [setv(("ct_runtime", "cts", 0, "memlock"), {"soft": 8 << 20, "hard": 8 << 20})],
     None, "CT 101: its init may lock 8 MiB of memory (soft limit); add to /etc/pve/lxc/101.conf and restart it: "
     "lxc.prlimit.memlock: unlimited", False),
    ("lxc.shm_memlock", "warn", [setv(("ct_runtime", "cts", 0, "shm"), {"size": 64 << 20, "raw": "65536k"})], None,
     "/dev/shm is 64 MiB, less than 1024 MiB; add to /etc/pve/lxc/101.conf and restart it: lxc.mount.entry: tmpfs "
     "dev/shm tmpfs rw,nosuid,nodev,size=1024m,create=dir 0 0", False),
    ("lxc.shm_memlock", "pass", [setv(("ct_runtime", "cts", 0, "memlock"), {"soft": 8 << 20, "hard": 8 << 20})],
     {"lxc_memlock_unlimited": False}, "every running GPU CT", False),
    ("lxc.shm_memlock", "warn", [setv(("ct_runtime", "cts", 0, "shm"), {"size": None, "missing": True})], None,
     "CT 101: no /dev/shm is mounted (an init that mounts none): NCCL cannot create its segments", False),
    ("lxc.shm_memlock", "skip", [setv(("ct_runtime", "cts"), [])], None, "no CT config passes NVIDIA devices", False),
    ("lxc.shm_memlock", "error", [setv(("ct_runtime", "cts", 0, "memlock"), {"error": "/proc/4127/limits: "
                                                                              "Permission denied"})], None,
     "CT 101: /proc/4127/limits: Permission denied", False),
    ("lxc.shm_memlock", "error", [setv(("ct_runtime",), {"error": "TypeError: boom"})], None, "TypeError: boom",
     False),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario_id(s) for s in SCENARIOS])
def test_scenario(scenario):
    assert_scenario(good_facts(), scenario)


# -- the readers on the demo trees -----------------------------------------------------------------------------------
def test_gpu02_volumes_resolve_to_their_pools_nvme():
    facts = good_facts()
    vols = {(v["ctid"], v["key"]): v for v in facts["storage"]["volumes"]}
    assert vols[("101", "rootfs")]["dataset"] == "rpool/data/subvol-101-disk-0"
    assert vols[("101", "rootfs")]["disks"] == ["nvme0n1", "nvme1n1"]    # by-id links -> partitions -> disks
    assert vols[("101", "mp0")]["type"] == "bind" and vols[("101", "mp0")]["dataset"] == "tank/models"
    assert vols[("101", "mp0")]["disks"] == ["nvme2n1", "nvme3n1", "nvme4n1", "nvme5n1"]
    assert all(d["zfs_vdev"] for d in facts["storage"]["disks"].values())
    assert facts["zfs"]["arcstats"]["c_max"] == 16 * GIB and facts["memory"]["meminfo"]["MemTotal"] == 768 << 20


def test_lxcres_reads_storage_cfg_through_the_storage_reader():
    facts = good_facts()
    assert facts["storage"]["storages"]["local-zfs"] == {"type": "zfspool", "pool": "rpool/data", "sparse": "",
                                                         "content": "images,rootdir"}
    ct103 = next(c for c in facts["ct_runtime"]["cts"] if c["ctid"] == "103")
    assert ct103["libs"]["root"] == "/rpool/data/subvol-103-disk-0"


# -- the fixes that write --------------------------------------------------------------------------------------------
def _scratch(tmp_path, host, full=False):
    from test_lxcfix import scratch
    return scratch(tmp_path, host=host, full=full)


def _read(tree, path):
    with open(os.path.join(str(tree), path.lstrip("/"))) as handle:
        return handle.read()


def test_arc_fix_writes_min_first_then_max_is_idempotent_and_rolls_back(tmp_path):
    """pve-gpu01: 512 GiB, c_min 16 GiB, a runtime zfs_arc_max of 16 GiB that ZFS ignored. The fix writes
    zfs_arc_min 8 GiB before zfs_arc_max 16 GiB (a maximum not above the minimum would be ignored again)."""
    from test_lxcfix import calls, reset_calls
    tree = _scratch(tmp_path, "pve-gpu01")
    reset_calls(tree)
    args = {"root": str(tree), "run_id": "20261205T010000Z", "arc_max": "auto"}
    check = run_module("pvetune_zfs_arc", args, check_mode=True, diff=True)
    assert check["changed"] and not os.path.exists(os.path.join(str(tree), arc_fix.CONF.lstrip("/")))
    assert [r["key"] for r in check["changes"]["runtime"]] == ["zfs:zfs_arc_min"]   # max already reads 16 GiB
    done = run_module("pvetune_zfs_arc", args)
    assert not done.get("failed"), done
    assert (done["arc_max"], done["arc_min"]) == (16 * GIB, 8 * GIB)
    # a tree has no kernel to move the ARC's c_max: the file applies at the next zfs load, and the audit says so
    assert done["reboot_required"] is True and "kept c_max" in done["msg"]
    res = audit_tree(str(tree))[1]["storage.zfs_arc"]
    assert res["status"] == "pending" and "zz-pvetune-zfs.conf sets zfs_arc_max=16.0 GiB" in res["message"]
    assert _read(tree, arc_fix.CONF).endswith("options zfs zfs_arc_min=%d zfs_arc_max=%d\n" % (8 * GIB, 16 * GIB))
    assert _read(tree, "/sys/module/zfs/parameters/zfs_arc_min") == "%d\n" % (8 * GIB)
    assert calls(tree) == []          # / is ext4 on pve-gpu01: no initramfs to regenerate
    again = run_module("pvetune_zfs_arc", args)
    assert again["changed"] is False
    back = run_module("pvetune_rollback", {"root": str(tree)})
    assert not back.get("failed"), back
    assert not os.path.exists(os.path.join(str(tree), arc_fix.CONF.lstrip("/")))
    assert _read(tree, "/sys/module/zfs/parameters/zfs_arc_min") == "0\n"


def test_arc_fix_with_root_on_zfs_regenerates_the_initramfs_and_refuses_a_later_file(tmp_path):
    from test_lxcfix import calls, reset_calls
    tree = _scratch(tmp_path, "pve-gpu02")
    reset_calls(tree)
    done = run_module("pvetune_zfs_arc", {"root": str(tree), "run_id": "20261205T010100Z", "arc_max": 32768})
    assert not done.get("failed"), done
    # 768 GiB: ZFS's default minimum (24 GiB) is below 32 GiB, so only the maximum is set, now and in the file
    assert done["arc_min"] is None and [r["key"] for r in done["changes"]["runtime"]] == ["zfs:zfs_arc_max"]
    assert calls(tree) == [["update-initramfs", "-u", "-k", "all"]]
    image = _read(tree, "/boot/initrd.img-6.14.8-2-pve.modprobe.d")
    assert image.endswith("options zfs zfs_arc_max=%d\n" % (32 * GIB))
    back = run_module("pvetune_rollback", {"root": str(tree)})
    assert not back.get("failed"), back
    assert calls(tree)[-1] == ["update-initramfs", "-u", "-k", "all"]
    assert "zz-pvetune" not in _read(tree, "/boot/initrd.img-6.14.8-2-pve.modprobe.d")
    with open(os.path.join(str(tree), "etc/modprobe.d/zzz-local.conf"), "w") as handle:
        handle.write("options zfs zfs_arc_max=1073741824\n")
    refused = run_module("pvetune_zfs_arc", {"root": str(tree), "arc_max": "auto"})
    assert refused["failed"] and "/etc/modprobe.d/zzz-local.conf sets zfs_arc_max=1073741824 after" in refused["msg"]
    bad = run_module("pvetune_zfs_arc", {"root": str(tree), "arc_max": "16G"})
    assert bad["failed"] and bad["msg"] == "arc_max: must be auto or MiB, an integer from 64 to 16777216"


def test_boost_fix_turns_the_global_boost_on_now_and_at_boot_and_rolls_back(tmp_path):
    from ansible.module_utils.pvetune.concerns.cpufreq import fix as cpufreq_fix
    tree = _scratch(tmp_path, "pve-gpu01", full=True)     # with /sys/devices/system (the CPUs)
    boost = "/sys/devices/system/cpu/cpufreq/boost"
    assert _read(tree, boost) == "0\n"
    args = {"root": str(tree), "run_id": "20261205T010200Z", "boost": True}
    check = run_module("pvetune_cpufreq", args, check_mode=True, diff=True)
    assert check["changed"] and _read(tree, boost) == "0\n" and "cpufreq:boost = 0" in check["diff"][0]["before"]
    done = run_module("pvetune_cpufreq", args)
    assert not done.get("failed"), done
    assert _read(tree, boost) == "1\n" and "boost 0 -> 1 on 1 file(s)" in " ".join(done["messages"])
    assert run_module("pvetune_cpufreq", args)["changed"] is False
    with open(os.path.join(str(tree), boost.lstrip("/")), "w") as handle:
        handle.write("0\n")                                   # the firmware's default after a reboot
    ok, messages = cpufreq_fix.boot_apply(FsRoot(str(tree)), None, {"boost": True})
    assert ok and _read(tree, boost) == "1\n", messages
    back = run_module("pvetune_rollback", {"root": str(tree)})
    assert not back.get("failed"), back
    assert _read(tree, boost) == "0\n"


def test_sysctl_fix_persists_swappiness_and_zone_reclaim_beside_numa_balancing(tmp_path):
    tree = _scratch(tmp_path, "pve-gpu01")
    settings = {"kernel.numa_balancing": 0, "vm.swappiness": 10, "vm.zone_reclaim_mode": 0}
    done = run_module("pvetune_sysctl", {"root": str(tree), "run_id": "20261205T010300Z", "settings": settings})
    assert not done.get("failed"), done
    assert _read(tree, "/proc/sys/vm/swappiness") == "10\n"
    assert "vm.swappiness = 10\nvm.zone_reclaim_mode = 0\n" in _read(tree, "/etc/sysctl.d/90-pvetune.conf")
    _facts, res = audit_tree(str(tree))
    assert res["mem.sysctl"]["status"] == "pass" and res["kernel.numa_balancing"]["status"] == "pass"
    with open(os.path.join(str(tree), "var/lib/pvetune/manifest.json")) as handle:
        assert json.load(handle)["runtime"]["sysctl:vm.swappiness"]["original"] == "60"
    back = run_module("pvetune_rollback", {"root": str(tree)})
    assert not back.get("failed"), back
    assert _read(tree, "/proc/sys/vm/swappiness") == "60\n"


def test_the_zfs_commands_wait_for_a_gpu_ct():
    """zfs get and zpool list serve only the GPU CTs' volumes: without one, the reader reads neither (on a live host
    it runs neither command; here, on a snapshot, it reads neither capture)."""
    from ansible.module_utils.pvetune.audit import Context

    facts = good_facts()
    root = FsRoot(os.path.abspath(os.path.join(DEMO, "pve-gpu02")))
    with_cts = storage.read_zfs(Context(root, None, None, facts))
    assert with_cts["datasets"] and with_cts["vdevs"] and with_cts["vdevs_reason"] is None
    facts["lxc"]["cts"] = [dict(ct, passes_nvidia=False) for ct in facts["lxc"]["cts"]]
    without = storage.read_zfs(Context(root, None, None, facts))
    assert (without["datasets"], without["vdevs"], without["datasets_reason"]) == (None, None, "no GPU CT")
    assert without["arcstats"]["c_max"] == 16 * GIB          # the ARC is still read: storage.zfs_arc needs no CT
