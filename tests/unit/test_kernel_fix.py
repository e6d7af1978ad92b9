# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/pvetune/concerns/kernel/fix.py and library/pvetune_kernel.py.

Module tests run pvetune_kernel in-process on scratch copies of the demo hosts with the apt-get,
update-grub and proxmox-boot-tool stand-ins (tests/standins/README.md); the scratch fixtures and tree
helpers are shared with test_bootargs_fix.py.
"""
import json
import os
import sys

import pytest
from ansible.module_utils.pvetune.concerns.kernel import fix as kernel_fix
from ansible.module_utils.pvetune.formats.kernel_cmdline import BootConfigError
from conftest import TOP
from modharness import run_module

sys.path.insert(0, os.path.join(TOP, "scripts"))
from scratch_host import KERNEL_FILES, write_apt_repo
from test_bootargs_fix import (
    argument_spec,
    calls,
    changed_paths,
    not_state,
    read,
    scratch,
    session_dir,
    templates,
    tree,
    workdir,
    write,
)

# The scratch fixtures are shared with test_bootargs_fix.py; pytest finds them by name in this module.
SHARED_FIXTURES = (scratch, session_dir, templates, workdir)
DEMO = os.path.join(TOP, "demo", "snapshots")
DEVID = "7b5a1c2e-0f3d-4c55-9a10-3e8d6f2b9c41"
PIN_SNIPPET = "etc/default/grub.d/proxmox-kernel-pin.cfg"
PIN_FILE = "etc/kernel/proxmox-boot-pin"
BAD_VERSIONS = ["6.14; reboot", "$(id)", "--foo", "6.14.8-2-pve\n", "6.14.8-2-pve\nreboot", "../../etc/passwd",
                "6.14.8/../../x", "6.14.8 -2", "6." + "1" * 80]
BAD_PACKAGES = ["proxmox-kernel-6.14; reboot", "--foo", "-oAPT::Get::Assume-Yes=1", "Proxmox-Kernel-6.14", "a",
                "x" * 90, "pkg\n", "$(id)", "../pkg"]
BAD_SERIES = ["6.14; reboot", "6", "6.14.8", "$(id)", "6.14\n", "--foo"]


def kernel(root, check_mode=False, diff=False, **args):
    params = {"root": root, "run_id": "k1"}
    params.update(args)
    return run_module("pvetune_kernel", params, check_mode=check_mode, diff=diff)


def add_kernel(root, ver, initrd=True):
    write(root, "boot/vmlinuz-" + ver, "")
    if initrd:
        write(root, "boot/initrd.img-" + ver, "")
    write(root, "lib/modules/%s/modules.dep" % ver, "")


# -- pure functions ------------------------------------------------------------------
def test_validate_request_defaults_and_consistency():
    assert kernel_fix.validate_request("proxmox-kernel-6.14", "6.14", None) == ("proxmox-kernel-6.14", "6.14", None)
    assert kernel_fix.validate_request("proxmox-kernel-6.14", "6.14", "6.14.8-2-pve")[2] == "6.14.8-2-pve"
    with pytest.raises(BootConfigError, match="installs the 6.8 series"):
        kernel_fix.validate_request("proxmox-kernel-6.8", "6.14", None)
    with pytest.raises(BootConfigError, match="not in the 6.14 series"):
        kernel_fix.validate_request("proxmox-kernel-6.14", "6.14", "6.8.12-4-pve")
    with pytest.raises(BootConfigError, match="not in the 6.14 series"):
        kernel_fix.validate_request("proxmox-kernel-6.14", "6.14", "6.140.1-1-pve")


@pytest.mark.parametrize("bad", BAD_VERSIONS)
def test_validate_request_rejects_bad_versions(bad):
    with pytest.raises(BootConfigError):
        kernel_fix.validate_request("proxmox-kernel-6.14", "6.14", bad)


@pytest.mark.parametrize("bad", BAD_PACKAGES)
def test_validate_request_rejects_bad_packages(bad):
    with pytest.raises(BootConfigError):
        kernel_fix.validate_request(bad, "6.14", None)


@pytest.mark.parametrize("bad", BAD_SERIES)
def test_validate_request_rejects_bad_series(bad):
    with pytest.raises(BootConfigError):
        kernel_fix.validate_request("pve-custom-kernel", bad, None)


def test_choose_version_is_the_newest_of_the_series_by_version_sort():
    images = ["6.8.12-4-pve", "6.14.9-1-pve", "6.14.10-1-pve", "6.14.8-2-pve", "6.15.1-1-pve"]
    assert kernel_fix.series_kernels(images, "6.14") == ["6.14.8-2-pve", "6.14.9-1-pve", "6.14.10-1-pve"]
    assert kernel_fix.choose_version(images, "6.14") == "6.14.10-1-pve"
    assert kernel_fix.choose_version(images, "6.14", "6.14.9-1-pve") == "6.14.9-1-pve"
    assert kernel_fix.choose_version(images, "6.14", "6.14.99-1-pve") is None
    assert kernel_fix.choose_version(images, "6.11") is None


def test_grub_pin_matches_what_proxmox_boot_tool_wrote_on_pve_gpu03():
    with open(os.path.join(DEMO, "pve-gpu01", "boot", "grub", "grub.cfg")) as handle:
        cfg = handle.read()
    assert kernel_fix.grub_root_devids(cfg) == [DEVID]
    with open(os.path.join(DEMO, "pve-gpu03", PIN_SNIPPET)) as handle:
        assert kernel_fix.render_grub_pin("6.14.8-2-pve", DEVID) == handle.read()


def test_plan_pin_files():
    with open(os.path.join(DEMO, "pve-gpu01", "boot", "grub", "grub.cfg")) as handle:
        cfg = handle.read()
    grub = kernel_fix.plan_pin_files("6.14.8-2-pve", "grub", grub_cfg_text=cfg)
    assert grub == [("/etc/kernel/proxmox-boot-pin", "6.14.8-2-pve\n"),
                    ("/etc/default/grub.d/proxmox-kernel-pin.cfg",
                     'GRUB_DEFAULT="gnulinux-advanced-%s>gnulinux-6.14.8-2-pve-advanced-%s"\n' % (DEVID, DEVID))]
    # A next-boot pin wins for GRUB_DEFAULT, as in proxmox-boot-tool.
    nb = kernel_fix.plan_pin_files("6.14.8-2-pve", "grub", next_boot="6.8.12-4-pve", grub_cfg_text=cfg)
    assert "gnulinux-6.8.12-4-pve-advanced" in nb[1][1]
    assert kernel_fix.plan_pin_files("6.14.8-2-pve", "systemd-boot") == [("/etc/kernel/proxmox-boot-pin",
                                                                        "6.14.8-2-pve\n")]
    with pytest.raises(BootConfigError, match="gnulinux-advanced"):
        kernel_fix.plan_pin_files("6.14.8-2-pve", "grub", grub_cfg_text=None)
    with pytest.raises(BootConfigError, match="2 'gnulinux-advanced"):
        kernel_fix.plan_pin_files("6.14.8-2-pve", "grub", grub_cfg_text=cfg + cfg)
    with pytest.raises(BootConfigError):
        kernel_fix.render_grub_pin("6.14.8-2-pve", 'x" ; reboot ; "')


def test_pin_commands():
    assert kernel_fix.pin_commands("6.14.8-2-pve", True, False) == [("proxmox-boot-tool", ["kernel", "pin",
                                                                                            "6.14.8-2-pve"])]
    assert kernel_fix.pin_commands("6.14.8-2-pve", True, True)[-1] == ("proxmox-boot-tool", ["refresh"])
    assert kernel_fix.pin_commands("6.14.8-2-pve", False, False) == [("update-grub", [])]


def test_listed_by_pbt():
    text = ("Manually selected kernels:\nNone.\n\nAutomatically selected kernels:\n6.14.8-2-pve\n6.8.12-4-pve\n\n"
            "Pinned kernel:\n6.14.8-2-pve\n")
    assert kernel_fix.listed_by_pbt(text, "6.14.8-2-pve")[0] is True
    assert kernel_fix.listed_by_pbt(text, "6.14.1-1-pve")[0] is False
    assert kernel_fix.install_command("proxmox-kernel-6.14") == ("apt-get", ["install", "-y", "proxmox-kernel-6.14"])


# -- the module on the demo hosts ------------------------------------------------------
def test_gpu01_check_mode_reports_the_install_and_writes_nothing(scratch):
    root = scratch("pve-gpu01")
    write_apt_repo(root)
    before = tree(root, exclude=())
    res = kernel(root, check_mode=True, diff=True)
    assert res["changed"] is True and res["package_installed"] is True
    assert res["skipped_commands"][0] == {"command": "apt-get install -y proxmox-kernel-6.14", "reason": "check mode"}
    assert res["version"] is None and res["reboot_required"] is True
    assert tree(root, exclude=()) == before and calls(root) == []


def test_gpu01_install_and_pin_with_proxmox_boot_tool(scratch):
    root = scratch("pve-gpu01")
    write_apt_repo(root)
    before = tree(root)
    res = kernel(root, diff=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["package_installed"] is True
    assert res["running"] == "6.8.12-4-pve" and res["version"] == "6.14.8-2-pve"
    assert res["pinned_before"] is None and res["pinned_after"] == "6.14.8-2-pve"
    assert res["next_boot_kernel"] == "6.14.8-2-pve"
    assert res["reboot_required"] is True
    assert calls(root) == [["apt-get", "install", "-y", "proxmox-kernel-6.14"],
                           ["update-grub"],  # the kernel's zz-update-grub hook
                           ["proxmox-boot-tool", "kernel", "list"],
                           ["proxmox-boot-tool", "kernel", "pin", "6.14.8-2-pve"],
                           ["update-grub"]]  # proxmox-boot-tool on a GRUB-only host
    assert not_state(changed_paths(before, tree(root))) == sorted(
        KERNEL_FILES + ["boot/grub/grub.cfg", PIN_SNIPPET, PIN_FILE])
    assert read(root, PIN_FILE) == "6.14.8-2-pve\n"
    with open(os.path.join(DEMO, "pve-gpu03", PIN_SNIPPET)) as handle:
        assert read(root, PIN_SNIPPET) == handle.read()
    cfg = read(root, "boot/grub/grub.cfg")
    assert 'set default="gnulinux-advanced-%s>gnulinux-6.14.8-2-pve-advanced-%s"' % (DEVID, DEVID) in cfg
    assert "menuentry 'Proxmox VE GNU/Linux, with Linux 6.14.8-2-pve'" in cfg
    manifest = json.loads(read(root, "var/lib/pvetune/manifest.json"))
    assert set(manifest["files"]) == {"/etc/kernel/proxmox-boot-pin", "/etc/default/grub.d/proxmox-kernel-pin.cfg"}
    assert {d["after_header"] for d in res["diff"]} == {"/etc/kernel/proxmox-boot-pin",
                                                       "/etc/default/grub.d/proxmox-kernel-pin.cfg",
                                                       "kernel (package, pin, next boot)"}
    # The package, pin and next boot as a before/after entry (issue 15), first
    assert res["diff"][0]["before"].splitlines() == [
        "package proxmox-kernel-6.14: not installed", "6.14 kernels: none", "pin: none", "next boot: 6.8.12-4-pve"]
    assert res["diff"][0]["after"].splitlines() == [
        "package proxmox-kernel-6.14: installed by this run", "6.14 kernels: 6.14.8-2-pve", "pin: 6.14.8-2-pve",
        "next boot: 6.14.8-2-pve"]

    after = tree(root)
    again = kernel(root, run_id="k2")
    assert again["changed"] is False and again["commands"] == []
    assert len(calls(root)) == 5 and tree(root) == after
    assert again["reboot_required"] is True


def test_gpu01_grub_fallback_without_proxmox_boot_tool(scratch):
    root = scratch("pve-gpu01")
    write_apt_repo(root)
    os.unlink(os.path.join(root, ".pvetune", "bin", "proxmox-boot-tool"))
    before = tree(root)
    res = kernel(root)
    assert not res.get("failed"), res.get("msg")
    assert calls(root) == [["apt-get", "install", "-y", "proxmox-kernel-6.14"], ["update-grub"], ["update-grub"]]
    assert not_state(changed_paths(before, tree(root))) == sorted(
        KERNEL_FILES + ["boot/grub/grub.cfg", PIN_SNIPPET, PIN_FILE])
    with open(os.path.join(DEMO, "pve-gpu03", PIN_SNIPPET)) as handle:
        assert read(root, PIN_SNIPPET) == handle.read()
    assert 'set default="gnulinux-advanced-%s>gnulinux-6.14.8-2-pve-advanced-%s"' % (DEVID, DEVID) \
        in read(root, "boot/grub/grub.cfg")
    assert res["next_boot_kernel"] == "6.14.8-2-pve" and res["reboot_required"] is True
    assert kernel(root, run_id="k2")["changed"] is False
    assert len(calls(root)) == 3


def test_gpu01_update_grub_failure_in_the_fallback_restores_the_pin(scratch):
    root = scratch("pve-gpu01")
    add_kernel(root, "6.14.8-2-pve")
    os.unlink(os.path.join(root, ".pvetune", "bin", "proxmox-boot-tool"))
    write(root, ".pvetune/fail/update-grub", "")
    before = tree(root)
    res = kernel(root, install=False)
    assert res["failed"] is True
    assert "update-grub failed (rc=1)" in res["msg"] and "boot configuration was restored" in res["msg"]
    assert sorted(res["restored"]) == ["/etc/default/grub.d/proxmox-kernel-pin.cfg", "/etc/kernel/proxmox-boot-pin"]
    assert not_state(changed_paths(before, tree(root))) == []
    assert calls(root) == [["update-grub"]]


def test_gpu01_pin_false_installs_only(scratch):
    root = scratch("pve-gpu01")
    write_apt_repo(root)
    res = kernel(root, pin=False)
    assert res["changed"] is True and res["pinned_after"] is None
    assert [c[0] for c in calls(root)] == ["apt-get", "update-grub"]
    assert res["next_boot_kernel"] == "6.14.8-2-pve"  # GRUB entry 0: the newest kernel
    assert res["reboot_required"] is True


def test_gpu01_install_false_without_the_series_fails(scratch):
    root = scratch("pve-gpu01")
    res = kernel(root, install=False)
    assert res["failed"] is True and "install=false" in res["msg"]
    assert calls(root) == []


def test_gpu01_unknown_package_fails_with_apt_message(scratch):
    root = scratch("pve-gpu01")
    os.unlink(os.path.join(root, ".pvetune", "apt-repo.json"))  # the archive has nothing
    before = tree(root)
    res = kernel(root)
    assert res["failed"] is True
    assert res["msg"].startswith("apt-get install -y proxmox-kernel-6.14 failed (rc=100)")
    assert "Unable to locate package proxmox-kernel-6.14" in res["msg"]
    assert calls(root) == [["apt-get", "install", "-y", "proxmox-kernel-6.14"]]
    assert not_state(changed_paths(before, tree(root))) == []


def test_gpu01_apt_runs_noninteractive(scratch, monkeypatch):
    root = scratch("pve-gpu01")
    write_apt_repo(root)
    seen = []
    from ansible.module_utils.basic import AnsibleModule
    real = AnsibleModule.run_command

    def spy(self, args, **kw):
        seen.append((os.path.basename(args[0]), (kw.get("environ_update") or {}).get("DEBIAN_FRONTEND")))
        return real(self, args, **kw)
    monkeypatch.setattr(AnsibleModule, "run_command", spy)
    kernel(root)
    assert seen[0] == ("apt-get", "noninteractive")


def test_gpu02_already_pinned_runs_nothing(scratch):
    root = scratch("pve-gpu02")
    before = tree(root, exclude=())
    for check_mode in (True, False):
        res = kernel(root, check_mode=check_mode)
        assert res["changed"] is False and res["commands"] == [] and res["skipped_commands"] == []
        assert res["pinned_after"] == "6.14.8-2-pve" and res["reboot_required"] is False
    assert tree(root, exclude=()) == before and calls(root) == []
    assert res["loader"]["name"] == "systemd-boot" and res["loader"]["managed_by_pbt"] is True


def test_gpu02_newer_kernel_is_pinned_and_the_esps_refreshed(scratch):
    root = scratch("pve-gpu02")
    add_kernel(root, "6.14.11-1-pve")
    before = tree(root)
    check = kernel(root, check_mode=True, diff=True)
    assert check["changed"] is True and check["pinned_after"] == "6.14.11-1-pve"
    assert [s["command"] for s in check["skipped_commands"]] == ["proxmox-boot-tool kernel pin 6.14.11-1-pve",
                                                                  "proxmox-boot-tool refresh"]
    assert check["diff"][0]["after_header"] == "kernel (package, pin, next boot)"
    assert "pin: 6.14.11-1-pve" in check["diff"][0]["after"].splitlines()
    assert check["diff"][1]["after"] == "6.14.11-1-pve\n"
    assert calls(root) == [["proxmox-boot-tool", "kernel", "list"]]  # read-only
    assert tree(root) == before

    res = kernel(root)
    assert not res.get("failed"), res.get("msg")
    assert calls(root)[1:] == [["proxmox-boot-tool", "kernel", "list"],
                               ["proxmox-boot-tool", "kernel", "pin", "6.14.11-1-pve"],
                               ["proxmox-boot-tool", "refresh"]]
    assert read(root, PIN_FILE) == "6.14.11-1-pve\n"
    changed = not_state(changed_paths(before, tree(root)))
    assert PIN_FILE in changed and all(p == PIN_FILE or p.startswith("boot/efi-sim/") for p in changed)
    assert "default proxmox-6.14.11-1-pve.conf" in read(root, "boot/efi-sim/loader/loader.conf")
    assert os.path.exists(os.path.join(root, "boot/efi-sim/loader/entries/proxmox-6.14.11-1-pve.conf"))
    assert not os.path.exists(os.path.join(root, PIN_SNIPPET))  # systemd-boot: no GRUB snippet
    assert res["pinned_before"] == "6.14.8-2-pve" and res["pinned_after"] == "6.14.11-1-pve"
    assert res["reboot_required"] is True
    assert kernel(root, run_id="k2")["changed"] is False


def test_gpu02_refresh_failure_restores_the_pin_file(scratch):
    root = scratch("pve-gpu02")
    add_kernel(root, "6.14.11-1-pve")
    write(root, ".pvetune/fail/proxmox-boot-tool@refresh", "")
    before = tree(root)
    res = kernel(root)
    assert res["failed"] is True
    assert res["msg"].startswith("proxmox-boot-tool refresh failed (rc=1)")
    assert "boot configuration was restored (/etc/kernel/proxmox-boot-pin)" in res["msg"]
    assert read(root, PIN_FILE) == "6.14.8-2-pve\n"
    assert not_state(changed_paths(before, tree(root))) == []


def test_gpu02_pin_command_failure_restores(scratch):
    root = scratch("pve-gpu02")
    add_kernel(root, "6.14.11-1-pve")
    write(root, ".pvetune/fail/proxmox-boot-tool", "kernel pin\n")  # kernel list still works
    before = tree(root)
    res = kernel(root)
    assert res["failed"] is True and "kernel pin 6.14.11-1-pve failed" in res["msg"]
    assert [c[1:3] for c in calls(root)] == [["kernel", "list"], ["kernel", "pin"]]
    assert not_state(changed_paths(before, tree(root))) == []


def test_gpu03_already_pinned_runs_nothing(scratch):
    root = scratch("pve-gpu03")
    res = kernel(root)
    assert res["changed"] is False and calls(root) == []
    assert res["running"] == "6.8.12-4-pve" and res["pinned_after"] == "6.14.8-2-pve"
    assert res["reboot_required"] is True  # configured, not yet booted


def test_pin_refused_when_proxmox_boot_tool_does_not_list_the_version(scratch):
    root = scratch("pve-gpu03")
    add_kernel(root, "6.14.5-1-pve")
    add_kernel(root, "6.14.1-1-pve")  # third-newest: not among the kernels proxmox-boot-tool keeps
    before = tree(root)
    res = kernel(root, version="6.14.1-1-pve")
    assert res["failed"] is True
    assert "not installed according to proxmox-boot-tool kernel list" in res["msg"]
    assert "refusing to pin" in res["msg"]
    assert calls(root) == [["proxmox-boot-tool", "kernel", "list"]]
    assert not_state(changed_paths(before, tree(root))) == []


def test_pin_refused_when_the_version_is_not_installed(scratch):
    root = scratch("pve-gpu03")
    before = tree(root, exclude=())
    res = kernel(root, version="6.14.99-1-pve", install=False)
    assert res["failed"] is True
    assert res["msg"] == ("kernel 6.14.99-1-pve is not installed (installed 6.14 kernels: 6.14.8-2-pve), "
                          "refusing to pin")
    assert tree(root, exclude=()) == before and calls(root) == []


def test_missing_grub_menu_id_is_refused(scratch):
    root = scratch("pve-gpu03")
    add_kernel(root, "6.14.11-1-pve")
    os.unlink(os.path.join(root, "boot", "grub", "grub.cfg"))
    before = tree(root, exclude=())
    res = kernel(root)
    assert res["failed"] is True and "gnulinux-advanced" in res["msg"]
    assert tree(root, exclude=()) == before


@pytest.mark.parametrize("option,bad", [("version", v) for v in BAD_VERSIONS]
                         + [("package", p) for p in BAD_PACKAGES] + [("series", s) for s in BAD_SERIES])
def test_injection_is_rejected_before_any_command_runs(scratch, option, bad):
    root = scratch("pve-gpu01")  # needs an install: apt-get would be the first command
    write_apt_repo(root)
    before = tree(root, exclude=())
    res = kernel(root, **{option: bad})
    assert res["failed"] is True
    assert tree(root, exclude=()) == before
    assert calls(root) == []


def test_documentation_matches_argument_spec():
    spec, doc = argument_spec("pvetune_kernel")
    assert set(spec) == set(doc)
    for name, opt in spec.items():
        assert doc[name]["type"] == opt["type"], name
        assert doc[name].get("default") == opt.get("default"), name
        assert doc[name].get("choices") == opt.get("choices"), name
        assert bool(doc[name].get("required")) == bool(opt.get("required")), name
