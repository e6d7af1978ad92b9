"""The CT and NVIDIA side of the audit: numa.gpu_locality, lxc.resources (configured against effective, and the
lxc_numa_pin fix), nvidia.stack (module flavour and branch for the GPU generation, host <-> CT user-space driver) and
kernel.known_issues, on the demo fleet, on trees changed for each case and on real /proc files.
"""
import os
import shutil
import sys

import pytest
from ansible.module_utils.pvetune.concerns.lxcgpu import fix as lxcgpu_fix
from ansible.module_utils.pvetune.concerns.lxcres import checks as lxcres
from ansible.module_utils.pvetune.concerns.nvidia import checks as nvidia
from ansible.module_utils.pvetune.concerns.numa.topology import read_nodes
from ansible.module_utils.pvetune.core.changeset import ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.policy import merge_policy
from ansible.module_utils.pvetune.core.runner import Runner
from ansible.module_utils.pvetune.formats import cgroup_files as cg
from ansible.module_utils.pvetune.formats import pve_storage
from ansible.module_utils.pvetune.tables import kernel_issues, nvidia_generations

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import demo_cts  # noqa: E402
from checkcases import audit_tree  # noqa: E402
from modharness import run_module  # noqa: E402
DEMO = os.path.join(TOP, "demo", "snapshots")
REAL = os.path.join(TOP, "tests", "fixtures", "realdata")
LXC = "etc/pve/nodes/%s/lxc/%s.conf"
LXC_PATH = "/" + LXC


def real(*parts):
    with open(os.path.join(REAL, *parts)) as handle:
        return handle.read()


def copy_host(tmp_path, host):
    dest = tmp_path / host
    shutil.copytree(os.path.join(DEMO, host), str(dest), symlinks=True)
    return dest


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    path.write_text(text)


def audit(root, overrides=None):
    return audit_tree(root, merge_policy(overrides or {}), as_returned=True)[1]


def item(result, name):
    return next(i for i in result["items"] if i["name"] == name)


# -- numa.gpu_locality --------------------------------------------------------------------------------------------
def test_demo_nodes_sockets_and_locality():
    nodes, errors = read_nodes(FsRoot(os.path.join(DEMO, "pve-gpu01")))
    assert errors == [] and sorted(nodes) == [0, 1]
    assert (nodes[0]["socket"], nodes[1]["socket"]) == (0, 1) and len(nodes[0]["cpus"]) == 64
    res = audit(os.path.join(DEMO, "pve-gpu01"))["numa.gpu_locality"]
    assert res["status"] == "pass" and res["current"] == "node 0: 4 GPUs, node 1: 4 GPUs"
    assert "socket 0: node 0 (1 per socket, NPS1 on EPYC)" in res["evidence"]


def test_gpu_without_numa_node_on_a_two_node_host_warns_naming_the_firmware(tmp_path):
    root = copy_host(tmp_path, "pve-gpu01")
    write(root, "sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/numa_node", "-1\n")
    res = audit(root)["numa.gpu_locality"]
    assert res["status"] == "warn" and "0000:41:00.0" in res["message"]
    assert "ACPI SRAT/_PXM" in item(res, "0000:41:00.0")["message"]


def test_one_node_host_with_numa_node_minus_one_passes(tmp_path):
    root = copy_host(tmp_path, "pve-gpu01")
    shutil.rmtree(str(root / "sys/devices/system/node/node1"))
    write(root, "sys/devices/system/node/node0/cpulist", "0-127\n")
    for dev in (root / "sys/devices").glob("pci*/**/numa_node"):
        dev.write_text("-1\n")
    res = audit(root)["numa.gpu_locality"]
    assert res["status"] == "pass" and res["message"].startswith("one NUMA node")


def test_malformed_node_cpulist_is_an_error_naming_the_file(tmp_path):
    root = copy_host(tmp_path, "pve-gpu01")
    write(root, "sys/devices/system/node/node1/cpulist", "32-x\n")
    res = audit(root)["numa.gpu_locality"]
    assert res["status"] == "error" and "/sys/devices/system/node/node1/cpulist" in res["message"]


