"""Mixed fleets (issue 17): the policy as each host's CPU vendor and idle driver see it (core/cpuprofile.py), through
the real readers, the preflight module and the CPU fix.

The Intel host is the demo's pve-gpu05 (real Sapphire Rapids sysfs values, tests/fixtures/realdata/intel); the VM
is a tree with the real /proc/cpuinfo of the KVM guest these tests run on (tests/fixtures/realdata/vm).
"""
import os
import sys

import pytest
import yaml
from ansible.module_utils.pvetune.audit import evaluate, gather, host_policy
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.policy import merge_policy
from modharness import run_module

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(TOP, "demo", "snapshots")
VM_CPUINFO = os.path.join(TOP, "tests", "fixtures", "realdata", "vm", "kvm_guest_xeon_cpuinfo_cpu0.txt")
sys.path.insert(0, os.path.join(TOP, "scripts"))
from scratch_host import make_scratch  # noqa: E402

CPU_CHECKS = ("cpu.scaling_driver", "cpu.governor", "cpu.epp", "cpu.cstates", "boot.cmdline")


def write(root, path, text):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as handle:
        handle.write(text)


def vm_tree(root):
    """A 2-vCPU KVM guest as its sysfs shows it: no cpufreq policy, cpuidle driver "none"."""
    with open(VM_CPUINFO) as handle:
        block = "".join(line for line in handle if not line.startswith("# ")).strip("\n")
    write(root, "/proc/cpuinfo", block + "\n\n" + block.replace("processor\t: 0", "processor\t: 1", 1) + "\n\n")
    write(root, "/proc/cmdline", "console=ttyS0 quiet reboot=k panic=1\n")
    write(root, "/proc/sys/kernel/hostname", "vm\n")
    write(root, "/sys/devices/system/cpu/online", "0-1\n")
    write(root, "/sys/devices/system/cpu/cpuidle/current_driver", "none\n")
    write(root, "/sys/devices/system/cpu/cpuidle/current_governor", "menu\n")
    os.makedirs(os.path.join(str(root), "sys/devices/system/cpu/cpufreq"))
    for cpu in (0, 1):
        os.makedirs(os.path.join(str(root), "sys/devices/system/cpu/cpu%d" % cpu))
    return FsRoot(str(root))


def audit(fsroot, overrides=None):
    policy = merge_policy(overrides)
    return {r["id"]: r for r in evaluate(gather(fsroot, None, policy), policy)}


def test_a_vm_without_cpufreq_or_cpuidle_driver_gets_skips_with_reasons(tmp_path):
    res = audit(vm_tree(tmp_path))
    for cid in ("cpu.scaling_driver", "cpu.governor", "cpu.epp"):
        assert res[cid]["status"] == "skip", cid
        assert res[cid]["message"] == ("no cpufreq driver is loaded and the CPU reports the hypervisor flag: in a "
                                       "virtual machine the host sets the frequency")
    assert res["cpu.cstates"]["status"] == "skip"
    assert "current_driver: none), as in many virtual machines" in res["cpu.cstates"]["message"]
    # Nothing the VM cannot use is required on its command line.
    assert res["boot.cmdline"]["status"] == "pass"
    assert host_policy(vm_tree(tmp_path / "again"), merge_policy(None))["cmdline_required"] == []


def test_the_cpu_fix_leaves_a_vm_alone_and_asks_for_no_reboot(tmp_path):
    vm_tree(tmp_path)
    res = run_module("pvetune_cpufreq", {"root": str(tmp_path), "amd_pstate_mode": "active",
                                         "intel_pstate_mode": "active"})
    assert res["pstate"]["action"] == "not_applicable" and res["reboot_required"] is False
    assert res["changed"] is False


@pytest.mark.parametrize("host, args", [
    ("pve-gpu01", ["amd_pstate=active", "processor.max_cstate=1"]),
    ("pve-gpu05", ["intel_idle.max_cstate=1"]),
])
def test_each_vendor_is_asked_for_its_own_boot_args(host, args):
    # pve-gpu01's GPUs are translated (DMA-FQ): iommu=pt (policy iommu_passthrough) comes after the CPU's args.
    passthrough = ["iommu=pt"] if host == "pve-gpu01" else []
    policy = host_policy(FsRoot(os.path.join(DEMO, host)), merge_policy(None))
    assert policy["cmdline_required"] == args + passthrough
    # An explicit list is the whole list; with cmdline_cpu_args the CPU's come first.
    assert host_policy(FsRoot(os.path.join(DEMO, host)),
                       merge_policy({"cmdline_required": ["iommu=pt"]}))["cmdline_required"] == ["iommu=pt"]
    both = merge_policy({"cmdline_required": ["iommu=pt"], "cmdline_cpu_args": True})
    assert host_policy(FsRoot(os.path.join(DEMO, host)), both)["cmdline_required"] == args + ["iommu=pt"]


