"""gather() + evaluate() on the demo fleet (demo/snapshots/pve-gpu0{1,2,3}) with the demo policy,
the pvetune_facts module on the same trees, the generator's --check, and broken copies of the
trees: each broken section must turn its checks into error/skip naming the file, while every
other check still gives the same result as on the intact tree.
"""
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest
import yaml
from ansible.module_utils.pvetune.core.catalogue import BY_ID
from ansible.module_utils.pvetune.core.policy import merge_policy
from checkcases import audit_tree
from modharness import run_module
from privdrop import run_as_nobody

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "scripts"))
import demo_fleet

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(TOP, "demo", "snapshots")
GPU_BDFS = ["0000:%s:00.0" % bus for bus in ("01", "21", "41", "61", "81", "a1", "c1", "e1")]


# What each host is built to show: scripts/demo_fleet.py's "expect" beside its spec, over the whole catalogue.
EXPECTED = {host: demo_fleet.expected_statuses(host, list(BY_ID)) for host in demo_fleet.HOSTS}


def demo_policy():
    with open(os.path.join(TOP, "inventory", "demo", "group_vars", "gpu_hosts.yml")) as handle:
        return merge_policy(yaml.safe_load(handle)["pvetune_policy"])


POLICY = demo_policy()


def audit(root):
    return audit_tree(root, POLICY)


@pytest.fixture(scope="module")
def demo_results():
    return {host: audit(os.path.join(DEMO, host)) for host in EXPECTED}


# -- the demo fleet as generated ------------------------------------------------------------------------
@pytest.mark.parametrize("host", sorted(EXPECTED))
def test_demo_host_statuses(demo_results, host):
    facts, res = demo_results[host]
    assert facts["errors"] == []
    assert {cid: r["status"] for cid, r in res.items()} == EXPECTED[host]


def test_gpu01_fails_the_reference_checks(demo_results):
    _, res = demo_results["pve-gpu01"]
    fails = sorted(cid for cid, r in res.items() if r["status"] == "fail")
    assert fails == sorted(["cpu.scaling_driver", "cpu.cstates", "kernel.numa_balancing", "pcie.mrrs",
                            "kernel.version", "boot.cmdline", "lxc.gpu_devices", "iommu.mode", "lxc.resources",
                            "kernel.known_issues", "nvidia.compute_capability", "cpu.boost", "mem.sysctl",
                            "pcie.aspm", "storage.zfs_arc"])
    assert res["cpu.scaling_driver"]["current"].startswith("acpi-cpufreq (128 policies)")
    assert "C2 (400us)" in res["cpu.cstates"]["message"]
    assert res["kernel.numa_balancing"]["current"] == "runtime 1, persisted no"
    assert res["kernel.version"]["message"].startswith("running 6.8.12-4-pve")
    assert "c 511:* rwm" in res["lxc.gpu_devices"]["message"]