# -- cgroup files, storage.cfg ------------------------------------------------------------------------------------
def test_cgroup_file_parsers():
    assert cg.parse_cpu_max("max 100000") == (None, 100000)
    assert cg.parse_cpu_max("800000 100000") == (800000, 100000)
    assert cg.cpu_quota_cpus(800000, 100000) == 8.0
    assert cg.parse_bytes_limit("max") is None and cg.parse_bytes_limit("68719476736") == 64 << 30
    assert cg.parse_v1_limit("9223372036854771712") is None and cg.parse_v1_limit("1073741824") == 1 << 30
    assert cg.parse_v1_quota("-1", "100000") == (None, 100000)
    for bad in ("", "max max", "-5 100000", "1 0", "eight 100000"):
        with pytest.raises(ValueError):
            cg.parse_cpu_max(bad)
    for bad in ("-1", "12k", "max\n1"):
        with pytest.raises(ValueError):
            cg.parse_bytes_limit(bad)
    assert cg.pve_number("1.5") == 1.5 and cg.pve_number("16", int) == 16
    for bad in ("1.5", "-2", "16 cores", ""):
        with pytest.raises(ValueError):
            cg.pve_number(bad, int)


# The demo's storage.cfg (scripts/demo_cts.py) and two more storages.
STORAGE = demo_cts.STORAGE_CFG + """
zfspool: tank
\tpool tank/ct
\tmountpoint /mnt/tank-ct

lvmthin: local-lvm
\tthinpool data
\tvgname pve
"""


@pytest.mark.parametrize("rootfs, want", [
    ("local-zfs:subvol-101-disk-0,size=8G", ("/rpool/data/subvol-101-disk-0", None)),
    ("tank:subvol-101-disk-0", ("/mnt/tank-ct/subvol-101-disk-0", None)),
    ("local:101/subvol-101-disk-0.subvol,size=0T", ("/var/lib/vz/images/101/subvol-101-disk-0.subvol", None)),
    ("/srv/ct/101", ("/srv/ct/101", None)),
    ("local:101/vm-101-disk-0.raw,size=8G", (None, "image file")),
    ("local-zfs:vm-101-disk-0", (None, "zvol")),
    ("local-lvm:vm-101-disk-0,size=8G", (None, "block device")),
    ("nowhere:subvol-101-disk-0", (None, "not in /etc/pve/storage.cfg")),
    ("local-zfs:../../etc", (None, "is not <storage>:<volume>")),
])
def test_rootfs_dir_as_pve_storage_lays_volumes_out(rootfs, want):
    storages, warnings = pve_storage.parse_storage_cfg(STORAGE)
    assert warnings == []
    got = pve_storage.rootfs_dir(rootfs, storages)
    assert got[0] == want[0]
    assert (got[1] is None) == (want[1] is None) and (want[1] is None or want[1] in got[1])


# -- lxc.resources ------------------------------------------------------------------------------------------------
def test_case_ct_fails_with_configured_effective_and_what_to_set():
    res = audit(os.path.join(DEMO, "pve-gpu01"))["lxc.resources"]
    ct = item(res, "CT 101")
    assert res["status"] == "fail" and ct["status"] == "fail"
    for text in ("16 CPUs (cores 16, effective cpuset 0-7,64-71) for 8 GPUs: set cores: 32 or more",
                 "cpulimit 8, effective 8 CPUs: remove cpulimit",
                 "memory 65536 MiB (effective 65536 MiB) for 8 GPUs: set memory: 131072 or more",
                 "CPUs 0-7,64-71 (node 0), none on node 1 of its GPUs: set lxc.cgroup2.cpuset.cpus: 0-127"):
        assert text in ct["message"], text
    assert "effective CPUs 0-7,64-71, quota 8, memory.max 65536 MiB, swap.max 0 MiB" in ct["current"]
    assert "swap" not in ct["message"]