def test_a_key_the_inventory_names_keeps_the_inventory_value():
    both = merge_policy({"cmdline_required": ["intel_idle.max_cstate=2"], "cmdline_cpu_args": True})
    assert host_policy(FsRoot(os.path.join(DEMO, "pve-gpu05")), both)["cmdline_required"] == [
        "intel_idle.max_cstate=2"]


def test_the_intel_host_fails_on_its_own_terms():
    with open(os.path.join(TOP, "inventory", "demo", "group_vars", "gpu_hosts.yml")) as handle:
        overrides = yaml.safe_load(handle)["pvetune_policy"]
    res = audit(FsRoot(os.path.join(DEMO, "pve-gpu05")), overrides)
    assert {cid: res[cid]["status"] for cid in CPU_CHECKS} == {
        "cpu.scaling_driver": "pass", "cpu.governor": "fail", "cpu.epp": "fail", "cpu.cstates": "fail",
        "boot.cmdline": "fail"}
    assert res["cpu.cstates"]["title"] == "C-states: intel_idle.max_cstate=1 effective, nothing deeper than C1 enabled"
    assert res["cpu.cstates"]["message"] == (
        "intel_idle.max_cstate=1 is not on /proc/cmdline; intel_idle module max_cstate is 9; enabled states deeper "
        "than C1: C1E (2us), C6 (290us)")
    assert "/sys/module/intel_idle/parameters/max_cstate = 9" in res["cpu.cstates"]["evidence"]
    assert res["cpu.governor"]["current"] == "powersave (160)"
    assert res["cpu.epp"]["current"] == "balance_performance (160)"
    assert "echo active > /sys/devices/system/cpu/intel_pstate/status" in res["cpu.scaling_driver"]["remediation"]
    # No check asks an Intel host for AMD's arguments.
    for cid in CPU_CHECKS:
        text = " ".join(str(res[cid][k]) for k in ("title", "expected", "message", "remediation"))
        assert "amd_pstate=" not in text and "processor.max_cstate" not in text, cid


def test_no_check_asks_an_amd_host_for_intel_idle():
    res = audit(FsRoot(os.path.join(DEMO, "pve-gpu01")))
    for cid in CPU_CHECKS:
        text = " ".join(str(res[cid][k]) for k in ("title", "expected", "message", "remediation"))
        assert "intel_idle" not in text and "intel_pstate" not in text, cid


def test_preflight_returns_the_policy_for_this_hosts_cpu():
    res = run_module("pvetune_preflight", {"run_id": "20261201T120000Z", "root": os.path.join(DEMO, "pve-gpu05")})
    assert "failed" not in res, res.get("msg")
    assert res["policy"]["cmdline_required"] == ["intel_idle.max_cstate=1"]
    assert res["policy"]["host_cpu"]["vendor"] == "intel" and res["policy"]["host_cpu"]["idle_driver"] == "intel_idle"
    assert res["policy"]["scaling_driver"] == "intel_pstate"


def test_preflight_refuses_when_the_cpu_cannot_be_read(tmp_path):
    root = make_scratch("pve-gpu05", str(tmp_path / "pve-gpu05"))
    os.unlink(os.path.join(root, "proc", "cpuinfo"))
    res = run_module("pvetune_preflight", {"run_id": "20261201T120000Z", "root": root})
    assert res["failed"] is True
    assert res["msg"] == ("pvetune_policy: cannot tell which CPU boot args this host needs (policy cmdline_cpu_args): "
                          "/proc/cpuinfo: No such file or directory; nothing was changed")
    # With the whole list given, the vendor does not matter.
    res = run_module("pvetune_preflight", {"run_id": "20261201T120000Z", "root": root,
                                           "policy": {"cmdline_required": ["intel_idle.max_cstate=1"]}})
    assert "failed" not in res, res.get("msg")


def test_the_cpu_fix_on_the_intel_host_writes_governor_and_epp_and_needs_no_reboot(tmp_path):
    root = make_scratch("pve-gpu05", str(tmp_path / "pve-gpu05"))
    args = {"root": root, "amd_pstate_mode": "active", "intel_pstate_mode": "active", "governor": "performance",
            "epp": "performance"}
    res = run_module("pvetune_cpufreq", args)
    assert "failed" not in res, res.get("msg")
    assert res["pstate"]["driver"] == "intel_pstate" and res["pstate"]["action"] == "none"
    assert res["reboot_required"] is False and res["changed"] is True
    assert res["drivers"] == {"intel_pstate": "0-159"}
    with open(os.path.join(root, "sys/devices/system/cpu/cpufreq/policy159/energy_performance_preference")) as fh:
        assert fh.read() == "performance\n"
    again = run_module("pvetune_cpufreq", args)
    assert again["changed"] is False
