"""fix.yml and rollback.yml on scratch copies of the demo fleet (stand-ins for Proxmox-only tools).

This is also `make fix-demo`: with PVETUNE_FIX_DEMO_DIR set, the scratch trees, inventories and
records stay there for a look afterwards.
"""
import json
import os
import shutil

import pytest
from conftest import DEMO_SNAPSHOTS, run_playbook
from scratch_host import KEPT_KERNEL, make_scratch
from treeinventory import write_inventory

HOSTS = ("pve-gpu01", "pve-gpu02", "pve-gpu03", "pve-gpu04", "pve-gpu05")
# pve-gpu04 lets the fix clear ACS (the policy is opt-in); its eight switch downstream ports:
ACS_PORTS = ["0000:%s:%s" % (b, d) for b in ("02", "22", "82", "a2") for d in ("08.0", "10.0")]
# Bookkeeping of the stand-ins and pvetune's own state/backups: not host content.
IGNORED = (".pvetune/calls.log", "var/lib/pvetune", "run")
# What rollback deliberately keeps: the kernel package fix.yml installed on pve-gpu01 (scratch_host.KEPT_KERNEL).

def files_of(root):
    """{relative path: ("file", bytes) | ("link", target) | ("dir",)} for a tree."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel.startswith(IGNORED):
                continue
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = ("dir",)
            else:
                with open(path, "rb") as handle:
                    out[rel] = ("file", handle.read())
    return out


def differences(before, after):
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    return changed


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    keep = os.environ.get("PVETUNE_FIX_DEMO_DIR")
    base = keep or str(tmp_path_factory.mktemp("fixdemo"))
    if keep and os.path.exists(base):
        shutil.rmtree(base)
    os.makedirs(base, exist_ok=True)
    roots = {}
    for host in HOSTS:
        roots[host] = make_scratch(host, os.path.join(base, host))
    # The demo policy's opt-in GPU fixes (pve-gpu05's power cap, pve-gpu03's applications clocks), the ARC cap
    # (pve-gpu01's was ignored; the others' installer cap is loaded: unchanged) and ACS on pve-gpu04.
    gpu_fixes = {"gpu_power_fix": True, "gpu_clocks_fix": True, "zfs_arc_fix": True}
    inventory = write_inventory(os.path.join(base, "inventory.yml"), roots,
                                group_vars={"pvetune_policy": gpu_fixes},
                                host_vars={"pve-gpu04": {"pvetune_policy": dict(gpu_fixes, pcie_acs_fix=True)}})
    originals = {h: files_of(roots[h]) for h in HOSTS}
    return {"base": base, "roots": roots, "inventory": inventory, "originals": originals}


@pytest.fixture(scope="module")
def check_run(fleet, tmp_path_factory):
    """fix.yml --check --diff on the untouched fleet, once: test_1 reads its events and records,
    test_1c its terminal output (the pvetune stdout callback, as the operator sees it), test_5 its note for a
    run without pvetune_reboot_ok."""
    return run_playbook(tmp_path_factory.mktemp("check"), "fix.yml", inventory=fleet["inventory"],
                        cmdline="--check --diff", envvars={"ANSIBLE_STDOUT_CALLBACK": "pvetune"},
                        extravars={"pvetune_report_dir": os.path.join(fleet["base"], "reports-check")})


def recap(run, host):
    stats = run.stats()
    return {k: stats[k].get(host, 0) for k in ("ok", "changed", "failures", "skipped")}


def test_1_check_diff_plans_changes_and_writes_nothing(fleet, check_run):
    run = check_run
    assert run.rc == 0, run.stdout[-3000:]
    for host in HOSTS:
        assert differences(fleet["originals"][host], files_of(fleet["roots"][host])) == [], host
    assert recap(run, "pve-gpu02")["changed"] == 0
    assert recap(run, "pve-gpu01")["changed"] >= 6
    # The planned changes for pve-gpu01, by concern, with diffs.
    planned = {e["task"]: e["res"] for e in run.results(host="pve-gpu01")}
    cmdline = planned["Ensure the kernel command line arguments"]
    assert cmdline["changed"] and cmdline["reboot_required"]
    diffs = "".join(d.get("after", "") for d in cmdline["diff"])
    assert "amd_pstate=active" in diffs and "processor.max_cstate=1" in diffs
    mrrs = planned["Set PCIe MaxReadReq on the NVIDIA functions"]
    assert [f["mrrs_after"] for f in mrrs["functions"]] == [4096] * 8
    lxc = planned["Regenerate the NVIDIA device entries of the GPU containers"]
    assert any("c 511:* rwm" in line for ct in lxc["cts"] for line in ct.get("lines", []))
    kernel = planned["Install and pin the kernel series"]
    assert kernel["changed"] and kernel["reboot_required"]
    # Issue 15: a readable plan. The kernel install and pin as a before/after entry; MaxReadReq in bytes; the
    # runtime as one summary (no Python source); no diff printed twice (the post-reboot regeneration does not
    # run without a reboot); pvetune's state file as one line.
    [kdiff] = [d for d in kernel["diff"] if d["after_header"] == "kernel (package, pin, next boot)"]
    assert "package proxmox-kernel-6.14: not installed" in kdiff["before"]
    assert "pin: the newest 6.14 kernel, known after the install" in kdiff["after"]
    assert "pcie:0000:01:00.0 MaxReadReq = 512 bytes (DevCtl 2137)" in mrrs["diff"][0]["before"]
    assert "pcie:0000:01:00.0 MaxReadReq = 4096 bytes (DevCtl 5137)" in mrrs["diff"][0]["after"]
    boot = planned["Install the boot-time re-application (library, helper, settings, units)"]
    [runtime] = [d for d in boot["diff"] if d["after_header"].startswith("pvetune boot runtime")]
    assert runtime["before"] == "not installed\n" and "create /usr/local/sbin/pvetune-boot (" in runtime["after"]
    assert not any("def " in d["after"] or "import " in d["after"] for d in boot["diff"])
    assert sum(len(d["after"].splitlines()) for d in boot["diff"]) < 40
    assert not run.results("Regenerate the GPU CTs' device entries for the current boot", event="runner_on_ok")
    [state] = [d for d in lxc["diff"] if d["after_header"] == "/var/lib/pvetune/nvidia-majors.json"]
    assert state["after"].startswith("current NVIDIA majors: ") and len(state["after"].splitlines()) == 1
    # The Intel host is planned on its own terms: intel_idle's C-state limit, never AMD's arguments (issue 17).
    intel = {e["task"]: e["res"] for e in run.results(host="pve-gpu05")}
    intel_diff = "".join(d.get("after", "") for d in intel["Ensure the kernel command line arguments"]["diff"])
    assert "intel_idle.max_cstate=1" in intel_diff
    assert "amd_pstate" not in intel_diff and "processor.max_cstate" not in intel_diff
    cpu = intel["Set the P-state driver mode, governor and EPP on every CPU policy"]
    assert cpu["pstate"]["driver"] == "intel_pstate" and cpu["pstate"]["action"] == "none"
    assert cpu["reboot_required"] is False
    assert {(g["key"], g["before"], g["after"]) for g in cpu["changes"]["runtime"]} == {
        ("cpufreq:policy[0-159]:scaling_governor", "powersave", "performance"),
        ("cpufreq:policy[0-159]:energy_performance_preference", "balance_performance", "performance")}
    # pve-gpu04 (pcie_acs_fix: true): one masked ACS write per switch port, and iommu=pt on the command line.
    gpu04 = {e["task"]: e["res"] for e in run.results(host="pve-gpu04")}
    acs = gpu04["Clear the ACS redirect bits between GPUs that share a PCIe switch"]
    assert [(p["bdf"], p["ctrl_before"], p["ctrl_after"]) for p in acs["ports"]] == [
        (b, "001d", "0011") for b in ACS_PORTS]
    assert acs["diff"][0]["before"].count(" ACSCtl = 001d (") == 8
    assert "pcie:0000:02:08.0 ACSCtl = 0011 (SrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd+" in acs[
        "diff"][0]["after"]
    assert "iommu=pt" in "".join(d.get("after", "") for d in gpu04["Ensure the kernel command line arguments"]["diff"])
    record = json.load(open(os.path.join(fleet["base"], "reports-check", os.listdir(
        os.path.join(fleet["base"], "reports-check"))[0], "pve-gpu02.json")))
    assert record["result"] == "ok" and record["check_mode"] is True
    assert record["record_kind"] == "plan" and "nothing on the host was changed" in record["note"]
    record = json.load(open(os.path.join(fleet["base"], "reports-check", os.listdir(
        os.path.join(fleet["base"], "reports-check"))[0], "pve-gpu01.json")))
    # A check run reboots nothing: the host that needs a reboot stays pending (a tree is never rebooted).
    assert record["result"] == "pending-reboot" and record["reboot_needed"] is True
    assert record["rebooted"] is False and record["would_reboot"] is False


def test_1b_without_the_policy_no_acs_write_is_planned(fleet, tmp_path):
    run = run_playbook(tmp_path, "fix.yml", inventory=fleet["inventory"], cmdline="--check --diff --tags pcie",
                       limit="pve-gpu04", extravars={"pvetune_policy": {"pcie_acs_fix": False},
                                                     "pvetune_report_dir": os.path.join(fleet["base"], "reports-c2")})
    assert run.rc == 0, run.stdout[-3000:]
    assert not run.results("Clear the ACS redirect bits between GPUs that share a PCIe switch",
                           event="runner_on_ok")
    assert "ACSCtl" not in run.stdout
    assert differences(fleet["originals"]["pve-gpu04"], files_of(fleet["roots"]["pve-gpu04"])) == []


def test_1c_check_diff_on_the_demo_fleet_is_short_and_shows_every_change(check_run):
    """The operator's view: the terminal output of `ansible-playbook fix.yml --check --diff` on the demo fleet
    (test_1's run; moved here from test_operator_ux.py, where it ran the same command on the snapshots)."""
    assert check_run.rc == 0, check_run.stdout[-3000:]
    lines = check_run.stdout.splitlines()
    # five hosts (367 lines for four before pve-gpu04; 536 with the GPU power and clocks tasks; 565 with the ARC
    # task and the memory sysctls and boost of issue 31)
    assert len(lines) < 590, len(lines)
    text = check_run.stdout
    for expected in ("+kernel.numa_balancing = 0", "+pcie:0000:01:00.0 MaxReadReq = 4096 bytes (DevCtl 5137)",
                     "amd_pstate=active processor.max_cstate=1", "intel_idle.max_cstate=1",
                     "+pin: the newest 6.14 kernel, known after the install", "+pin: 6.14.8-2-pve",
                     "+lxc.cgroup2.devices.allow: c 509:* rwm", "+create /usr/local/sbin/pvetune-boot",
                     "+amd_pstate:status = active", "energy_performance_preference = performance",
                     "+gpu:0000:41:00.0 power.limit = 600 W",
                     "+gpu:0000:61:00.0 applications clocks (memory,graphics MHz) = 14001,2430",
                     "+vm.swappiness = 10", "+cpufreq:boost = 1", "+zfs:zfs_arc_min = 8589934592",
                     "+options zfs zfs_arc_min=8589934592 zfs_arc_max=17179869184"):
        assert expected in text, expected
    assert "def main" not in text and text.count("--- before: /etc/pve/nodes/pve-gpu01/lxc/101.conf") == 1


def test_2_fix_then_every_check_passes_or_is_pending(fleet, tmp_path):
    run = run_playbook(tmp_path, "fix.yml", inventory=fleet["inventory"],
                       extravars={"pvetune_report_dir": os.path.join(fleet["base"], "reports-fix")})
    assert run.rc == 0, run.stdout[-3000:]
    assert recap(run, "pve-gpu02")["changed"] == 0
    audit = run_playbook(tmp_path, "audit.yml", inventory=fleet["inventory"],
                         extravars={"pvetune_report_dir": os.path.join(fleet["base"], "reports-audit")})
    doc = json.load(open(os.path.join(fleet["base"], "reports-audit", "latest", "audit.json")))
    for host in doc["hosts"]:
        statuses = {c["id"]: c["status"] for c in host["checks"]}
        bad = {k: v for k, v in statuses.items() if v in ("fail", "error")}
        # pcie.link at idle is not pvetune's to fix, nor are a CT's CPU counts, quota and memory (pve-gpu01's CT
        # 101), a CT's own user-space driver or CUDA runtime (pve-gpu04's CT 105, pve-gpu01's CT 101) or a GPU that
        # fell off the bus (pve-gpu04): their results say so (fix_tag "").
        bad.pop("pcie.link", None)
        for cid in ("lxc.resources", "nvidia.stack", "nvidia.compute_capability", "gpu.health", "pcie.aspm"):
            if cid in bad:
                assert [c["fix_tag"] for c in host["checks"] if c["id"] == cid] == [""], (host["host"], cid)
                bad.pop(cid)
        assert bad == {}, (host["host"], bad)
    gpu01 = {c["id"]: c["status"] for c in [h for h in doc["hosts"] if h["host"] == "pve-gpu01"][0]["checks"]}
    assert gpu01["boot.cmdline"] == "pending" and gpu01["kernel.version"] == "pending"
    assert gpu01["pcie.mrrs"] == gpu01["kernel.numa_balancing"] == "pass"
    # the runtime fixes of issue 31: swappiness 10, boost on; the ARC cap is configured and written (zfs_arc_min
    # first), but a tree has no kernel to move the ARC's c_max: it waits for the next zfs load (Molecule's
    # simulated kernel loads it after the reboot)
    assert gpu01["mem.sysctl"] == gpu01["cpu.boost"] == "pass" and gpu01["storage.zfs_arc"] == "pending"
    # CT 101's config is fixed; it was not restarted (no pvetune_restart_cts, no reboot): it still runs with the
    # device rules of its last start, in this audit as in the fix run's.
    assert gpu01["lxc.gpu_devices"] == "pending"
    # The Intel host without a reboot: the runtime fixes pass, the C-state limit waits for the boot.
    gpu05 = {c["id"]: c for c in [h for h in doc["hosts"] if h["host"] == "pve-gpu05"][0]["checks"]}
    assert {cid: gpu05[cid]["status"] for cid in ("cpu.scaling_driver", "cpu.governor", "cpu.epp", "cpu.cstates",
                                                   "boot.cmdline")} == {
        "cpu.scaling_driver": "pass", "cpu.governor": "pass", "cpu.epp": "pass", "cpu.cstates": "pending",
        "boot.cmdline": "pending"}
    assert "intel_idle.max_cstate=1 is configured in the boot loader" in gpu05["cpu.cstates"]["message"]
    gpu04 = {c["id"]: c for c in [h for h in doc["hosts"] if h["host"] == "pve-gpu04"][0]["checks"]}
    assert {cid: gpu04[cid]["status"] for cid in ("pcie.acs", "iommu.mode", "boot.cmdline", "pcie.bar1")} == {
        "pcie.acs": "pass", "iommu.mode": "pending", "boot.cmdline": "pending", "pcie.bar1": "warn"}
    boot = json.load(open(os.path.join(fleet["roots"]["pve-gpu04"], "etc/pvetune/pcie-mrrs.json")))
    assert boot["acs_ports"] == ACS_PORTS
    # The audit still fails exactly the CT problems the operator owns (no lxc_numa_pin in the demo policy).
    assert audit.rc == 2
    failing = {h["host"]: sorted(c["id"] for c in h["checks"] if c["status"] == "fail") for h in doc["hosts"]}
    assert {h: f for h, f in failing.items() if f} == {"pve-gpu01": ["lxc.resources", "nvidia.compute_capability",
                                                                    "pcie.aspm"],
                                                      "pve-gpu04": ["gpu.health", "lxc.resources", "nvidia.stack"]}
    # what the GPU fixes did: pve-gpu05's GPU 2 at its 600 W default again, pve-gpu03's GPU 3 at its default clocks
    gpu03 = {c["id"]: c for c in [h for h in doc["hosts"] if h["host"] == "pve-gpu03"][0]["checks"]}
    assert gpu05["gpu.power_limit"]["status"] == gpu03["gpu.clocks"]["status"] == "pass"


def test_3_second_fix_run_changes_nothing(fleet, tmp_path):
    run = run_playbook(tmp_path, "fix.yml", inventory=fleet["inventory"],
                       extravars={"pvetune_report_dir": os.path.join(fleet["base"], "reports-fix2")})
    assert run.rc == 0, run.stdout[-3000:]
    for host in HOSTS:
        assert recap(run, host)["changed"] == 0, (host, [e["task"] for e in run.results(host=host)
                                                         if e["res"].get("changed")])


def test_4_rollback_restores_every_touched_file(fleet, tmp_path):
    run = run_playbook(tmp_path, "rollback.yml", inventory=fleet["inventory"])
    assert run.rc == 0, run.stdout[-3000:]
    for host in HOSTS:
        expected = KEPT_KERNEL if host == "pve-gpu01" else []
        assert differences(fleet["originals"][host], files_of(fleet["roots"][host])) == expected, host
    grub_cfg = open(os.path.join(fleet["roots"]["pve-gpu01"], "boot/grub/grub.cfg")).read()
    assert "amd_pstate=active" not in grub_cfg and "processor.max_cstate" not in grub_cfg
    assert not os.path.exists(os.path.join(fleet["roots"]["pve-gpu01"], "etc/kernel/proxmox-boot-pin"))
    assert not os.path.exists(os.path.join(fleet["roots"]["pve-gpu01"], "var/lib/pvetune/manifest.json"))
    # Issue 33 (9): the kernel fix.yml installed stays, and with the pin gone GRUB boots the newest kernel: rollback
    # says so, with the kernel the next boot started before the fix and how to boot it again.
    (rolled,) = run.results(task_name="Restore the originals, remove what pvetune installed, put runtime values back",
                            host="pve-gpu01")
    next_boot = rolled["res"]["next_boot"]
    assert (next_boot["before_fix"], next_boot["after_rollback"]) == ("6.8.12-4-pve", "6.14.8-2-pve"), next_boot
    assert "proxmox-boot-tool kernel pin 6.8.12-4-pve" in next_boot["message"]
    assert "proxmox-boot-tool kernel pin 6.8.12-4-pve" in json.dumps(rolled["res"].get("warnings"))
    for host in HOSTS[1:]:   # no kernel installed there: the next boot is what it was, nothing to say
        (other,) = run.results(task_name="Restore the originals, remove what pvetune installed, put runtime values "
                                         "back", host=host)
        found = other["res"].get("next_boot") or {}
        assert not found.get("message") and found.get("before_fix") == found.get("after_rollback"), (host, found)
    again = run_playbook(tmp_path, "rollback.yml", inventory=fleet["inventory"])
    assert again.rc == 0
    for host in HOSTS:
        assert recap(again, host)["changed"] == 0
    assert os.path.isdir(DEMO_SNAPSHOTS)


def test_5_legacy_reboot_ok_still_works_and_is_deprecated(fleet, check_run, tmp_path):
    """-e reboot_ok=true (the old name of pvetune_reboot_ok) is honoured, with a deprecation warning. The run
    without it is test_1's (--check, neither name given)."""
    def pending_note(run):
        (note,) = run.results(task_name="Note that the host is pending a reboot", host="pve-gpu01")
        return note["res"]["msg"]

    old = run_playbook(tmp_path, "fix.yml", inventory=fleet["inventory"], cmdline="--check", limit="pve-gpu01",
                       extravars={"reboot_ok": True,
                                  "pvetune_report_dir": os.path.join(fleet["base"], "reports-legacy")})
    assert old.rc == 0, old.stdout[-3000:]
    (preflight,) = old.results(task_name="Check every input of this run before anything is changed")
    deprecations = json.dumps(preflight["res"].get("deprecations", [])) + old.stdout
    assert "reboot_ok is deprecated, use pvetune_reboot_ok" in deprecations, deprecations[-3000:]
    # Its effect: the reboot was allowed, and only the root (a tree, never rebooted) kept the host pending.
    assert "its root is a tree" in pending_note(old)
    new = check_run
    assert new.rc == 0, new.stdout[-3000:]
    assert "pvetune_reboot_ok is false" in pending_note(new)
    assert "deprecated" not in json.dumps(new.results(task_name="Check every input of this run before anything "
                                                                "is changed"))