def test_only_what_the_pin_fixes_is_in_the_fix_tags_scope(tmp_path):
    # pve-gpu01's CT 101: cores, quota and memory are the operator's; fix.yml --tags lxc must not answer for them
    # (its audit gate, the reports' fix command).
    assert audit(os.path.join(DEMO, "pve-gpu01"))["lxc.resources"]["fix_tag"] == ""
    gpu04 = os.path.join(DEMO, "pve-gpu04")
    assert audit(gpu04)["lxc.resources"]["fix_tag"] == ""                         # lxc_numa_pin is off
    assert audit(gpu04, {"lxc_numa_pin": True})["lxc.resources"]["fix_tag"] == "lxc"   # CT 104: the pin alone


def test_fixed_host_passes_running_and_stopped_cts():
    res = audit(os.path.join(DEMO, "pve-gpu02"))["lxc.resources"]
    assert res["status"] == "pass" and [i["name"] for i in res["items"]] == ["CT 101", "CT 103"]
    assert item(res, "CT 103")["current"].endswith("not running")


def test_ct_pinned_to_the_wrong_node_fails():
    res = audit(os.path.join(DEMO, "pve-gpu04"))["lxc.resources"]
    assert item(res, "CT 101")["status"] == "pass" and item(res, "CT 105")["status"] == "pass"
    assert item(res, "CT 104")["message"] == ("CPUs 32-63,96-127 (node 1), none on its GPUs' node 0: set "
                                              "lxc.cgroup2.cpuset.cpus: 0-31,64-95 (the CPUs of node 0)")


def test_missing_swap_key_means_no_swap_and_pct_create_s_512_fails(tmp_path):
    root = copy_host(tmp_path, "pve-gpu02")
    conf = root / (LXC % ("pve-gpu02", 103))
    conf.write_text(conf.read_text().replace("swap: 0\n", ""))
    assert item(audit(root)["lxc.resources"], "CT 103")["status"] == "pass"     # LXC.pm: swap // 0
    conf.write_text(conf.read_text().replace("unprivileged: 1\n", "swap: 512\nunprivileged: 1\n"))
    msg = item(audit(root)["lxc.resources"], "CT 103")["message"]
    assert msg == "swap 512 MiB (effective not running): set swap: 0"


def test_cgroup_v1_host_reads_the_controller_directories(tmp_path):
    root = copy_host(tmp_path, "pve-gpu01")
    (root / "sys/fs/cgroup/cgroup.controllers").unlink()
    shutil.rmtree(str(root / "sys/fs/cgroup/lxc"))
    for rel, value in (("cpuset/lxc/101/cpuset.effective_cpus", "0-31,64-95"), ("cpuset/lxc/101/cpuset.cpus", ""),
                       ("cpu/lxc/101/cpu.cfs_quota_us", "-1"), ("cpu/lxc/101/cpu.cfs_period_us", "100000"),
                       ("memory/lxc/101/memory.limit_in_bytes", "68719476736"),
                       ("memory/lxc/101/memory.memsw.limit_in_bytes", "77309411328"),   # 8 GiB of swap
                       ("cpuset/lxc/101/ns/init.scope/cgroup.procs", "4127"), ("devices/devices.list", "a *:* rwm")):
        write(root, "sys/fs/cgroup/" + rel, value + "\n")
    ct = item(audit(root)["lxc.resources"], "CT 101")
    assert "effective CPUs 0-31,64-95, quota max, memory.max 65536 MiB, swap.max 8192 MiB" in ct["current"]
    assert "effective none" in ct["message"]      # the config's cpulimit, not applied in this cgroup


