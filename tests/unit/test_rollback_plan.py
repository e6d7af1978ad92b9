"""Tests for module_utils/pvetune/rollback.py: the rollback plan made from the manifest.

The manifests come from real ChangeSet runs on a tmp_path tree (so the planner is held to what the
change set records), plus a few hand-made entries for damaged state.  plan_rollback only plans: each
test checks that nothing was written, then applies the plan where the result matters.
"""
import hashlib
import json
import os

import pytest
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.rollback import (
    RollbackError,
    is_boot_file,
    plan_rollback,
    remaining_manifest,
    runtime_order,
)

GRUB = b'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
SYSCTL = b"vm.swappiness = 60\n"


def real(root, host_path):
    return os.path.join(str(root), host_path.lstrip("/"))


def put(root, host_path, data, mode=None):
    path = real(root, host_path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
    if mode is not None:
        os.chmod(path, mode)


def get(root, host_path):
    with open(real(root, host_path), "rb") as handle:
        return handle.read()


def load(root):
    with open(real(root, "/var/lib/pvetune/manifest.json"), encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture
def tree(tmp_path):
    """A host on which one pvetune run changed grub and a sysctl file, created a drop-in in a new
    directory and a unit symlink, and recorded runtime values."""
    root = tmp_path / "host"
    put(root, "/etc/default/grub", GRUB)
    put(root, "/etc/sysctl.d/90-pvetune.conf", SYSCTL, 0o640)
    os.makedirs(real(root, "/etc/systemd/system/multi-user.target.wants"))
    os.symlink("/lib/systemd/system/old.service", real(root, "/etc/systemd/system/multi-user.target.wants/old.service"))
    cs = ChangeSet(FsRoot(str(root)), run_id="fix1")
    cs.plan_file("/etc/default/grub", b'GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_pstate=active"\n')
    cs.plan_file("/etc/sysctl.d/90-pvetune.conf", b"vm.swappiness = 10\n")
    cs.plan_file("/etc/default/grub.d/90-pvetune.cfg", b'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT"\n')
    cs.plan_file("/etc/pvetune/new/settings.json", b"{}\n")
    cs.plan_symlink("/etc/systemd/system/multi-user.target.wants/pvetune-cpufreq.service",
                    "/etc/systemd/system/pvetune-cpufreq.service")
    cs.plan_symlink("/etc/systemd/system/multi-user.target.wants/old.service", "/lib/systemd/system/new.service")
    for key, before, after in (("pcie:0000:41:00.0", "2930", "5930"), ("sysctl:vm.swappiness", "60", "10"),
                               ("cpufreq:policy0:energy_performance_preference", "balance_performance",
                                "performance"),
                               ("cpufreq:policy0:scaling_governor", "powersave", "performance"),
                               ("amd_pstate:status", "passive", "active")):
        cs.plan_runtime(key, "/x", before, after)
    cs.apply()
    return root


def rollback_changes(root, check_mode=False):
    return ChangeSet(FsRoot(str(root)), check_mode=check_mode, run_id="rollback1", record=False)


def test_clean_host_restores_and_removes_everything(tree):
    manifest = load(tree)
    changes = rollback_changes(tree)
    plan = plan_rollback(changes, manifest)
    assert sorted(plan["restored"]) == ["/etc/default/grub", "/etc/sysctl.d/90-pvetune.conf",
                                        "/etc/systemd/system/multi-user.target.wants/old.service"]
    assert sorted(plan["removed"]) == ["/etc/default/grub.d/90-pvetune.cfg", "/etc/pvetune/new/settings.json",
                                       "/etc/systemd/system/multi-user.target.wants/pvetune-cpufreq.service"]
    assert plan["unchanged"] == [] and plan["conflicts"] == []
    assert sorted(plan["done_paths"]) == sorted(manifest["files"])
    assert sorted(plan["boot_files"]) == ["/etc/default/grub", "/etc/default/grub.d/90-pvetune.cfg"]
    # only planned: nothing changed yet
    assert get(tree, "/etc/sysctl.d/90-pvetune.conf") == b"vm.swappiness = 10\n"
    changes.apply()
    assert get(tree, "/etc/default/grub") == GRUB
    assert get(tree, "/etc/sysctl.d/90-pvetune.conf") == SYSCTL
    assert oct(os.stat(real(tree, "/etc/sysctl.d/90-pvetune.conf")).st_mode & 0o777) == oct(0o640)
    assert not os.path.exists(real(tree, "/etc/default/grub.d/90-pvetune.cfg"))
    assert not os.path.exists(real(tree, "/etc/pvetune/new/settings.json"))
    wants = "/etc/systemd/system/multi-user.target.wants/"
    assert not os.path.lexists(real(tree, wants + "pvetune-cpufreq.service"))
    assert os.readlink(real(tree, wants + "old.service")) == "/lib/systemd/system/old.service"
    assert load(tree) == manifest  # record=False: the rollback's own writes are not recorded
    # a second plan on the rolled-back host, with the manifest not trimmed yet (a rollback killed while update-grub
    # ran), finds everything already original, and still refreshes the boot loader
    again = plan_rollback(rollback_changes(tree), manifest)
    assert sorted(again["unchanged"]) == sorted(manifest["files"])
    assert again["restored"] == again["removed"] == []
    assert again["boot_files"] == ["/etc/default/grub", "/etc/default/grub.d/90-pvetune.cfg"]


def test_files_in_created_directories_come_first(tree):
    manifest = load(tree)
    changes = rollback_changes(tree)
    plan_rollback(changes, manifest)
    depths = [f["path"].count("/") for f in changes.files]
    assert depths == sorted(depths, reverse=True)


def test_a_file_changed_since_is_a_conflict_unless_forced(tree):
    put(tree, "/etc/sysctl.d/90-pvetune.conf", b"vm.swappiness = 1  # edited by hand\n")
    put(tree, "/etc/pvetune/new/settings.json", b'{"edited": true}\n')
    manifest = load(tree)
    changes = rollback_changes(tree)
    plan = plan_rollback(changes, manifest)
    conflicts = {c["path"]: c["reason"] for c in plan["conflicts"]}
    assert sorted(conflicts) == ["/etc/pvetune/new/settings.json", "/etc/sysctl.d/90-pvetune.conf"]
    assert conflicts["/etc/sysctl.d/90-pvetune.conf"].startswith("changed since pvetune wrote it (sha256 ")
    assert conflicts["/etc/pvetune/new/settings.json"].startswith("pvetune created it, but it changed since")
    assert hashlib.sha256(b"vm.swappiness = 10\n").hexdigest() in conflicts["/etc/sysctl.d/90-pvetune.conf"]
    assert not set(conflicts) & set(plan["done_paths"])  # they stay in the manifest
    assert not set(conflicts) & {f["path"] for f in changes.files}
    assert "/etc/default/grub" in plan["restored"]  # the rest is rolled back
    forced = rollback_changes(tree)
    plan = plan_rollback(forced, manifest, force=True)
    assert plan["conflicts"] == []
    assert "/etc/sysctl.d/90-pvetune.conf" in plan["restored"] and "/etc/pvetune/new/settings.json" in plan["removed"]
    forced.apply()
    assert get(tree, "/etc/sysctl.d/90-pvetune.conf") == SYSCTL
    assert not os.path.exists(real(tree, "/etc/pvetune/new/settings.json"))


def test_a_deleted_file_is_a_conflict_unless_forced(tree):
    os.unlink(real(tree, "/etc/default/grub"))
    manifest = load(tree)
    plan = plan_rollback(rollback_changes(tree), manifest)
    assert [c["path"] for c in plan["conflicts"]] == ["/etc/default/grub"]
    assert "/etc/default/grub" not in plan["boot_files"]
    changes = rollback_changes(tree)
    plan = plan_rollback(changes, manifest, force=True)
    assert "/etc/default/grub" in plan["restored"] and "/etc/default/grub" in plan["boot_files"]
    changes.apply()
    assert get(tree, "/etc/default/grub") == GRUB


def test_a_file_already_original_or_gone_is_unchanged(tree):
    put(tree, "/etc/default/grub", GRUB)  # someone put it back by hand
    os.unlink(real(tree, "/etc/default/grub.d/90-pvetune.cfg"))  # and removed the drop-in
    manifest = load(tree)
    changes = rollback_changes(tree)
    plan = plan_rollback(changes, manifest)
    assert {"/etc/default/grub", "/etc/default/grub.d/90-pvetune.cfg"} <= set(plan["unchanged"])
    assert {"/etc/default/grub", "/etc/default/grub.d/90-pvetune.cfg"} <= set(plan["done_paths"])
    # The boot loader is refreshed all the same: grub.cfg may still carry what the files said before.
    assert plan["boot_files"] == ["/etc/default/grub", "/etc/default/grub.d/90-pvetune.cfg"]
    assert "/etc/default/grub" not in {f["path"] for f in changes.files}


def test_symlink_changed_since_is_a_conflict_unless_forced(tree):
    link = "/etc/systemd/system/multi-user.target.wants/old.service"
    os.unlink(real(tree, link))
    os.symlink("/somewhere/else.service", real(tree, link))
    manifest = load(tree)
    plan = plan_rollback(rollback_changes(tree), manifest)
    assert plan["conflicts"] == [{"path": link, "reason": "symlink now points to /somewhere/else.service, not to "
                                                          "what pvetune wrote (/lib/systemd/system/new.service)"}]
    changes = rollback_changes(tree)
    plan = plan_rollback(changes, manifest, force=True)
    assert link in plan["restored"]
    changes.apply()
    assert os.readlink(real(tree, link)) == "/lib/systemd/system/old.service"


def test_symlink_already_original_is_unchanged(tree):
    link = "/etc/systemd/system/multi-user.target.wants/pvetune-cpufreq.service"
    os.unlink(real(tree, link))  # pvetune created it; it is gone again
    plan = plan_rollback(rollback_changes(tree), load(tree))
    assert link in plan["unchanged"] and link in plan["done_paths"] and link not in plan["removed"]


def test_a_missing_or_damaged_original_stops_the_rollback(tree):
    manifest = load(tree)
    put(tree, "/var/lib/pvetune/originals/etc/default/grub", b"damaged\n")
    with pytest.raises(RollbackError, match="backup of /etc/default/grub .* is missing or damaged"):
        plan_rollback(rollback_changes(tree), manifest)
    os.unlink(real(tree, "/var/lib/pvetune/originals/etc/default/grub"))
    with pytest.raises(RollbackError, match="missing or damaged"):
        plan_rollback(rollback_changes(tree), manifest)
    broken = json.loads(json.dumps(manifest))
    del broken["files"]["/etc/default/grub"]["original"]
    with pytest.raises(RollbackError, match="manifest has no original for /etc/default/grub"):
        plan_rollback(rollback_changes(tree), broken)


def test_a_write_that_failed_half_way_is_rolled_back_only_when_still_original(tree):
    """An entry without written_sha256 (the write failed after the original was kept)."""
    manifest = load(tree)
    entry = manifest["files"]["/etc/sysctl.d/90-pvetune.conf"]
    del entry["written_sha256"]
    put(tree, "/etc/sysctl.d/90-pvetune.conf", SYSCTL)  # restore_run put it back
    plan = plan_rollback(rollback_changes(tree), manifest)
    assert "/etc/sysctl.d/90-pvetune.conf" in plan["unchanged"]
    put(tree, "/etc/sysctl.d/90-pvetune.conf", b"half\n")
    plan = plan_rollback(rollback_changes(tree), manifest)
    assert "/etc/sysctl.d/90-pvetune.conf" in [c["path"] for c in plan["conflicts"]]


def test_restoring_a_file_now_a_symlink_is_refused(tree):
    """The change set never writes through a symlink, also when rolling back (force or not)."""
    os.unlink(real(tree, "/etc/sysctl.d/90-pvetune.conf"))
    put(tree, "/usr/share/x.conf", b"vm.swappiness = 10\n")  # same bytes as pvetune wrote
    os.symlink("/usr/share/x.conf", real(tree, "/etc/sysctl.d/90-pvetune.conf"))
    with pytest.raises(ChangeError, match="is a symlink"):
        plan_rollback(rollback_changes(tree), load(tree), force=True)
    assert get(tree, "/usr/share/x.conf") == b"vm.swappiness = 10\n"


def test_runtime_values_in_a_safe_order(tree):
    plan = plan_rollback(rollback_changes(tree), load(tree))
    assert plan["runtime"] == ["amd_pstate:status", "cpufreq:policy0:scaling_governor",
                               "cpufreq:policy0:energy_performance_preference", "sysctl:vm.swappiness",
                               "pcie:0000:41:00.0"]


def test_runtime_order_puts_every_governor_before_any_epp_and_unknown_keys_last():
    keys = ["zz:other", "pcie:0000:01:00.0", "cpufreq:policy1:energy_performance_preference",
            "cpufreq:policy0:energy_performance_preference", "cpufreq:policy1:scaling_governor",
            "cpufreq:policy0:scaling_governor", "sysctl:kernel.numa_balancing", "amd_pstate:status", "aa:other"]
    assert runtime_order(keys) == [
        "amd_pstate:status", "cpufreq:policy0:scaling_governor", "cpufreq:policy1:scaling_governor",
        "cpufreq:policy0:energy_performance_preference", "cpufreq:policy1:energy_performance_preference",
        "sysctl:kernel.numa_balancing", "pcie:0000:01:00.0", "aa:other", "zz:other"]


@pytest.mark.parametrize("path,boot", [
    ("/etc/default/grub", True), ("/etc/default/grub.d/90-pvetune.cfg", True), ("/etc/kernel/cmdline", True),
    ("/etc/kernel/proxmox-boot-pin", True), ("/etc/kernel/next-boot-pin", True),
    ("/etc/sysctl.d/90-pvetune.conf", False), ("/etc/kernel/postinst.d/x", False), ("/etc/defaults/grub", False),
])
def test_boot_files(path, boot):
    assert is_boot_file(path) is boot


def test_check_mode_plans_the_same_and_writes_nothing(tree):
    manifest = load(tree)
    before = get(tree, "/etc/default/grub")
    changes = rollback_changes(tree, check_mode=True)
    plan = plan_rollback(changes, manifest)
    assert sorted(plan["done_paths"]) == sorted(manifest["files"])
    assert changes.apply() == []
    assert get(tree, "/etc/default/grub") == before


def test_empty_manifest_plans_nothing(tree):
    plan = plan_rollback(rollback_changes(tree), {"version": 1, "files": {}, "runtime": {}})
    assert plan == {"restored": [], "removed": [], "unchanged": [], "conflicts": [], "boot_files": [],
                    "runtime": [], "done_paths": []}


# -- remaining_manifest ----------------------------------------------------------------------------
def test_remaining_manifest_keeps_what_was_not_rolled_back(tree):
    put(tree, "/etc/sysctl.d/90-pvetune.conf", b"edited\n")
    manifest = load(tree)
    assert manifest["dirs"]  # /etc/default/grub.d, /etc/pvetune, /etc/pvetune/new
    plan = plan_rollback(rollback_changes(tree), manifest)
    left = remaining_manifest(manifest, plan["done_paths"], ["amd_pstate:status", "sysctl:vm.swappiness"])
    assert list(left["files"]) == ["/etc/sysctl.d/90-pvetune.conf"]
    assert left["files"]["/etc/sysctl.d/90-pvetune.conf"] == manifest["files"]["/etc/sysctl.d/90-pvetune.conf"]
    assert sorted(left["runtime"]) == ["cpufreq:policy0:energy_performance_preference",
                                       "cpufreq:policy0:scaling_governor", "pcie:0000:41:00.0"]
    assert left["dirs"] == manifest["dirs"]  # a file left behind may still live in one of them
    assert left["version"] == manifest["version"]
    assert sorted(manifest["files"]) != list(left["files"])  # the input is not modified
    done = remaining_manifest(manifest, list(manifest["files"]), [])
    assert done["files"] == {} and done["dirs"] == [] and len(done["runtime"]) == 5
