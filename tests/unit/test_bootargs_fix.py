# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/pvetune/concerns/bootargs/fix.py and library/pvetune_cmdline.py.

Module tests run pvetune_cmdline in-process (tests/modharness.py) on scratch copies of the demo
hosts (scripts/scratch_host.make_scratch), whose .pvetune/bin holds the stand-ins of update-grub and
proxmox-boot-tool (tests/standins/README.md).  The stand-ins log every call to .pvetune/calls.log.
"""
import json
import os
import pathlib
import shutil
import sys
import tempfile

import pytest
from ansible.module_utils.pvetune.concerns.bootargs import fix as bootargs_fix
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.formats.grub_parse import GrubParseError
from ansible.module_utils.pvetune.formats.kernel_cmdline import BootConfigError
from conftest import FIXTURES, TOP, load_library_module
from modharness import run_module

sys.path.insert(0, os.path.join(TOP, "scripts"))
from scratch_host import make_scratch

REQUIRED = ["amd_pstate=active", "processor.max_cstate=1"]
DROPIN = "etc/default/grub.d/90-pvetune.cfg"
MAXCSTATE5 = os.path.join(FIXTURES, "boot", "etc_default_grub_pve_maxcstate5.cfg")
INJECTIONS = [
    "amd_pstate=active; reboot",
    "$(id)",
    "amd_pstate=`id`",
    "--foo",
    "quiet\nreboot",
    "../etc/passwd",
    "a" * 300,
    "processor.max_cstate=1 && reboot",
]


# -- helpers -------------------------------------------------------------------------
# Temporary trees live in a private directory removed at the end of the session, not in pytest's
# tmp_path: pytest purges old numbered basetemp directories (also other runs') when a session that
# used tmp_path ends, which on a busy disk cost minutes.
@pytest.fixture(scope="session")
def session_dir():
    path = tempfile.mkdtemp(prefix="pvetune-bootfix-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def workdir(session_dir):
    path = tempfile.mkdtemp(dir=session_dir)
    yield pathlib.Path(path)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def templates(session_dir):
    """One scratch_host.make_scratch copy per demo host per session (stand-ins installed)."""
    made = {}

    def get(host):
        if host not in made:
            made[host] = make_scratch(host, os.path.join(session_dir, "template-" + host))
        return made[host]
    return get


@pytest.fixture
def scratch(templates, workdir):
    """A private copy of a demo host's scratch tree (from make_scratch) for one test.

    Everything is copied except sys/, of which only sys/firmware is: the boot modules and the stand-ins
    read nothing else there (EFI mode, the LoaderInfo variable), and the rest is 7000 sysfs files whose
    copying and deletion per test dominated the run time.  tree() compares everything in the copy.
    """
    def make(host):
        src = templates(host)
        dest = str(workdir / host)
        shutil.copytree(src, dest, symlinks=True, ignore=lambda d, names: ["sys"] if d == src else [])
        os.mkdir(os.path.join(dest, "sys"))
        if os.path.isdir(os.path.join(src, "sys", "firmware")):
            shutil.copytree(os.path.join(src, "sys", "firmware"), os.path.join(dest, "sys", "firmware"),
                            symlinks=True)
        return dest
    return make


def tree(root, exclude=(".pvetune/calls.log",)):
    """Every file (bytes) and symlink (target) under root, by relative path."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel in exclude:
                continue
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            else:
                with open(path, "rb") as handle:
                    out[rel] = handle.read()
    return out


def changed_paths(before, after):
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def calls(root):
    path = os.path.join(root, ".pvetune", "calls.log")
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read(root, rel):
    with open(os.path.join(root, rel)) as handle:
        return handle.read()


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def cmdline(root, check_mode=False, diff=False, **args):
    params = {"root": root, "run_id": "t1", "ensure": REQUIRED}
    params.update(args)
    return run_module("pvetune_cmdline", params, check_mode=check_mode, diff=diff)


