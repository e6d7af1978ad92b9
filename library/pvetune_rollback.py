#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pvetune_rollback
short_description: Undo pvetune's changes on a host from its manifest
description:
  - Reads C(/var/lib/pvetune/manifest.json), where every pvetune fix module records the original bytes of each
    file it changes (and which files it created) and the original of each runtime value.
  - Restores every modified file byte for byte (CT configs under C(/etc/pve) in place), removes every file and
    symlink pvetune created (boot units, the boot helper and its library, C(/etc/pvetune), drop-ins), and puts
    runtime values back (amd_pstate mode, governors, EPP, sysctls, PCIe MaxReadReq through a masked setpci).
  - A file changed by someone else since pvetune wrote it is a conflict; with conflicts nothing is written unless
    O(force=true).
  - When a boot configuration file is restored, runs C(update-grub) or C(proxmox-boot-tool refresh), like the
    kernel command line module; if that fails the files are put back as they were and the module fails.
version_added: "0.1.0"
author:
  - pvetune contributors (@pvetune)
options:
  root:
    description: Directory treated as C(/).
    type: path
    default: /
  run_id:
    description: Identifier of this rollback run (names the backup of the current state).
    type: str
  force:
    description: Restore and remove also files that changed since pvetune wrote them.
    type: bool
    default: false
  runtime:
    description: Also put runtime values back.
    type: bool
    default: true
  refresh:
    description: Run C(update-grub) / C(proxmox-boot-tool refresh) after restoring boot configuration files.
    type: bool
    default: true
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Undo pvetune on this host
  pvetune_rollback:
  register: undone
"""

RETURN = r"""
restored:
  description: Files put back to their original bytes.
  returned: always
  type: list
  elements: str
removed:
  description: Files and symlinks pvetune had created, removed.
  returned: always
  type: list
  elements: str
conflicts:
  description: Files left alone because they changed since pvetune wrote them (with why).
  returned: always
  type: list
  elements: dict
runtime:
  description: Runtime values put back (key, before, after, result).
  returned: always
  type: list
  elements: dict
