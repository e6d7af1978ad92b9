#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_kernel
short_description: Install a Proxmox kernel series and pin the boot to it
description:
  - Makes the host boot a kernel of O(series) (for example 6.14 instead of 6.8.12).
  - When no kernel of the series is installed, installs O(package) with C(apt-get install -y)
    (C(DEBIAN_FRONTEND=noninteractive)) if O(install) is true.
  - Pins the newest installed kernel of the series, or O(version). With C(proxmox-boot-tool) the pin is made by
    C(proxmox-boot-tool kernel pin), after checking that C(proxmox-boot-tool kernel list) lists the version;
    when proxmox-boot-tool manages the ESPs C(proxmox-boot-tool refresh) follows, because a pin on such hosts
    only writes the pin file.
  - Without proxmox-boot-tool (plain GRUB) it writes C(/etc/default/grub.d/proxmox-kernel-pin.cfg) the way
    proxmox-boot-tool does (C(GRUB_DEFAULT="gnulinux-advanced-<id>>gnulinux-<ver>-advanced-<id>"), the id taken
    from C(/boot/grub/grub.cfg)) and runs C(update-grub).
  - The pin files are planned on pvetune's change set, so they are backed up, recorded for rollback.yml and
    restored if a pin or refresh command fails. A host already pinned to the version runs no command.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  root:
    description:
      - Directory treated as C(/) for every read and write.
      - With a root other than C(/) commands are taken only from C(<root>/.pvetune/bin) (test stand-ins);
        without a stand-in the step is skipped and reported in RV(skipped_commands).
    type: path
    default: /
  run_id:
    description: Identifier of the fix run; names the per-run backup directory under C(/var/lib/pvetune/runs/).
    type: str
  package:
    description: Package that installs the newest kernel of the series (a Debian package name).
    type: str
    default: proxmox-kernel-6.14
  series:
    description: Kernel series the host should run, C(<major>.<minor>).
    type: str
    default: "6.14"
  version:
    description:
      - Exact kernel version to pin (for example C(6.14.8-2-pve)) instead of the newest installed one of the
        series. Must belong to O(series); validated as a kernel release string.
    type: str
  pin:
    description: Pin the boot to the chosen kernel.
    type: bool
    default: true
  install:
    description: Install O(package) when no kernel of the series is installed.
    type: bool
    default: true
notes:
  - Supports check mode and diff mode. In check mode nothing is installed or written; only the read-only
    C(proxmox-boot-tool kernel list) may run.
"""

EXAMPLES = r"""
- name: Run the 6.14 kernel series
  pvetune_kernel:
    package: proxmox-kernel-6.14
    series: "6.14"
  register: kernel

- name: Pin one exact version, never install
  pvetune_kernel:
    series: "6.14"
    version: 6.14.8-2-pve
    install: false
"""

RETURN = r"""
running:
  description: Running kernel release (C(/proc/sys/kernel/osrelease)).
  returned: always
  type: str
  sample: 6.8.12-4-pve