def not_state(paths):
    """Paths outside pvetune's state directory and the stand-in log."""
    return [p for p in paths if not p.startswith("var/lib/pvetune/") and p != ".pvetune/calls.log"]


def grub_with_maxcstate5(root):
    shutil.copyfile(MAXCSTATE5, os.path.join(root, "etc", "default", "grub"))


# -- pure functions ------------------------------------------------------------------
def test_validate_request_accepts_the_policy_defaults():
    assert bootargs_fix.validate_request(REQUIRED, []) == (REQUIRED, [])
    assert bootargs_fix.validate_request([], ["intel_idle.max_cstate"]) == ([], ["intel_idle.max_cstate"])


@pytest.mark.parametrize("bad", INJECTIONS)
def test_validate_request_rejects_injection(bad):
    with pytest.raises(BootConfigError):
        bootargs_fix.validate_request([bad], [])
    with pytest.raises(BootConfigError):
        bootargs_fix.validate_request([], [bad])


def test_validate_request_rejects_contradictions():
    with pytest.raises(BootConfigError, match="both ensured"):
        bootargs_fix.validate_request(["processor.max_cstate=1"], ["processor.max_cstate"])
    with pytest.raises(BootConfigError, match="conflicting"):
        bootargs_fix.validate_request(["processor.max_cstate=1", "processor.max-cstate=5"], [])


@pytest.mark.parametrize("path", ["/etc/default/grub.d/../grub", "/etc/grub.d/90-pvetune.cfg",
                                  "/etc/default/grub.d/90-pvetune", "/etc/default/grub.d/a b.cfg",
                                  "/etc/default/grub.d/.hidden.cfg", "etc/default/grub.d/x.cfg"])
def test_validate_dropin(path):
    assert bootargs_fix.validate_dropin("/etc/default/grub.d/90-pvetune.cfg")
    with pytest.raises(BootConfigError):
        bootargs_fix.validate_dropin(path)


def test_reboot_needed_compares_only_the_managed_arguments():
    configured = ["quiet", "amd_pstate=active", "processor.max_cstate=1"]
    running_old = "BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet".split()
    running_new = ("initrd=\\EFI\\proxmox\\6.14.8-2-pve\\initrd.img-6.14.8-2-pve root=ZFS=rpool/ROOT/pve-1 "
                   "processor.max-cstate=1 boot=zfs amd_pstate=active").split()
    assert bootargs_fix.reboot_needed(configured, running_old, REQUIRED, []) is True
    # BOOT_IMAGE/initrd/root differ and the order and -/_ spelling differ: no reboot for that.
    assert bootargs_fix.reboot_needed(configured, running_new, REQUIRED, []) is False
    assert bootargs_fix.reboot_needed(configured, running_new + ["processor.max_cstate=5"], REQUIRED, []) is True
    # A removed argument still on the running kernel needs a reboot.
    assert bootargs_fix.reboot_needed(["quiet"], ["quiet", "iommu=pt"], [], ["iommu"]) is True
    assert bootargs_fix.reboot_needed(["quiet"], ["quiet", "intel_iommu=on"], [], ["iommu"]) is False
    assert bootargs_fix.reboot_needed(configured, None, REQUIRED, []) is True


def test_refresh_command():
    assert bootargs_fix.refresh_command("grub", False) == ("update-grub", [])
    assert bootargs_fix.refresh_command("grub", True) == ("proxmox-boot-tool", ["refresh"])
    assert bootargs_fix.refresh_command("systemd-boot", True) == ("proxmox-boot-tool", ["refresh"])


def test_grub_cfg_args_reads_the_first_linux_line():
    with open(os.path.join(TOP, "demo", "snapshots", "pve-gpu01", "boot", "grub", "grub.cfg")) as handle:
        assert bootargs_fix.grub_cfg_args(handle.read()) == ["root=/dev/mapper/pve-root", "ro", "quiet"]
    assert bootargs_fix.grub_cfg_args("set default=0\n") is None
    assert bootargs_fix.grub_cfg_args(None) is None