@pytest.mark.parametrize("rel, text, where", [
    ("sys/fs/cgroup/lxc/101/cpu.max", "eight 100000\n", "/sys/fs/cgroup/lxc/101/cpu.max"),
    ("sys/fs/cgroup/lxc/101/cpuset.cpus.effective", "0-7,x\n", "/sys/fs/cgroup/lxc/101/cpuset.cpus.effective"),
])
def test_malformed_cgroup_files_are_errors_naming_the_file(tmp_path, rel, text, where):
    root = copy_host(tmp_path, "pve-gpu02")
    write(root, rel, text)
    res = audit(root)["lxc.resources"]
    assert res["status"] == "error" and where in item(res, "CT 101")["message"]


def test_malformed_ct_config_value_is_an_error_naming_the_config(tmp_path):
    root = copy_host(tmp_path, "pve-gpu02")
    conf = root / (LXC % ("pve-gpu02", 101))
    conf.write_text(conf.read_text().replace("cores: 48\n", "cores: many\n", 1))
    res = audit(root)["lxc.resources"]
    assert res["status"] == "error" and "/etc/pve/lxc/101.conf: cores" in item(res, "CT 101")["message"]


def test_init_pid_is_the_process_whose_nspid_is_pid_and_1(tmp_path):
    # The real line of a shell two PID namespaces deep (a container inside the CT): innermost id 1, but not the
    # CT's init.
    nested = real("nvidia_proc", "proc-pid-status-nspid-line-nested-3level.txt")
    write(tmp_path, "sys/fs/cgroup/lxc/200/ns/cgroup.procs", "11655\n11600\n11700\n")
    write(tmp_path, "proc/11655/status", "Name:\tbash\n" + nested)
    write(tmp_path, "proc/11600/status", "Name:\tbash\nNSpid:\t11600\t7\n")
    write(tmp_path, "proc/11700/status", "Name:\tinit\nNSpid:\t11700\t1\n")
    assert lxcres.find_init_pid(FsRoot(str(tmp_path)), "/sys/fs/cgroup/lxc/200") == 11700
    write(tmp_path, "proc/11700/status", "Name:\tinit\nPid:\t11700\n")     # no NSpid line: not told
    assert lxcres.find_init_pid(FsRoot(str(tmp_path)), "/sys/fs/cgroup/lxc/200") is None
    write(tmp_path, "proc/11700/status", "Name:\tinit\nNSpid:\tx\t1\n")    # not this process's own id
    assert lxcres.find_init_pid(FsRoot(str(tmp_path)), "/sys/fs/cgroup/lxc/200") is None


def test_a_version_file_without_its_nvrm_line_is_an_error_naming_it_not_an_unloaded_driver(tmp_path):
    root = copy_host(tmp_path, "pve-gpu02")
    write(root, "proc/driver/nvidia/version", "garbage\n")
    res = audit(root)["nvidia.driver"]
    assert res["status"] == "error" and "/proc/driver/nvidia/version: no NVRM version line" in res["message"]


# -- lxc_numa_pin -------------------------------------------------------------------------------------------------
def run_lxc_fix(root, check_mode=False, pin=True):
    fs = FsRoot(str(root))
    opts = lxcgpu_fix.validate_options({"ctids": [], "restart": False, "restart_timeout": 120,
                                        "cgroup_version": "auto", "fail_on_refused": True, "numa_pin": pin})
    result, error, _warnings = lxcgpu_fix.run_fix(fs, Runner(fs, None), ChangeSet(fs, check_mode=check_mode,
                                                                                    run_id="pin-test"),
                                                  opts, check_mode, True)
    assert error is None
    return {c["ctid"]: c for c in result["cts"]}, result