def test_gpu01_mrrs_names_all_eight_gpus(demo_results):
    _, res = demo_results["pve-gpu01"]
    mrrs = res["pcie.mrrs"]
    assert [i["name"].split()[0] for i in mrrs["items"]] == GPU_BDFS
    assert all(i["name"].endswith("[RTX PRO 6000 Blackwell Server Edition] (NUMA node %d, GPU %d)" % (n // 4, n))
               for n, i in enumerate(mrrs["items"]))
    assert all(i["status"] == "fail" and i["current"].startswith("MaxReadReq 512,") for i in mrrs["items"])
    assert mrrs["message"] == "8 of 8 GPUs below MaxReadReq 4096: " + ", ".join(GPU_BDFS)


def test_gpu02_has_no_fail(demo_results):
    _, res = demo_results["pve-gpu02"]
    assert [cid for cid, r in res.items() if r["status"] in ("fail", "error")] == []
    assert not any(r["reboot_required"] for r in res.values())


def test_gpu03_boot_cmdline_pending(demo_results):
    _, res = demo_results["pve-gpu03"]
    cmd = res["boot.cmdline"]
    assert cmd["status"] == "pending" and cmd["reboot_required"] is True
    assert cmd["message"] == "configured in /etc/default/grub + grub.d; effective after the next reboot"
    assert [(i["name"], i["status"]) for i in cmd["items"]] == [("amd_pstate=active", "pending"),
                                                                ("processor.max_cstate=1", "pending"),
                                                                ("iommu=pt", "pending")]
    assert res["kernel.version"]["message"] == "6.14.8-2-pve is pinned; running 6.8.12-4-pve until the next reboot"


def test_facts_module_on_each_demo_host(capsys):
    """pvetune_facts in-process, as Ansible runs it; the time per host is printed, not asserted."""
    overrides = {k: v for k, v in POLICY.items() if v != merge_policy(None)[k]}
    timings = []
    for host in sorted(EXPECTED):
        start = time.monotonic()
        out = run_module("pvetune_facts", {"root": os.path.join(DEMO, host), "policy": overrides}, check_mode=True)
        timings.append((host, time.monotonic() - start))
        assert out.get("failed") is not True, out
        assert out["changed"] is False
        assert {r["id"]: r["status"] for r in out["results"]} == EXPECTED[host]
        assert out["gather_errors"] == []
        assert out["host"]["hostname"] == host
        assert "facts" not in out
    with capsys.disabled():
        print("\npvetune_facts time per host: " + ", ".join("%s %.3fs" % t for t in timings))


def test_facts_module_rejects_a_bad_policy_before_reading():
    out = run_module("pvetune_facts", {"root": os.path.join(DEMO, "pve-gpu01"),
                                       "policy": {"cmdline_required": ["quiet; reboot"]}})
    assert out["failed"] is True
    assert "cmdline_required" in out["msg"]


def test_demo_fleet_generation_is_deterministic():
    proc = subprocess.run([sys.executable, os.path.join(TOP, "scripts", "demo_fleet.py"), "--check"],
                          cwd=TOP, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().endswith("demo fleet: the same when generated again")


def test_compare_names_every_kind_of_difference(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        (root / "etc").mkdir(parents=True)
        (root / "etc" / "same").write_text("x\n")
    (a / "etc" / "changed").write_text("old\n")
    (b / "etc" / "changed").write_text("new\n")
    (a / "etc" / "gone").write_text("")
    (b / "etc" / "new").write_text("")
    os.symlink("same", str(a / "etc" / "link"))
    os.symlink("changed", str(b / "etc" / "link"))
    assert sorted(demo_fleet.compare(str(a), str(b))) == [
        "content differs: etc/changed", "only in generated tree: etc/new", "only in the existing tree: etc/gone",
        "symlink differs: etc/link"]


def fake_generate(calls):
    def generate(out, hosts):
        calls.append(out)
        for host in hosts:
            os.makedirs(os.path.join(out, host, "etc"))
            with open(os.path.join(out, host, "etc", "hostname"), "w") as handle:
                handle.write(host + "\n")
    return generate


def test_ensure_generates_once_and_again_when_an_input_changes(tmp_path, monkeypatch):
    calls, out = [], str(tmp_path / "demo" / "snapshots")
    monkeypatch.setattr(demo_fleet, "generate", fake_generate(calls))
    digests = {"scripts/demo_fleet.py": "1"}
    monkeypatch.setattr(demo_fleet, "input_digests", lambda: dict(digests))
    assert demo_fleet.ensure(out) is True
    assert sorted(os.listdir(out)) == sorted(demo_fleet.HOSTS)
    assert oct(os.stat(out).st_mode & 0o777) == oct(0o755)
    assert demo_fleet.ensure(out) is False and len(calls) == 1
    digests["module_utils/pvetune/new.py"] = "2"
    assert demo_fleet.ensure(out) is True and len(calls) == 2
    # nothing of the generations is left beside the tree but its lock and the inputs' digests
    assert sorted(os.listdir(os.path.dirname(out))) == ["snapshots", "snapshots.generated.json", "snapshots.lock"]


def test_ensure_keeps_the_old_tree_when_generation_fails(tmp_path, monkeypatch):
    out = str(tmp_path / "snapshots")
    monkeypatch.setattr(demo_fleet, "generate", fake_generate([]))
    monkeypatch.setattr(demo_fleet, "input_digests", lambda: {"a": "1"})
    demo_fleet.ensure(out)

    def broken(out_dir, hosts):
        os.makedirs(os.path.join(out_dir, "pve-gpu01"))
        raise SystemExit("empty directories in pve-gpu01")
    monkeypatch.setattr(demo_fleet, "generate", broken)
    monkeypatch.setattr(demo_fleet, "input_digests", lambda: {"a": "2"})
    with pytest.raises(SystemExit):
        demo_fleet.ensure(out)
    assert sorted(os.listdir(str(tmp_path))) == ["snapshots", "snapshots.lock"]  # (no digests: next time again)
    with open(os.path.join(out, "pve-gpu01", "etc", "hostname")) as handle:
        assert handle.read() == "pve-gpu01\n"


def test_generator_files_are_every_module_of_the_clone_it_loads(tmp_path):
    """ensure() regenerates when one of GENERATOR_FILES changes: a module the generator imports from the
    clone and that list does not name would leave a stale fleet behind."""
    code = ("import os, sys; sys.path.insert(0, 'scripts'); import demo_fleet as d; "
            "d.generate_host(sys.argv[1], 'pve-gpu02'); top = os.getcwd() + os.sep; "
            "print('\\n'.join(sorted(os.path.relpath(m.__file__) for m in list(sys.modules.values()) "
            "if (getattr(m, '__file__', None) or '').startswith(top) and '.venv' not in m.__file__)))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=TOP, check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout.split()
    loaded = {p for p in out if not p.startswith(demo_fleet.INPUT_DIRS)}
    assert loaded == set(demo_fleet.GENERATOR_FILES)


# -- broken copies ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def base_copy(tmp_path_factory):
    """One real copy of each demo host per module (the demo trees are never touched)."""
    base = tmp_path_factory.mktemp("demo-base")
    made = {}

    def get(host):
        if host not in made:
            made[host] = base / host
            shutil.copytree(os.path.join(DEMO, host), str(made[host]), symlinks=True)
        return made[host]
    return get


@pytest.fixture
def copy_host(tmp_path, base_copy):
    """A per-test copy of a demo host: own directories, files hard-linked to the module's copy.

    Every change goes through unlink/replace (``replace_file``) or ``detach`` first, so no test
    changes an inode another test sees.
    """
    def make(host):
        root = tmp_path / host
        shutil.copytree(str(base_copy(host)), str(root), symlinks=True, copy_function=os.link)
        return root
    return make


def detach(path):
    """Give a hard-linked file its own inode (same content and mode) before changing it in place."""
    path = os.path.realpath(str(path))
    tmp = path + ".detach"
    shutil.copy2(path, tmp)
    os.replace(tmp, path)
    return path


def replace_file(path, data):
    path = os.path.realpath(str(path))
    os.unlink(path)
    with open(path, "wb") as handle:
        handle.write(data)


# The checks that read the GPU CTs the LXC reader finds: an lxc section error is theirs too.
LXC_READERS = {"storage.weights", "storage.zfs_dataset", "lxc.shm_memlock"}


def assert_others_unchanged(res, intact, affected):
    others = {cid: r["status"] for cid, r in res.items() if cid not in affected}
    assert others == {cid: r["status"] for cid, r in intact.items() if cid not in affected}


@pytest.mark.parametrize("host,cstates", [("pve-gpu02", "error"), ("pve-gpu03", "fail")])
def test_missing_proc_cmdline(copy_host, demo_results, host, cstates):
    """gpu03 still has C2 enabled and max_cstate=8: that fails whatever /proc/cmdline would say."""
    root = copy_host(host)
    os.unlink(str(root / "proc" / "cmdline"))
    facts, res = audit(root)
    assert facts["errors"] == [{"section": "cmdline", "path": "/proc/cmdline",
                                "error": "No such file or directory"}]
    assert res["boot.cmdline"]["status"] == "error"
    assert res["cpu.cstates"]["status"] == cstates
    for cid in ("boot.cmdline", "cpu.cstates"):
        assert "/proc/cmdline: No such file or directory" in res[cid]["message"]
    # scaling_driver (pending on gpu03) and iommu.mode also look at /proc/cmdline, but do not depend on it alone
    assert_others_unchanged(res, demo_results[host][1],
                            {"boot.cmdline", "cpu.cstates", "cpu.scaling_driver", "iommu.mode"})


def test_missing_proc_cmdline_with_deep_states_still_fails(copy_host, demo_results):
    root = copy_host("pve-gpu01")
    os.unlink(str(root / "proc" / "cmdline"))
    _, res = audit(root)
    assert res["boot.cmdline"]["status"] == "error"
    assert res["cpu.cstates"]["status"] == "fail"  # C2 enabled is a failure whatever the command line says
    assert "/proc/cmdline unreadable" in res["cpu.cstates"]["message"]
    assert_others_unchanged(res, demo_results["pve-gpu01"][1], {"boot.cmdline", "cpu.cstates", "iommu.mode"})


def _truncate_config(root, bdf, size=64):
    path = os.path.realpath(str(root / "sys" / "bus" / "pci" / "devices" / bdf / "config"))
    assert path.startswith(str(root))
    with open(path, "rb") as handle:
        data = handle.read()
    replace_file(path, data[:size])


def test_gpu_config_cut_to_64_bytes(copy_host, demo_results):
    root = copy_host("pve-gpu02")
    _truncate_config(root, "0000:41:00.0")
    facts, res = audit(root)
    where = "/sys/bus/pci/devices/0000:41:00.0/config"
    for cid in ("pcie.mrrs", "pcie.link"):
        assert res[cid]["status"] == "error"
        assert where in res[cid]["message"]
        items = {i["name"].split()[0]: i for i in res[cid]["items"]}
        assert items["0000:41:00.0"]["status"] == "error"
        assert sum(1 for i in items.values() if i["status"] == "pass") == 7
    assert "64 bytes" in res["pcie.mrrs"]["message"]
    assert res["pcie.aspm"]["status"] == "error" and where in res["pcie.aspm"]["message"]
    assert_others_unchanged(res, demo_results["pve-gpu02"][1], {"pcie.mrrs", "pcie.link", "pcie.aspm"})


def test_gpu_config_cut_on_a_failing_host_keeps_the_fail(copy_host, demo_results):
    root = copy_host("pve-gpu01")
    _truncate_config(root, "0000:01:00.0")
    _, res = audit(root)
    mrrs = res["pcie.mrrs"]
    assert mrrs["status"] == "fail"  # 7 GPUs still measurably at 512
    assert mrrs["items"][0]["status"] == "error"
    assert "/sys/bus/pci/devices/0000:01:00.0/config" in mrrs["items"][0]["message"]
    # The fail names the GPUs below target and, since the hardening work (#7), the config space it could not read.
    assert mrrs["message"].startswith("7 of 8 GPUs below MaxReadReq 4096: " + ", ".join(GPU_BDFS[1:]) + "; ")
    assert "could not read 1: /sys/bus/pci/devices/0000:01:00.0/config" in mrrs["message"]
    assert res["pcie.link"]["status"] == "error"
    assert_others_unchanged(res, demo_results["pve-gpu01"][1], {"pcie.mrrs", "pcie.link"})


@pytest.mark.parametrize("content", ["", "garbage\n\x00\xff nonsense 12x\n", "195 nvidia\n511 nvidia-uvm\n"])
def test_garbage_proc_devices(copy_host, demo_results, content):
    """Without its "Character devices:" header the file is not /proc/devices (a grep, an empty copy)."""
    root = copy_host("pve-gpu02")
    replace_file(root / "proc" / "devices", content.encode("latin-1"))
    facts, res = audit(root)
    lxc = res["lxc.gpu_devices"]
    assert lxc["status"] == "error"
    assert lxc["message"].startswith("/proc/devices: NVIDIA device state unavailable: no 'Character devices:'")
    assert facts["errors"][0]["section"] == "lxc" and facts["errors"][0]["path"] == "/proc/devices"
    assert res["nvidia.driver"]["status"] == "pass"
    # the CT runtime reader builds on the CT configs the LXC reader could not give it
    assert res["lxc.resources"]["status"] == "error" and "NVIDIA device state unavailable" in res["lxc.resources"][
        "message"]
    assert res["nvidia.compute_capability"]["status"] == "error"
    # and so do the readers of the GPU CTs' storage, /dev/shm and limits
    assert {res[c]["status"] for c in LXC_READERS} == {"error"}
    assert_others_unchanged(res, demo_results["pve-gpu02"][1], {"lxc.gpu_devices", "lxc.resources",
                                                                "nvidia.compute_capability"} | LXC_READERS)


def test_missing_proc_devices(copy_host, demo_results):
    root = copy_host("pve-gpu02")
    os.unlink(str(root / "proc" / "devices"))
    facts, res = audit(root)
    assert res["nvidia.driver"]["status"] == "error"
    assert res["nvidia.driver"]["message"] == "/proc/devices: No such file or directory"
    assert res["lxc.gpu_devices"]["status"] == "error"
    assert "/proc/devices" in res["lxc.gpu_devices"]["message"]
    assert res["lxc.resources"]["status"] == "error" and res["nvidia.stack"]["status"] == "error"
    # everything that reads the NVIDIA state, nvidia-smi's answers included, says the section could not be read
    nvidia_state = {"nvidia.persistence", "nvidia.uvm_hmm", "gpu.power_limit", "gpu.clocks",
                    "nvidia.compute_capability"}
    assert {res[c]["status"] for c in nvidia_state} == {"error"}
    assert_others_unchanged(res, demo_results["pve-gpu02"][1], {"lxc.gpu_devices", "nvidia.driver",
                                                                "lxc.resources", "nvidia.stack"} | nvidia_state
                            | LXC_READERS)


def test_ct_config_that_cannot_be_read_as_a_file(copy_host, demo_results):
    root = copy_host("pve-gpu02")
    conf = root / "etc" / "pve" / "lxc" / "101.conf"
    os.unlink(str(conf))
    conf.mkdir()
    _, res = audit(root)
    lxc = res["lxc.gpu_devices"]
    assert lxc["status"] == "error"
    assert lxc["message"] == "CT 101: /etc/pve/lxc/101.conf: Is a directory"
    assert [(i["name"], i["status"]) for i in lxc["items"]] == [("CT 101", "error"), ("CT 103", "pass")]
    # an unreadable config may be a GPU CT's: the checks of the GPU CTs' storage and limits say so
    for cid in LXC_READERS:
        assert res[cid]["status"] == "error" and "CT 101: /etc/pve/lxc/101.conf: Is a directory" in res[cid]["message"]
    assert_others_unchanged(res, demo_results["pve-gpu02"][1], {"lxc.gpu_devices"} | LXC_READERS)


def test_ct_config_symlink_loop(copy_host, demo_results):
    root = copy_host("pve-gpu02")
    conf = root / "etc" / "pve" / "lxc" / "102.conf"
    os.unlink(str(conf))
    os.symlink("/etc/pve/lxc/102.conf", str(conf))
    _, res = audit(root)
    assert res["lxc.gpu_devices"]["status"] == "error"
    assert res["lxc.gpu_devices"]["message"] == "CT 102: /etc/pve/lxc/102.conf: Too many levels of symbolic links"


def _gather_as_nobody(root):
    facts, res = run_as_nobody(lambda: audit(root))
    return facts["errors"], res


def test_ct_config_permission_denied(base_copy, public_tmp, demo_results):
    root = public_tmp / "pve-gpu02"  # reachable for the unprivileged reader (tmp_path's base is 0700)
    shutil.copytree(str(base_copy("pve-gpu02")), str(root), symlinks=True, copy_function=os.link)
    os.chmod(detach(root / "etc" / "pve" / "lxc" / "101.conf"), 0o000)
    if os.geteuid() == 0:
        errors, res = _gather_as_nobody(root)
    else:
        facts, res = audit(root)
        errors = facts["errors"]
    lxc = res["lxc.gpu_devices"]
    assert lxc["status"] == "error"
    assert lxc["message"] == "CT 101: /etc/pve/lxc/101.conf: Permission denied"
    # an unprivileged reader also cannot read binary PCI config beyond 64 bytes on a real host, but the
    # tree's files are plain files: everything else reads as before
    assert errors == []
    assert {res[cid]["status"] for cid in LXC_READERS} == {"error"}
    assert_others_unchanged(res, demo_results["pve-gpu02"][1], {"lxc.gpu_devices"} | LXC_READERS)


def test_unreadable_cpufreq_policy(copy_host, demo_results):
    root = copy_host("pve-gpu02")
    os.unlink(str(root / "sys/devices/system/cpu/cpufreq/policy5/scaling_driver"))
    facts, res = audit(root)
    assert facts["cpu"]["errors"] == [{"path": "/sys/devices/system/cpu/cpufreq/policy5/scaling_driver",
                                       "error": "No such file or directory"}]
    drv = res["cpu.scaling_driver"]
    # Every readable policy is right, one cannot be read: an error naming the file (hardening, #7).
    assert drv["status"] == "error"
    assert "(unreadable) (1 policies)" in drv["current"]
    assert "/sys/devices/system/cpu/cpufreq/policy5/scaling_driver: No such file or directory" in drv["message"]
    assert_others_unchanged(res, demo_results["pve-gpu02"][1], {"cpu.scaling_driver"})


def test_missing_sysctl_runtime_value(copy_host, demo_results):
    root = copy_host("pve-gpu02")
    os.unlink(str(root / "proc/sys/kernel/numa_balancing"))
    _, res = audit(root)
    assert res["kernel.numa_balancing"]["status"] == "skip"
    assert "/proc/sys/kernel/numa_balancing does not exist" in res["kernel.numa_balancing"]["message"]
    assert_others_unchanged(res, demo_results["pve-gpu02"][1], {"kernel.numa_balancing"})


def test_missing_cpuinfo_is_a_cpu_section_error(copy_host, demo_results):
    root = copy_host("pve-gpu02")
    os.unlink(str(root / "proc" / "cpuinfo"))
    facts, res = audit(root)
    for cid in ("cpu.scaling_driver", "cpu.governor", "cpu.epp"):
        assert res[cid]["status"] == "error"
        assert res[cid]["message"] == "/proc/cpuinfo: No such file or directory"
    # Without the vendor the CPU's own boot args are unknown; the C-state limit follows the idle driver alone.
    assert res["boot.cmdline"]["status"] == "error"
    assert res["boot.cmdline"]["message"] == ("cannot tell which CPU boot args this host needs: "
                                              "/proc/cpuinfo: No such file or directory")
    assert res["cpu.boost"]["status"] == "error"
    assert_others_unchanged(res, demo_results["pve-gpu02"][1],
                            {"cpu.scaling_driver", "cpu.governor", "cpu.epp", "boot.cmdline", "cpu.boost"})


def test_broken_copies_did_not_leak_into_the_shared_copy(base_copy):
    """Runs last in this module: the hard-linked scratch trees left the module's copies intact."""
    for host in sorted(EXPECTED):
        copy_root = str(base_copy(host))
        for dirpath, _dirs, files in os.walk(os.path.join(DEMO, host)):
            rel = os.path.relpath(dirpath, os.path.join(DEMO, host))
            for name in files:
                orig = os.path.join(dirpath, name)
                mine = os.path.join(copy_root, rel, name)
                if os.path.islink(orig):
                    assert os.readlink(mine) == os.readlink(orig)
                    continue
                assert stat.S_IMODE(os.stat(mine).st_mode) == stat.S_IMODE(os.stat(orig).st_mode), mine
                with open(orig, "rb") as a, open(mine, "rb") as b:
                    assert a.read() == b.read(), mine