def test_plan_grub_replaces_a_conflicting_value_in_place(workdir):
    root = workdir / "host"
    (root / "etc" / "default").mkdir(parents=True)
    shutil.copyfile(MAXCSTATE5, str(root / "etc" / "default" / "grub"))
    plan = bootargs_fix.plan_cmdline(FsRoot(str(root)), "grub", REQUIRED, [])
    assert [f[0] for f in plan["files"]] == ["/etc/default/grub"]  # one file, no drop-in
    path, old, new = plan["files"][0]
    changed = [(a, b) for a, b in zip(old.splitlines(), new.splitlines()) if a != b]
    assert changed == [('GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on iommu=pt processor.max_cstate=5"',
                        'GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on iommu=pt processor.max_cstate=1 '
                        'amd_pstate=active"')]
    assert len(old.splitlines()) == len(new.splitlines())
    assert plan["after"] == ["quiet", "amd_iommu=on", "iommu=pt", "processor.max_cstate=1", "amd_pstate=active"]
    assert {c["action"] for c in plan["arg_changes"]} == {"replace", "add"}
    assert any("command substitution" in w for w in plan["warnings"])  # GRUB_DISTRIBUTOR=`lsb_release ...`


def test_plan_grub_refuses_what_it_cannot_evaluate(workdir):
    root = workdir / "host"
    (root / "etc" / "default").mkdir(parents=True)
    (root / "etc" / "default" / "grub").write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet $(cat /x)"\n')
    with pytest.raises(GrubParseError):
        bootargs_fix.plan_cmdline(FsRoot(str(root)), "grub", REQUIRED, [])


def test_plan_systemd_boot_edits_only_the_first_line(workdir):
    root = workdir / "host"
    (root / "etc" / "kernel").mkdir(parents=True)
    (root / "etc" / "kernel" / "cmdline").write_text("root=ZFS=rpool/ROOT/pve-1 boot=zfs processor.max_cstate=5\n"
                                                    "# kept\n")
    plan = bootargs_fix.plan_cmdline(FsRoot(str(root)), "systemd-boot", REQUIRED, [])
    assert plan["files"][0][2] == ("root=ZFS=rpool/ROOT/pve-1 boot=zfs processor.max_cstate=1 amd_pstate=active\n"
                                   "# kept\n")
    assert any("first line" in w for w in plan["warnings"])


def test_a_change_that_makes_the_command_line_too_long_to_boot_is_refused(workdir):
    """The kernel keeps 2047 bytes (x86 COMMAND_LINE_SIZE) and cuts the rest at boot, silently: pvetune does not
    write a configuration whose arguments (the host's and its own) leave the boot loader too little room."""
    root = workdir / "host"
    (root / "etc" / "kernel").mkdir(parents=True)
    long_args = " ".join("opt%02d=%s" % (i, "v" * 91) for i in range(19))   # with root=: 1,887 bytes configured
    (root / "etc" / "kernel" / "cmdline").write_text("root=ZFS=rpool/ROOT/pve-1 %s\n" % long_args)
    with pytest.raises(BootConfigError) as info:
        bootargs_fix.plan_cmdline(FsRoot(str(root)), "systemd-boot", REQUIRED, [])
    assert "would be 1928 bytes, over the 1919 the kernel keeps on x86" in str(info.value)
    # Nothing to change: the plan stands (the audit reports the host as it is; pvetune only refuses to write).
    (root / "etc" / "kernel" / "cmdline").write_text("root=ZFS=rpool/ROOT/pve-1 %s %s\n"
                                                    % (long_args, " ".join(REQUIRED)))
    assert bootargs_fix.plan_cmdline(FsRoot(str(root)), "systemd-boot", REQUIRED, [])["files"] == []


def test_plan_systemd_boot_without_cmdline_file_is_refused(workdir):
    (workdir / "etc").mkdir()
    with pytest.raises(BootConfigError, match="/etc/kernel/cmdline"):
        bootargs_fix.plan_cmdline(FsRoot(str(workdir)), "systemd-boot", REQUIRED, [])