def test_numa_pin_rewrites_only_the_cpuset_line_in_place_then_changes_nothing(tmp_path):
    root = copy_host(tmp_path, "pve-gpu04")
    conf = root / (LXC % ("pve-gpu04", 104))
    before = conf.read_bytes()
    others = {p: p.read_bytes() for p in (root / "etc/pve/nodes/pve-gpu04/lxc").iterdir() if p != conf}
    cts, result = run_lxc_fix(root, check_mode=True)
    assert cts[104]["lines"] == ["-12: lxc.cgroup2.cpuset.cpus: 32-63,96-127",
                                 "+12: lxc.cgroup2.cpuset.cpus: 0-31,64-95"]
    assert conf.read_bytes() == before and result["diff"]
    cts, _ = run_lxc_fix(root)
    assert cts[104]["status"] == "changed" and cts[101]["status"] == "unchanged"
    assert conf.read_bytes() == before.replace(b"cpuset.cpus: 32-63,96-127", b"cpuset.cpus: 0-31,64-95")
    assert {p: p.read_bytes() for p in others} == others
    cts, result = run_lxc_fix(root)
    assert cts[104]["status"] == "unchanged" and not result["changed"]
    # configured right, effective at the CT's next start
    res = item(audit(root)["lxc.resources"], "CT 104")
    assert res["status"] == "pending" and "until the CT restarts" in res["message"]


def test_numa_pin_is_rolled_back_byte_for_byte_and_a_second_rollback_changes_nothing(tmp_path):
    root = copy_host(tmp_path, "pve-gpu04")
    conf = root / (LXC % ("pve-gpu04", 104))
    before = conf.read_bytes()
    out = run_module("pvetune_lxc_gpu", {"root": str(root), "run_id": "pin-fix", "numa_pin": True})
    assert out.get("failed") is not True and out["changed"], out
    assert conf.read_bytes() != before
    out = run_module("pvetune_rollback", {"root": str(root), "run_id": "pin-rollback"})
    assert out.get("failed") is not True and LXC_PATH % ("pve-gpu04", 104) in out["restored"], out
    assert conf.read_bytes() == before
    assert item(audit(root)["lxc.resources"], "CT 104")["status"] == "fail"   # the wrong node again
    out = run_module("pvetune_rollback", {"root": str(root), "run_id": "pin-rollback2"})
    assert out.get("failed") is not True and not out["changed"], out


def test_numa_pin_off_leaves_the_cpuset_alone(tmp_path):
    root = copy_host(tmp_path, "pve-gpu04")
    before = (root / (LXC % ("pve-gpu04", 104))).read_bytes()
    cts, _result = run_lxc_fix(root, pin=False)
    assert cts[104]["status"] == "unchanged" and (root / (LXC % ("pve-gpu04", 104))).read_bytes() == before


def test_numa_pin_adds_a_line_to_an_unpinned_ct_and_keeps_its_snapshots(tmp_path):
    root = copy_host(tmp_path, "pve-gpu01")
    conf = root / (LXC % ("pve-gpu01", 101))
    before = conf.read_text()
    cts, _ = run_lxc_fix(root)
    after = conf.read_text()
    added = "lxc.cgroup2.cpuset.cpus: 0-127\n"
    assert added in after and after.count("cpuset") == 1
    assert after[after.index("[before-driver-580]"):] == before[before.index("[before-driver-580]"):]


# -- nvidia.stack -------------------------------------------------------------------------------------------------
def test_ct_one_driver_release_behind_fails_naming_both_versions_and_the_install():
    res = audit(os.path.join(DEMO, "pve-gpu04"))["nvidia.stack"]
    ct = item(res, "CT 105")
    assert res["status"] == "fail" and ct["status"] == "fail" and item(res, "CT 101")["status"] == "pass"
    assert ct["current"] == "580.82.09" and "the host's kernel module is 580.95.05" in ct["message"]
    assert "NVIDIA-Linux-x86_64-580.95.05.run --no-kernel-modules" in ct["message"]


def test_fixed_host_stack_passes_and_reads_a_stopped_ct_in_its_subvolume():
    res = audit(os.path.join(DEMO, "pve-gpu02"))["nvidia.stack"]
    assert res["status"] == "pass"
    assert "/rpool/data/subvol-103-disk-0" in item(res, "CT 103")["message"]


