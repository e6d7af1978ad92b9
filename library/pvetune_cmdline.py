#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_cmdline
short_description: Ensure or remove kernel command line arguments in the host's boot configuration
description:
  - Makes the kernel command line the boot loader passes contain every argument in O(ensure) exactly once
    and none of O(remove), for example C(amd_pstate=active processor.max_cstate=1) on an AMD EPYC GPU host.
  - "GRUB: arguments that only need adding go to a pvetune drop-in (O(dropin), sourced after C(/etc/default/grub));
    an argument that must be replaced or removed (a conflicting C(processor.max_cstate=5)) is edited in place in
    the file that sets it, keeping every other byte of that file."
  - "systemd-boot (Proxmox VE on ZFS/UEFI): the first line of C(/etc/kernel/cmdline) is rewritten, the rest of
    the file is kept."
  - "After a change the configuration is activated: C(update-grub) on plain GRUB hosts,
    C(proxmox-boot-tool refresh) when proxmox-boot-tool manages the ESPs (systemd-boot, or GRUB on ESPs).
    If that command fails, the files written are restored byte for byte and the module fails."
  - On plain GRUB hosts a C(/boot/grub/grub.cfg) that does not carry the configured arguments (configuration
    edited but C(update-grub) never run) is regenerated too.
  - Every file it writes is backed up first and recorded for rollback.yml.
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
  ensure:
    description:
      - Arguments that must be on the command line exactly once, as C(key) or C(key=value).
        An existing argument with the same key (C(-) and C(_) are the same) is replaced in place.
      - Each must match the key/value rules of pvetune's argument validation (no spaces, quotes only around a
        whole value, no shell characters).
    type: list
    elements: str
    default: []
  remove:
    description:
      - Arguments to remove, as a key (every value) or C(key=value) (only that value).
    type: list
    elements: str
    default: []
  loader:
    description:
      - Which boot configuration to edit. V(auto) detects it as described in docs/DESIGN.md
        ("Boot loader detection"), asking C(proxmox-boot-tool status) when the ESP list exists.
    type: str
    choices: [auto, grub, systemd-boot]
    default: auto
  dropin:
    description: GRUB drop-in pvetune owns for added arguments. Must be C(/etc/default/grub.d/<name>.cfg).
    type: path
    default: /etc/default/grub.d/90-pvetune.cfg
  refresh:
    description:
      - Run C(update-grub) or C(proxmox-boot-tool refresh) after a change. With V(false) the configuration
        is written but not activated (reported in RV(skipped_commands)).
    type: bool
    default: true
notes:
  - Supports check mode and diff mode. In check mode nothing is written and only the read-only
    C(proxmox-boot-tool status) may run.
"""

EXAMPLES = r"""
- name: AMD P-state in active mode and shallow C-states for GPU latency
  pvetune_cmdline:
    ensure:
      - amd_pstate=active
      - processor.max_cstate=1
  register: cmdline

- name: Remove an argument in every value
  pvetune_cmdline:
    remove:
      - intel_idle.max_cstate
"""

RETURN = r"""
loader:
  description: Boot loader whose configuration was edited, and how it was decided.
  returned: always
  type: dict
  sample: {"name": "grub", "managed_by_pbt": false, "rule": "grub-default",
           "reason": "no /etc/kernel/proxmox-boot-uuids: plain GRUB from /etc/default/grub", "notes": []}
configured_args:
  description: Kernel arguments the boot configuration passes after the change (planned in check mode).
  returned: always
  type: list
  elements: str
  sample: ["quiet", "amd_pstate=active", "processor.max_cstate=1"]
configured_args_before:
  description: Kernel arguments the boot configuration passed before the change.
  returned: always
  type: list
  elements: str
effective_args:
  description: Arguments of the running kernel (C(/proc/cmdline)); null when it cannot be read.
  returned: always
  type: list
  elements: str
arg_changes:
  description: Planned argument changes (action add/replace/remove, old, new).
  returned: always
  type: list
  elements: dict
files:
  description: Boot configuration files changed (or to be changed in check mode).
  returned: always
  type: list
  elements: str
  sample: ["/etc/default/grub.d/90-pvetune.cfg"]
commands:
  description: Commands run, with return code and output.
  returned: always
  type: list
  elements: dict
  sample: [{"cmd": ["update-grub"], "rc": 0, "stdout": "", "stderr": "Generating grub configuration file ..."}]
skipped_commands:
  description: Commands not run, with the reason (check mode, no stand-in for a non-C(/) root, refresh=false).
  returned: always
  type: list
  elements: dict
  sample: [{"command": "update-grub", "reason": "check mode"}]
regenerated:
  description: True when the generated boot configuration was stale and was (or would be) regenerated without a
    file change.
  returned: always
  type: bool
reboot_required:
  description: True when the managed arguments of the configured command line differ from the running kernel's.
  returned: always
  type: bool
changes:
  description: Planned or applied file changes.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune import bootcfg, cmdlinefix
from ansible.module_utils.pvetune.bootcfg import BootConfigError
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.runner import CommandUnavailable, Runner