# -- the module on the demo hosts ------------------------------------------------------
def test_gpu01_check_mode_writes_nothing_and_reports_the_diff(scratch):
    root = scratch("pve-gpu01")
    before = tree(root, exclude=())
    res = cmdline(root, check_mode=True, diff=True)
    assert res["changed"] is True
    assert tree(root, exclude=()) == before  # not even calls.log: nothing ran
    assert calls(root) == []
    assert res["files"] == ["/etc/default/grub.d/90-pvetune.cfg"]
    assert res["diff"][0]["after_header"] == "/etc/default/grub.d/90-pvetune.cfg"
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT amd_pstate=active processor.max_cstate=1"' \
        in res["diff"][0]["after"]
    assert res["skipped_commands"] == [{"command": "update-grub", "reason": "check mode"}]
    assert res["loader"]["name"] == "grub" and res["loader"]["managed_by_pbt"] is False
    assert res["configured_args"] == ["quiet", "amd_pstate=active", "processor.max_cstate=1"]
    assert res["reboot_required"] is True


def test_gpu01_apply_changes_exactly_the_dropin_and_grub_cfg_then_is_idempotent(scratch):
    root = scratch("pve-gpu01")
    before = tree(root)
    res = cmdline(root)
    assert res["changed"] is True and not res.get("failed")
    after = tree(root)
    assert not_state(changed_paths(before, after)) == ["boot/grub/grub.cfg", DROPIN]
    assert calls(root) == [["update-grub"]]
    assert [c["cmd"] for c in res["commands"]] == [["update-grub"]]
    assert "Generating grub configuration file ..." in res["commands"][0]["stderr"]
    cfg = read(root, "boot/grub/grub.cfg")
    linux = [ln for ln in cfg.splitlines() if ln.strip().startswith("linux")]
    assert len(linux) == 3
    assert all(ln.endswith("ro quiet amd_pstate=active processor.max_cstate=1") for ln in linux)
    manifest = json.loads(read(root, "var/lib/pvetune/manifest.json"))
    assert manifest["files"]["/etc/default/grub.d/90-pvetune.cfg"]["existed"] is False
    assert res["reboot_required"] is True
    assert res["effective_args"][0].startswith("BOOT_IMAGE=")

    again = cmdline(root, run_id="t2")
    assert again["changed"] is False
    assert again["commands"] == [] and again["skipped_commands"] == []
    assert calls(root) == [["update-grub"]]
    assert tree(root) == after
    assert again["reboot_required"] is True  # configured, not yet booted


def test_gpu01_conflicting_maxcstate_is_replaced_in_place(scratch):
    root = scratch("pve-gpu01")
    grub_with_maxcstate5(root)
    before = tree(root)
    res = cmdline(root, diff=True)
    assert res["changed"] is True
    assert not_state(changed_paths(before, tree(root))) == ["boot/grub/grub.cfg", "etc/default/grub"]
    assert not os.path.exists(os.path.join(root, DROPIN))
    text = read(root, "etc/default/grub")
    assert "processor.max_cstate=5" not in "".join(ln for ln in text.splitlines(True) if not ln.startswith("#"))
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on iommu=pt processor.max_cstate=1 amd_pstate=active"' in text
    with open(MAXCSTATE5) as handle:
        original = handle.read().splitlines()
    assert [a for a, b in zip(original, text.splitlines()) if a != b] == [
        'GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on iommu=pt processor.max_cstate=5"']
    assert "processor.max_cstate=1 amd_pstate=active" in read(root, "boot/grub/grub.cfg")
    assert [c["action"] for c in res["arg_changes"]] == ["replace", "add"]
    assert cmdline(root, run_id="t2")["changed"] is False