installed:
  description: Installed kernel releases (C(/boot/vmlinuz-*) and C(/lib/modules/*)), version-sorted.
  returned: always
  type: list
  elements: str
series_installed:
  description: Installed kernel images of the series, version-sorted.
  returned: always
  type: list
  elements: str
version:
  description: Kernel chosen for the pin; null when none is installed yet (check mode before an install).
  returned: always
  type: str
  sample: 6.14.8-2-pve
package:
  description: The package option.
  returned: always
  type: str
package_installed:
  description: True when O(package) was installed by this run (would be, in check mode).
  returned: always
  type: bool
pinned_before:
  description: First line of C(/etc/kernel/proxmox-boot-pin) before the run, or null.
  returned: always
  type: str
pinned_after:
  description: The pinned kernel after the run (planned in check mode), or null.
  returned: always
  type: str
next_boot_kernel:
  description: Kernel the next boot uses according to the boot configuration after the run (bootcfg.kernel_state),
    or null in check mode and when it cannot be told.
  returned: always
  type: str
loader:
  description: Boot loader and whether proxmox-boot-tool manages the ESPs.
  returned: always
  type: dict
  sample: {"name": "grub", "managed_by_pbt": false, "rule": "grub-default"}
commands:
  description: Commands run, with return code and output.
  returned: always
  type: list
  elements: dict
skipped_commands:
  description: Commands not run, with the reason.
  returned: always
  type: list
  elements: dict
regenerated:
  description: True when a stale C(/boot/grub/grub.cfg) (default entry not matching GRUB_DEFAULT) was regenerated.
  returned: always
  type: bool
reboot_required:
  description: True when the running kernel is not the one the next boot uses (the pinned one).
  returned: always
  type: bool
changes:
  description: Planned or applied file changes.
  returned: always
  type: dict
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune import bootcfg, cmdlinefix, kernelfix
from ansible.module_utils.pvetune.bootcfg import BootConfigError
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.runner import CommandUnavailable, Runner

_SET_DEFAULT = re.compile(r'^set default="?([^"\n]*)"?\s*$', re.M)


class Run:
    """Runs commands for the module, records them and fails cleanly."""

    def __init__(self, module, fsroot, runner, changes):
        self.module = module
        self.fsroot = fsroot
        self.runner = runner
        self.changes = changes
        self.commands = []
        self.skipped = []
        self.result = {}

    def fail(self, msg, **extra):
        data = dict(self.result)
        data.update(commands=self.commands, skipped_commands=self.skipped, changes=self.changes.summary())
        data.update(extra)
        self.module.fail_json(msg=msg, **data)

    def run(self, name, args, restore=False, env=None):
        """(rc, out, err), or None when the command is unavailable for a non-/ root (skipped)."""
        shown = " ".join([name] + args)
        try:
            rc, out, err = self.runner.run(name, args, environ_update=env)
        except CommandUnavailable as exc:
            if self.fsroot.live:
                restored = self.changes.restore_run() if restore else []
                self.fail("%s is needed but %s%s" % (name, exc.reason, _restored_msg(restored) if restore else ""))
            self.skipped.append({"command": shown, "reason": exc.reason})
            return None
        self.commands.append(cmdlinefix.command_record([name] + args, rc, out, err))
        if rc != 0:
            detail = (err or out or "").strip().splitlines()
            restored = self.changes.restore_run() if restore else []
            self.fail("%s failed (rc=%s)%s%s" % (shown, rc, ": " + detail[-1] if detail else "",
                                                 _restored_msg(restored) if restore else ""),
                      restored=restored)
        return rc, out, err


def _restored_msg(restored):
    return "; the boot configuration was restored (%s), so the next boot is unchanged" % (
        ", ".join(restored) or "no file had changed")


def main():
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": "/"},
            "run_id": {"type": "str"},
            "package": {"type": "str", "default": "proxmox-kernel-6.14"},
            "series": {"type": "str", "default": "6.14"},
            "version": {"type": "str"},
            "pin": {"type": "bool", "default": True},
            "install": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        package, series, version = kernelfix.validate_request(p["package"], p["series"], p["version"])
        fsroot = FsRoot(p["root"])
        changes = ChangeSet(fsroot, check_mode=module.check_mode, run_id=p["run_id"])
    except (BootConfigError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    runner = Runner(fsroot, module.run_command)
    run = Run(module, fsroot, runner, changes)

    try:
        info, _record = cmdlinefix.detect(fsroot, None, "auto")  # files only: an idempotent run runs nothing
        state = bootcfg.kernel_state(fsroot, info)
    except FsError as exc:
        module.fail_json(msg="reading the kernel state failed: %s" % exc)
    loader = info["loader"]
    managed = bool(info.get("managed_by_pbt"))
    run.result = {
        "running": state["running"], "installed": state["installed"],
        "series_installed": kernelfix.series_kernels(state["images"], series),
        "version": None, "package": package, "package_installed": False,
        "pinned_before": state["pinned"], "pinned_after": state["pinned"], "next_boot_kernel": None,
        "loader": {"name": loader, "managed_by_pbt": managed, "rule": info.get("rule"), "reason": info.get("reason")},
        "regenerated": False,
    }
    for warning in state["warnings"]:
        module.warn(warning)

    def finish(changed, reboot_required):
        result = dict(run.result)
        result.update(changed=changed, reboot_required=reboot_required, commands=run.commands,
                      skipped_commands=run.skipped, changes=changes.summary())
        if module._diff:
            result["diff"] = changes.diffs()
        module.exit_json(**result)

    # 1. Install the series when none of it is installed.
    if not run.result["series_installed"]:
        name, args = kernelfix.install_command(package)
        if not p["install"]:
            if p["pin"]:
                run.fail("no kernel of the %s series is installed and install=false; nothing to pin" % series)
            finish(False, False)
        if module.check_mode:
            run.result["package_installed"] = True
            run.result["version"] = version
            run.skipped.append({"command": " ".join([name] + args), "reason": "check mode"})
            if p["pin"]:
                run.skipped.append({"command": "pin %s" % (version or "the newest %s kernel" % series),
                                    "reason": "check mode: the kernel to pin is known after the install"})
            finish(True, True)
        if run.run(name, args, env=kernelfix.APT_ENV) is None:
            run.skipped.append({"command": "pin", "reason": "no %s kernel installed (install skipped)" % series})
            finish(False, False)
        run.result["package_installed"] = True
        state = bootcfg.kernel_state(fsroot, info)
        run.result["installed"] = state["installed"]
        run.result["series_installed"] = kernelfix.series_kernels(state["images"], series)
        if not run.result["series_installed"]:
            run.fail("apt-get installed %s but no %s kernel image appeared in /boot" % (package, series))

    chosen = kernelfix.choose_version(state["images"], series, version)
    if chosen is None:
        run.fail("kernel %s is not installed (installed %s kernels: %s), refusing to pin"
                 % (version, series, ", ".join(run.result["series_installed"]) or "none"))
    run.result["version"] = chosen
    changed = run.result["package_installed"]

    if not p["pin"]:
        state_after = state
        run.result["next_boot_kernel"] = state_after["next_boot_kernel"]
        nb = state_after["next_boot_kernel"]
        finish(changed, nb is not None and nb != state["running"])

    # 2. Pin.
    has_pbt = runner.which(kernelfix.PBT) is not None
    if not has_pbt and (loader == "systemd-boot" or managed):
        if fsroot.live:
            run.fail("proxmox-boot-tool manages this host's ESPs but is not installed; cannot pin")
        run.skipped.append({"command": "proxmox-boot-tool kernel pin %s" % chosen,
                            "reason": "root is %s and it provides no proxmox-boot-tool stand-in" % fsroot.root})
        finish(changed, chosen != state["running"])
    grub_cfg = None
    if loader == "grub":
        try:
            grub_cfg = fsroot.read_text(bootcfg.GRUB_CFG) if fsroot.isfile(bootcfg.GRUB_CFG) else None
        except FsError as exc:
            run.fail("cannot read %s: %s" % (bootcfg.GRUB_CFG, exc))
    next_boot = state["next_boot"] if loader == "grub" else None
    try:
        planned = kernelfix.plan_pin_files(chosen, loader, next_boot=next_boot, grub_cfg_text=grub_cfg)
    except BootConfigError as exc:
        run.fail("cannot pin %s: %s" % (chosen, exc))
    for path, text in planned:
        changes.plan_file(path, text)
    if state["next_boot"] and state["next_boot"] != chosen:
        module.warn("%s pins %s for the next boot only; it takes precedence over the pin until it is used "
                    "(proxmox-boot-tool kernel unpin --next-boot removes it)"
                    % (bootcfg.NEXT_BOOT_PIN, state["next_boot"]))

    regenerate = False
    if not changes.changed and loader == "grub" and not managed and grub_cfg is not None:
        m = _SET_DEFAULT.search(grub_cfg)
        effective_default = (state["grub_default"] or {}).get("value") or "0"
        if m and m.group(1) != effective_default:
            regenerate = True
            module.warn("%s sets default %r but GRUB_DEFAULT is %r (update-grub was not run after the last "
                        "edit); regenerating it" % (bootcfg.GRUB_CFG, m.group(1), effective_default))

    if changes.changed:
        if has_pbt:
            listing = run.run(kernelfix.PBT, ["kernel", "list"])
            if listing is not None:
                listed, parsed = kernelfix.listed_by_pbt(listing[1], chosen)
                if not listed:
                    run.fail("kernel %s is not installed according to proxmox-boot-tool kernel list (it lists: %s), "
                             "refusing to pin" % (chosen, ", ".join(parsed["manual"] + parsed["auto"]) or "none"))
        cmds = kernelfix.pin_commands(chosen, has_pbt, managed)
        if module.check_mode:
            run.skipped.extend({"command": " ".join([n] + a), "reason": "check mode"} for n, a in cmds)
        else:
            try:
                changes.apply()
            except (OSError, IOError, FsError, ChangeError) as exc:
                restored = changes.restore_run()
                run.fail("writing the pin failed: %s%s" % (exc, _restored_msg(restored)))
            for name, args in cmds:
                run.run(name, args, restore=True)
    elif regenerate:
        if module.check_mode:
            run.skipped.append({"command": "update-grub", "reason": "check mode"})
        else:
            run.run("update-grub", [])
    run.result["regenerated"] = regenerate

    if module.check_mode:
        run.result["pinned_after"] = chosen
    else:
        after = bootcfg.kernel_state(fsroot, info)
        run.result["pinned_after"] = after["pinned"]
        run.result["next_boot_kernel"] = after["next_boot_kernel"]
        if after["next_boot_kernel"] is not None and after["next_boot_kernel"] != chosen:
            module.warn("the next boot uses %s (%s), not the pinned %s"
                        % (after["next_boot_kernel"], after["next_boot_reason"], chosen))
    changed = changed or changes.changed or regenerate
    expected = run.result["next_boot_kernel"] or chosen
    finish(changed, expected != state["running"])


if __name__ == "__main__":
    main()