def main():
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": "/"},
            "run_id": {"type": "str"},
            "ensure": {"type": "list", "elements": "str", "default": []},
            "remove": {"type": "list", "elements": "str", "default": []},
            "loader": {"type": "str", "choices": list(cmdlinefix.LOADERS), "default": "auto"},
            "dropin": {"type": "path", "default": bootcfg.DROPIN_PATH},
            "refresh": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    # Validate every option before anything is read for writing or run.
    try:
        ensure, remove = cmdlinefix.validate_request(p["ensure"], p["remove"])
        dropin = cmdlinefix.validate_dropin(p["dropin"])
        fsroot = FsRoot(p["root"])
        changes = ChangeSet(fsroot, check_mode=module.check_mode, run_id=p["run_id"])
    except (BootConfigError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    runner = Runner(fsroot, module.run_command)
    commands = []
    skipped = []

    try:
        info, record = cmdlinefix.detect(fsroot, runner, p["loader"])
    except (FsError, CommandUnavailable) as exc:
        module.fail_json(msg="boot loader detection failed: %s" % exc)
    if record is not None:
        commands.append(record)
    loader = info["loader"]
    managed = bool(info.get("managed_by_pbt"))
    loader_ret = {"name": loader, "managed_by_pbt": managed, "rule": info.get("rule"),
                  "reason": info.get("reason"), "notes": info.get("notes", [])}

    try:
        plan = cmdlinefix.plan_cmdline(fsroot, loader, ensure, remove, dropin)
    except (BootConfigError, FsError) as exc:
        module.fail_json(msg="cannot plan the %s kernel command line change: %s" % (loader, exc),
                         loader=loader_ret, commands=commands)
    for warning in plan["warnings"]:
        module.warn(warning)

    for path, old, new in plan["files"]:
        if old is not None and changes.read(path) != old.encode("utf-8"):
            module.fail_json(msg="%s is not valid UTF-8 (or changed while planning); not editing it" % path,
                             loader=loader_ret, commands=commands)
        changes.plan_file(path, new)

    # A plain GRUB host whose grub.cfg does not carry the configured arguments needs update-grub too.
    regenerate = False
    if not changes.changed and loader == "grub" and not managed:
        cfg = fsroot.read_text(bootcfg.GRUB_CFG) if fsroot.isfile(bootcfg.GRUB_CFG) else None
        cfg_args = cmdlinefix.grub_cfg_args(cfg)
        if cfg_args is not None and not cmdlinefix.satisfied(cfg_args, ensure, remove):
            regenerate = True
            module.warn("%s does not carry the configured kernel arguments (update-grub was not run after the "
                        "last edit); regenerating it" % bootcfg.GRUB_CFG)

    name, args = cmdlinefix.refresh_command(loader, managed)
    shown = " ".join([name] + args)
    activated = False
    if changes.changed or regenerate:
        if not p["refresh"]:
            skipped.append({"command": shown, "reason": "refresh=false: configuration written, not activated"})
        elif module.check_mode:
            skipped.append({"command": shown, "reason": "check mode"})
        else:
            try:
                changes.apply()
            except (OSError, IOError, FsError, ChangeError) as exc:
                restored = changes.restore_run()
                module.fail_json(msg="writing the boot configuration failed: %s; restored: %s"
                                     % (exc, ", ".join(restored) or "nothing had been written"),
                                 changes=changes.summary(), loader=loader_ret, commands=commands)
            try:
                rc, out, err = runner.run(name, args)
            except CommandUnavailable as exc:
                if fsroot.live:
                    restored = changes.restore_run()
                    module.fail_json(msg="%s is needed to activate the boot configuration but %s; the boot "
                                         "configuration was restored (%s)"
                                         % (name, exc.reason, ", ".join(restored) or "no file had changed"),
                                     changes=changes.summary(), loader=loader_ret, commands=commands)
                skipped.append({"command": shown, "reason": exc.reason})
            else:
                commands.append(cmdlinefix.command_record([name] + args, rc, out, err))
                if rc != 0:
                    restored = changes.restore_run()
                    detail = (err or out or "").strip().splitlines()
                    module.fail_json(
                        msg="%s failed (rc=%s)%s; the boot configuration was restored (%s), so the next boot "
                            "uses the previous command line" % (shown, rc, ": " + detail[-1] if detail else "",
                                                                ", ".join(restored) or "no file had changed"),
                        changes=changes.summary(), loader=loader_ret, commands=commands, restored=restored)
                activated = True

    effective_text = fsroot.try_value("/proc/cmdline")
    effective = bootcfg.split_cmdline(effective_text) if effective_text is not None else None
    if effective is None:
        module.warn("/proc/cmdline cannot be read; assuming a reboot is needed")
    configured = plan["after"]
    result = {
        "changed": changes.changed or (regenerate and (activated or module.check_mode)),
        "loader": loader_ret,
        "configured_args": configured,
        "configured_args_before": plan["before"],
        "effective_args": effective,
        "arg_changes": plan["arg_changes"],
        "files": [path for path, _old, _new in plan["files"]],
        "commands": commands,
        "skipped_commands": skipped,
        "regenerated": regenerate and (activated or module.check_mode),
        "reboot_required": cmdlinefix.reboot_needed(configured, effective, ensure, remove),
        "changes": changes.summary(),
    }
    if module._diff:
        result["diff"] = changes.diffs()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