def test_gpu01_remove_a_key(scratch):
    root = scratch("pve-gpu01")
    grub_with_maxcstate5(root)
    res = cmdline(root, ensure=[], remove=["iommu", "amd_iommu=off"])
    assert res["changed"] is True
    assert res["configured_args"] == ["quiet", "amd_iommu=on", "processor.max_cstate=5"]
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_iommu=on processor.max_cstate=5"' in read(root, "etc/default/grub")
    # amd_iommu is a managed key (remove amd_iommu=off): configured "on", the running kernel has none.
    assert res["reboot_required"] is True
    again = cmdline(root, ensure=[], remove=["iommu"], run_id="t2")
    assert again["changed"] is False
    assert again["reboot_required"] is False  # neither configured nor running has iommu=


def test_gpu03_conflicting_amd_pstate_passive_is_fixed(scratch):
    root = scratch("pve-gpu03")
    before = tree(root)
    res = cmdline(root)
    assert res["changed"] is True
    assert res["configured_args_before"] == ["quiet", "amd_pstate=passive", "amd_pstate=active",
                                             "processor.max_cstate=1", "iommu=pt"]
    assert res["configured_args"] == ["quiet", "amd_pstate=active", "processor.max_cstate=1", "iommu=pt"]
    assert not_state(changed_paths(before, tree(root))) == ["boot/grub/grub.cfg", "etc/default/grub", DROPIN]
    assert res["reboot_required"] is True  # running with amd_pstate=passive
    assert cmdline(root, run_id="t2")["changed"] is False


def test_stale_grub_cfg_is_regenerated(scratch):
    root = scratch("pve-gpu01")
    cmdline(root)
    # Someone restores an old grub.cfg (or edited the drop-in by hand and never ran update-grub).
    shutil.copyfile(os.path.join(TOP, "demo", "snapshots", "pve-gpu01", "boot", "grub", "grub.cfg"),
                    os.path.join(root, "boot", "grub", "grub.cfg"))
    check = cmdline(root, check_mode=True, run_id="t2")
    assert check["changed"] is True and check["regenerated"] is True and check["files"] == []
    res = cmdline(root, run_id="t3")
    assert res["changed"] is True and res["regenerated"] is True
    assert "does not carry the configured kernel arguments" in json.dumps(res["warnings"])
    assert "amd_pstate=active" in read(root, "boot/grub/grub.cfg")
    assert cmdline(root, run_id="t4")["changed"] is False


def test_gpu02_systemd_boot_already_fine_changes_nothing(scratch):
    root = scratch("pve-gpu02")
    before = tree(root)
    res = cmdline(root)
    assert res["changed"] is False
    assert res["loader"]["name"] == "systemd-boot" and res["loader"]["managed_by_pbt"] is True
    assert res["loader"]["rule"] == "pbt-status"
    assert calls(root) == [["proxmox-boot-tool", "status"]]  # read-only detection only
    assert tree(root) == before
    assert res["reboot_required"] is False


def test_gpu02_systemd_boot_edit_and_refresh(scratch):
    root = scratch("pve-gpu02")
    write(root, "etc/kernel/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs processor.max_cstate=5 iommu=pt\n"
                                      "# pvetune test: second line, ignored by proxmox-boot-tool\n")
    before = tree(root)
    check = cmdline(root, check_mode=True, diff=True)
    assert check["changed"] is True and tree(root) == before
    assert check["skipped_commands"] == [{"command": "proxmox-boot-tool refresh", "reason": "check mode"}]
    assert calls(root) == [["proxmox-boot-tool", "status"]]

    res = cmdline(root, remove=["iommu"])
    assert res["changed"] is True
    first = "root=ZFS=rpool/ROOT/pve-1 boot=zfs processor.max_cstate=1 amd_pstate=active"
    assert read(root, "etc/kernel/cmdline") == first + "\n# pvetune test: second line, ignored by proxmox-boot-tool\n"
    assert calls(root)[1:] == [["proxmox-boot-tool", "status"], ["proxmox-boot-tool", "refresh"]]
    changed = not_state(changed_paths(before, tree(root)))
    assert "etc/kernel/cmdline" in changed
    assert all(p == "etc/kernel/cmdline" or p.startswith("boot/efi-sim/") for p in changed)
    entry = read(root, "boot/efi-sim/loader/entries/proxmox-6.14.8-2-pve.conf")
    assert "options  %s\n" % first in entry
    assert "default proxmox-6.14.8-2-pve.conf" in read(root, "boot/efi-sim/loader/loader.conf")
    assert res["reboot_required"] is True  # iommu=pt is still on the running kernel
    assert cmdline(root, remove=["iommu"], run_id="t2")["changed"] is False