def test_blackwell_on_the_proprietary_modules_fails(tmp_path):
    root = copy_host(tmp_path, "pve-gpu02")
    write(root, "proc/driver/nvidia/version", real("nvidia_proc", "nvidia-version-580.173.02-proprietary.txt"))
    res = audit(root)["nvidia.stack"]
    gen = item(res, "Blackwell (8 GPUs)")
    assert gen["status"] == "fail" and "need the open kernel modules" in gen["message"]
    assert item(res, "CT 101")["status"] == "fail"      # 580.95.05 libraries, module 580.173.02


def test_rtx_pro_6000_server_needs_the_575_branch_not_the_generations_570(tmp_path):
    root = copy_host(tmp_path, "pve-gpu02")
    write(root, "proc/driver/nvidia/version", real("nvidia_proc", "nvidia-version-570.172.08-open.txt"))
    gen = item(audit(root)["nvidia.stack"], "Blackwell (8 GPUs)")
    assert gen["status"] == "fail" and gen["expected"] == "open kernel modules, driver >= 575.57.08"
    assert "driver 570.172.08 predates support for these Blackwell GPUs (first in 575.57.08" in gen["message"]
    assert nvidia_generations.min_driver(nvidia_generations.GENERATIONS["blackwell"], 0x2B85)[0] == "570.86.16"


def test_running_ct_without_a_findable_init_and_a_zvol_ct_skip_with_the_reason(tmp_path):
    root = copy_host(tmp_path, "pve-gpu02")
    write(root, "proc/4127/status", "Name:\tsystemd\n")
    conf = root / (LXC % ("pve-gpu02", 103))
    conf.write_text(conf.read_text().replace("local-zfs:subvol-103-disk-0", "local-zfs:vm-103-disk-0"))
    res = audit(root)["nvidia.stack"]
    assert item(res, "CT 101")["status"] == "skip" and "NSpid" in item(res, "CT 101")["message"]
    assert item(res, "CT 103")["status"] == "skip" and "zvol" in item(res, "CT 103")["message"]


def test_running_ct_without_nvidia_libraries_warns(tmp_path):
    root = copy_host(tmp_path, "pve-gpu02")
    shutil.rmtree(str(root / "proc/4127/root"))
    write(root, "proc/4127/root/usr/lib/x86_64-linux-gnu/libc.so.6", "")
    res = audit(root)["nvidia.stack"]
    assert res["status"] == "warn" and "CUDA cannot start in this CT" in item(res, "CT 101")["message"]


@pytest.mark.parametrize("name, want", [
    ("nvidia-information-535-3gpu-0000_41_00.0.txt", 2), ("nvidia-information-535-3gpu-0000_61_00.0.txt", 0),
    ("nvidia-information-570-open-rtx5080-0000_02_00.0.txt", 0),
])
def test_gpu_minor_from_the_drivers_information_file(name, want):
    assert nvidia.parse_gpu_information(real("nvidia_proc", name))["minor"] == want


@pytest.mark.parametrize("name, version, is_open", [
    ("nvidia-version-580.126.09-open.txt", "580.126.09", True),
    ("nvidia-version-570.172.08-open.txt", "570.172.08", True),
    ("nvidia-version-580.173.02-proprietary.txt", "580.173.02", False),
    ("nvidia-version-535.113.01-proprietary.txt", "535.113.01", False),
])
def test_module_flavour_from_real_version_files(name, version, is_open):
    assert nvidia.parse_nvidia_version(real("nvidia_proc", name)) == {"version": version, "open": is_open}


def test_generation_from_the_pci_ids_name_else_the_device_id():
    assert nvidia_generations.generation_of(0x2BB5, "NVIDIA Corporation GB202GL [RTX PRO 6000 Blackwell]") == \
        "blackwell"
    assert nvidia_generations.generation_of(0x2330, "Device [10de:2330]") == "hopper"
    assert nvidia_generations.generation_of(0x2684, None) == "ada"
    assert nvidia_generations.generation_of(0x1B06, "GP102 [GeForce GTX 1080 Ti]") == "pascal"
    assert nvidia_generations.generation_of(0x0001, None) is None