reboot_required:
  description: True when boot configuration was restored (the running kernel still has pvetune's arguments).
  returned: always
  type: bool
commands:
  description: Commands run (refresh, daemon-reload, setpci).
  returned: always
  type: list
  elements: dict
skipped_commands:
  description: Commands not run, with why.
  returned: always
  type: list
  elements: dict
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune import cmdlinefix, pci, pciefix
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.rollback import RollbackError, plan_rollback, remaining_manifest
from ansible.module_utils.pvetune.core.runner import CommandUnavailable, Runner


def restore_runtime(module, fsroot, runner, manifest, keys, check_mode):
    """Put runtime values back; returns (records, done keys)."""
    records, done = [], []
    for key in keys:
        entry = manifest["runtime"][key]
        original = entry.get("original")
        if key.startswith("pcie:"):
            bdf = key.split(":", 1)[1].rsplit(":", 1)[0]
            rec = restore_devctl(fsroot, runner, bdf, original, check_mode)
        else:
            path = entry.get("path") or ""
            if not path.startswith(("/sys/", "/proc/sys/")) or ".." in path.split("/"):
                rec = {"key": key, "result": "failed", "message": "refusing to write %r" % path}
            else:
                current = fsroot.try_value(path)
                rec = {"key": key, "before": current, "after": original}
                if current is None:
                    rec.update(result="skipped", message="%s does not exist now" % path)
                elif current == original:
                    rec.update(result="unchanged")
                elif check_mode:
                    rec.update(result="would restore")
                else:
                    try:
                        with open(fsroot.path(path), "w") as handle:
                            handle.write("%s\n" % original)
                        rec.update(result="restored" if fsroot.try_value(path) == original else "failed")
                    except (OSError, IOError) as exc:
                        rec.update(result="failed", message=str(exc))
        rec.setdefault("key", key)
        records.append(rec)
        if rec["result"] in ("restored", "unchanged", "skipped"):
            done.append(key)
    return records, done


def restore_devctl(fsroot, runner, bdf, original, check_mode):
    """MaxReadReq back to the original Device Control's bits 14:12 (masked write, never the whole word)."""
    try:
        pci.validate_bdf(bdf)
        mrrs = pci.devctl_mrrs(int(str(original), 16))
        fns = pci.list_functions(fsroot, bdfs=[bdf])
        if not fns or fns[0].get("config") is None:
            return {"result": "skipped", "message": "%s not present now" % bdf}
        current = fns[0]["config"]["mrrs"]
        rec = {"before": "MaxReadReq %s" % current, "after": "MaxReadReq %s" % mrrs}
        if current == mrrs:
            rec["result"] = "unchanged"
            return rec
        if check_mode:
            rec["result"] = "would restore"
            return rec
        opts = pciefix.validate_options(mrrs=mrrs, vendor="0x%04x" % fns[0]["vendor_id"],
                                        class_prefix="0x%06x" % fns[0]["class_code"], bdfs=[bdf])
        functions, errors = pciefix.select_functions(fsroot, opts)
        if errors or not functions:
            rec.update(result="failed", message="; ".join(errors) or "%s not selectable" % bdf)
            return rec
        for step in pciefix.plan(functions, mrrs):
            pciefix.apply_step(fsroot, runner, step)
            rec["result"] = "restored" if step.get("result") in ("done", "unchanged") else "failed"
            if step.get("message"):
                rec["message"] = step["message"]
        return rec
    except (ValueError, FsError, CommandUnavailable) as exc:
        return {"result": "failed", "message": str(exc)}


def remove_created_dirs(fsroot, dirs):
    """Remove the directories pvetune created, deepest first, where they are empty now."""
    for directory in sorted(dirs, key=lambda d: -d.count("/")):
        try:
            os.rmdir(fsroot.path(directory, follow_last=False))
        except OSError:
            pass  # not empty (someone else's files) or already gone


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            run_id=dict(type="str"),
            force=dict(type="bool", default=False),
            runtime=dict(type="bool", default=True),
            refresh=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        fsroot = FsRoot(p["root"])
        changes = ChangeSet(fsroot, check_mode=module.check_mode, run_id=p["run_id"], record=False)
        manifest = changes.load_manifest()
    except (ValueError, ChangeError) as exc:
        module.fail_json(msg=str(exc))
    result = {"changed": False, "restored": [], "removed": [], "conflicts": [], "runtime": [],
              "reboot_required": False, "commands": [], "skipped_commands": []}
    if not manifest["files"] and not manifest["runtime"]:
        module.exit_json(msg="nothing to roll back: %s has no manifest entries" % changes.state_dir, **result)
    try:
        plan = plan_rollback(changes, manifest, force=p["force"])
    except (RollbackError, ChangeError, FsError) as exc:
        module.fail_json(msg=str(exc), **result)
    result.update(restored=plan["restored"], removed=plan["removed"], conflicts=plan["conflicts"])
    if plan["conflicts"] and not p["force"]:
        module.fail_json(msg="not rolling back: %d file(s) changed since pvetune wrote them: %s. Look at them, then "
                             "rerun with force=true (pvetune_rollback_force=true) to restore the originals anyway."
                         % (len(plan["conflicts"]), "; ".join("%s (%s)" % (c["path"], c["reason"])
                                                              for c in plan["conflicts"])), **result)
    runner = Runner(fsroot, module.run_command)
    units_touched = any(path.startswith("/etc/systemd/system/") for path in plan["restored"] + plan["removed"])
    if not module.check_mode:
        try:
            changes.apply()
        except (OSError, IOError, FsError, ChangeError) as exc:
            changes.restore_run()
            module.fail_json(msg="rollback failed while writing (%s); the files were put back as they were" % exc,
                             **result)
        if plan["boot_files"] and p["refresh"]:
            info, record = cmdlinefix.detect(fsroot, runner)
            if record:
                result["commands"].append(record)
            name, args = cmdlinefix.refresh_command(info["loader"], info["managed_by_pbt"])
            try:
                rc, out, err = runner.run(name, args)
                result["commands"].append(cmdlinefix.command_record([name] + args, rc, out, err))
                if rc != 0:
                    restored = changes.restore_run()
                    what = " ".join([name] + args)
                    detail = (err or out).strip()[-500:]
                    msg = ("%s failed (rc=%s) after restoring the boot configuration; the files were put back as "
                           "they were (%s): %s" % (what, rc, ", ".join(restored), detail))
                    module.fail_json(msg=msg, **result)
            except CommandUnavailable as exc:
                result["skipped_commands"].append({"command": " ".join([name] + args), "reason": exc.reason})
        if units_touched:
            try:
                rc, out, err = runner.run("systemctl", ["daemon-reload"])
                result["commands"].append({"cmd": "systemctl daemon-reload", "rc": rc})
            except CommandUnavailable as exc:
                result["skipped_commands"].append({"command": "systemctl daemon-reload", "reason": exc.reason})
    done_runtime = []
    if p["runtime"]:
        result["runtime"], done_runtime = restore_runtime(module, fsroot, runner, manifest, plan["runtime"],
                                                          module.check_mode)
    failed_runtime = [r for r in result["runtime"] if r["result"] == "failed"]
    result["reboot_required"] = bool(plan["boot_files"])
    runtime_changed = any(r["result"] in ("restored", "would restore") for r in result["runtime"])
    result["changed"] = bool(changes.changed or runtime_changed)
    if not module.check_mode:
        remove_created_dirs(fsroot, manifest.get("dirs", []))
        remaining = remaining_manifest(manifest, plan["done_paths"], done_runtime)
        state = fsroot.path(changes.state_dir)
        if not remaining["files"] and not remaining["runtime"]:
            for name in ("manifest.json",):
                if os.path.exists(os.path.join(state, name)):
                    os.unlink(os.path.join(state, name))
            shutil.rmtree(os.path.join(state, "originals"), ignore_errors=True)
        else:
            changes.save_manifest(remaining)
    if module._diff:
        result["diff"] = changes.diffs()
    if failed_runtime:
        module.fail_json(msg="files rolled back, but %d runtime value(s) could not be restored: %s" % (
            len(failed_runtime), "; ".join("%s: %s" % (r["key"], r.get("message", "")) for r in failed_runtime)),
            **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