def test_grub_on_proxmox_boot_tool_esps_uses_refresh(scratch):
    root = scratch("pve-gpu01")
    write(root, "etc/kernel/proxmox-boot-uuids", "5A1C-2E0F\n")  # legacy BIOS, GRUB on the ESP
    host_cfg = read(root, "boot/grub/grub.cfg")
    res = cmdline(root)
    assert res["loader"] == {"name": "grub", "managed_by_pbt": True, "rule": "pbt-status",
                             "reason": "proxmox-boot-tool status: booted in legacy BIOS mode, so the ESPs boot GRUB",
                             "notes": []}
    assert [c["cmd"] for c in res["commands"]] == [["proxmox-boot-tool", "status"], ["proxmox-boot-tool", "refresh"]]
    # refresh ran update-grub itself, on the (simulated) ESP
    assert calls(root) == [["proxmox-boot-tool", "status"], ["proxmox-boot-tool", "refresh"], ["update-grub"]]
    assert "amd_pstate=active processor.max_cstate=1" in read(root, "boot/efi-sim/grub/grub.cfg")
    assert read(root, "boot/grub/grub.cfg") == host_cfg  # not the config these disks boot


def test_update_grub_failure_restores_the_files(scratch):
    root = scratch("pve-gpu01")
    grub_with_maxcstate5(root)
    write(root, ".pvetune/fail/update-grub", "")
    before = tree(root)
    res = cmdline(root)
    assert res["failed"] is True
    assert "update-grub failed (rc=1)" in res["msg"]
    assert "boot configuration was restored" in res["msg"] and "/etc/default/grub" in res["msg"]
    assert calls(root) == [["update-grub"]]
    assert not_state(changed_paths(before, tree(root))) == []  # byte for byte
    assert not os.path.exists(os.path.join(root, DROPIN))
    assert "changed" not in res or res["changed"] is False


def test_refresh_failure_restores_etc_kernel_cmdline(scratch):
    root = scratch("pve-gpu02")
    write(root, "etc/kernel/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs\r\n")
    write(root, ".pvetune/fail/proxmox-boot-tool@refresh", "")
    before = tree(root)
    res = cmdline(root)
    assert res["failed"] is True
    assert res["msg"].startswith("proxmox-boot-tool refresh failed (rc=1)")
    assert "boot configuration was restored (/etc/kernel/cmdline)" in res["msg"]
    assert calls(root) == [["proxmox-boot-tool", "status"], ["proxmox-boot-tool", "refresh"]]
    assert not_state(changed_paths(before, tree(root))) == []


def test_cmdline_without_root_is_refused_before_anything_runs(scratch):
    root = scratch("pve-gpu02")
    write(root, "etc/kernel/cmdline", "boot=zfs quiet\n")
    before = tree(root)
    res = cmdline(root)
    assert res["failed"] is True and "root=" in res["msg"]
    assert calls(root) == [["proxmox-boot-tool", "status"]]
    assert tree(root) == before


def test_missing_standin_is_skipped_and_reported(scratch):
    root = scratch("pve-gpu01")
    os.unlink(os.path.join(root, ".pvetune", "bin", "update-grub"))
    res = cmdline(root)
    assert res["changed"] is True
    assert os.path.exists(os.path.join(root, DROPIN))
    assert res["skipped_commands"][0]["command"] == "update-grub"
    assert "no stand-in" in res["skipped_commands"][0]["reason"]
    assert calls(root) == []