# -- kernel.known_issues ------------------------------------------------------------------------------------------
def test_known_issues_on_the_demo_fleet():
    gpu01 = audit(os.path.join(DEMO, "pve-gpu01"))["kernel.known_issues"]
    assert gpu01["status"] == "fail" and "zen5-amd-pstate-not-default" in gpu01["current"]
    gpu03 = audit(os.path.join(DEMO, "pve-gpu03"))["kernel.known_issues"]
    # amd_pstate=passive on its command line works around the default-driver row; the 6.14 it boots next fixes
    # the rest.
    assert gpu03["status"] == "pending" and "zen5-amd-pstate-not-default" not in gpu03["current"]
    assert audit(os.path.join(DEMO, "pve-gpu02"))["kernel.known_issues"]["status"] == "pass"


def test_turin_dense_models_were_fixed_in_6_8_9():
    cpu = {"vendor": "AuthenticAMD", "family": 26, "model_id": 17}      # lscpu of an EPYC 9645 (cpu_family/)
    assert "Model:                   17" in real("cpu_family", "lscpu_amd_epyc_9645_turin_dense_fam26_model17.txt")
    row = next(r for r in kernel_issues.applicable(cpu, ["blackwell"]) if r["id"] == "zen5-models-10-1f-undetected")
    assert [kernel_issues.affects(row, v) for v in ("6.5.13-5-pve", "6.8.4-2-pve", "6.8.9", "6.8.12-4-pve",
                                                    "6.14.8-2-pve")] == [False, True, False, False, False]
    assert "zen5-models-10-1f-undetected" not in [r["id"] for r in kernel_issues.applicable(
        dict(cpu, model_id=2), ["blackwell"])]


def test_driver_rows_apply_only_to_their_driver():
    ids = [r["id"] for r in kernel_issues.applicable(None, ["ada"], "570.153.02")]
    assert "nvidia-570.153-no-build-6.15" in ids
    row = kernel_issues.KNOWN_ISSUES[[r["id"] for r in kernel_issues.KNOWN_ISSUES].index(
        "nvidia-570.153-no-build-6.15")]
    assert kernel_issues.affects(row, "6.17.2-1-pve") and not kernel_issues.affects(row, "6.14.8-2-pve")
    assert "nvidia-570.153-no-build-6.15" not in [r["id"] for r in kernel_issues.applicable(None, ["ada"], "580.95.05")]


def test_bergamo_cpuinfo_is_family_25():
    root_text = real("cpu_family", "cpuinfo_amd_epyc_9754_bergamo_fam25_model160.txt")
    from ansible.module_utils.pvetune.concerns.cpufreq.checks import read_cpuinfo_identity

    class Fs:
        def read_text(self, path, limit=None):
            return root_text

    ident = read_cpuinfo_identity(Fs())
    assert (ident["vendor"], ident["family"], ident["model_id"]) == ("AuthenticAMD", 25, 160)
    assert [r["id"] for r in kernel_issues.applicable(ident, [])] == ["amd-pstate-no-preferred-core",
                                                                     "acpi-cpufreq-amd-boost-ratio"]


# -- the tables ---------------------------------------------------------------------------------------------------
def test_every_table_row_cites_its_source():
    for row in kernel_issues.KNOWN_ISSUES:
        assert row["source"].startswith(("https://", "torvalds/")) and row["quote"], row["id"]
        assert row["status"] in ("fail", "warn"), row["id"]
    for row in nvidia_generations.GENERATIONS_TABLE:
        for key in ("open_source", "ids_source", "min_source", "max_source"):
            value = row.get(key)
            assert value is None or (value and "TBD" not in value), (row["key"], key)
        assert row["min_driver"] is None or row["min_source"], row["key"]
        assert row["max_branch"] is None or row["max_source"], row["key"]