def test_refresh_false_writes_but_does_not_activate(scratch):
    root = scratch("pve-gpu01")
    res = cmdline(root, refresh=False)
    assert res["changed"] is True and calls(root) == []
    assert res["skipped_commands"][0]["reason"].startswith("refresh=false")


def test_explicit_loader_option(scratch):
    root = scratch("pve-gpu02")
    res = cmdline(root, loader="systemd-boot", check_mode=True)
    assert res["loader"]["rule"] == "option" and res["changed"] is False
    assert calls(root) == []  # no status needed


@pytest.mark.parametrize("bad", INJECTIONS)
@pytest.mark.parametrize("option", ["ensure", "remove"])
def test_injection_is_rejected_before_any_command_runs(scratch, option, bad):
    root = scratch("pve-gpu02")  # an ESP host: even the read-only status must not run
    before = tree(root, exclude=())
    args = {"ensure": REQUIRED, "remove": []}
    args[option] = args[option] + [bad]
    res = cmdline(root, **args)
    assert res["failed"] is True
    assert "not a plausible kernel argument" in res["msg"] or "longer than" in res["msg"] or "starts with" in res["msg"]
    assert tree(root, exclude=()) == before
    assert calls(root) == []


@pytest.mark.parametrize("bad", ["/etc/default/grub.d/../../../tmp/x.cfg", "/etc/default/grub", "/tmp/x.cfg"])
def test_bad_dropin_is_rejected(scratch, bad):
    root = scratch("pve-gpu01")
    before = tree(root, exclude=())
    res = cmdline(root, dropin=bad)
    assert res["failed"] is True and "dropin" in res["msg"]
    assert tree(root, exclude=()) == before


# -- documentation -------------------------------------------------------------------
def argument_spec(name):
    module = load_library_module(name)
    seen = {}

    class Capture(Exception):
        pass

    class FakeModule:
        def __init__(self, argument_spec, **_kw):
            seen.update(argument_spec)
            raise Capture()

    real = module.AnsibleModule
    module.AnsibleModule = FakeModule
    try:
        with pytest.raises(Capture):
            module.main()
    finally:
        module.AnsibleModule = real
    from test_module_docs import module_doc  # the options with the doc fragments merged, as ansible-doc shows them

    return seen, module_doc(module)["options"]


def test_documentation_matches_argument_spec():
    spec, doc = argument_spec("pvetune_cmdline")
    assert set(spec) == set(doc)
    for name, opt in spec.items():
        assert doc[name]["type"] == opt["type"], name
        assert doc[name].get("default") == opt.get("default"), name
        assert doc[name].get("choices") == opt.get("choices"), name
        assert doc[name].get("elements") == opt.get("elements"), name
        assert bool(doc[name].get("required")) == bool(opt.get("required")), name


def test_a_rollback_killed_before_update_grub_is_finished_by_the_next_rollback(scratch):
    """Issue 33 (2): killed just after the drop-in was removed (as update-grub started), the re-run rollback found
    every file original, ran no update-grub and deleted the manifest: grub.cfg kept booting pvetune's arguments."""
    root = scratch("pve-gpu01")
    assert cmdline(root)["changed"] is True
    assert "amd_pstate=active" in read(root, "boot/grub/grub.cfg")
    os.unlink(os.path.join(root, DROPIN))      # what the killed rollback got done: the file, not update-grub
    open(os.path.join(root, ".pvetune", "calls.log"), "w").close()
    res = run_module("pvetune_rollback", {"root": root, "run_id": "rb2"})
    assert not res.get("failed"), res
    assert calls(root) == [["update-grub"]]
    assert "amd_pstate=active" not in read(root, "boot/grub/grub.cfg")
    assert res["changed"] is True and res["reboot_required"] is True
    assert not os.path.exists(os.path.join(root, "var/lib/pvetune/manifest.json"))
    again = run_module("pvetune_rollback", {"root": root, "run_id": "rb3"})   # done: nothing left to refresh
    assert again["changed"] is False and calls(root) == [["update-grub"]]
