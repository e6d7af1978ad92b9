# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Undo what pvetune changed on a host, from its manifest.

The manifest (changeset.ChangeSet) holds, for every file pvetune ever wrote, the
original bytes (or that it did not exist) and the checksum of what pvetune
wrote last, and for every runtime value the original.  ``plan_rollback``:

* restores a modified file's original bytes, removes a file pvetune created,
  and puts symlinks back, but only where the file still holds what pvetune
  wrote (or is already original); a file changed by someone else since is a
  *conflict*, left alone unless ``force``;
* lists the runtime values to put back, in a safe order: the P-state driver mode,
  governors, EPP, sysctls, then PCIe Device Control (MaxReadReq).

``plan_rollback`` writes nothing; ``run_rollback`` (pvetune_rollback's flow) applies the plan: the files,
the boot loader refresh, the runtime values (``restore_runtime``) and the manifest.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

from ansible.module_utils.pvetune.boot import units as bootunits
from ansible.module_utils.pvetune.concerns.bootargs import fix as bootargs_fix
from ansible.module_utils.pvetune.concerns.kernel import checks as kernel
from ansible.module_utils.pvetune.concerns.gpu import fix as gpu_fix
from ansible.module_utils.pvetune.concerns.pcie import acs_fix as pcie_acs_fix
from ansible.module_utils.pvetune.concerns.pcie import fix as pcie_fix
from ansible.module_utils.pvetune.concerns.storage import fix as storage_fix
from ansible.module_utils.pvetune.core.changeset import ChangeError, ChangeSet, WriteFailed, sha256
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.runner import RunFailed, Runner, run_or_restore

BOOT_FILES_PREFIXES = ("/etc/default/grub", "/etc/kernel/cmdline", "/etc/kernel/proxmox-boot-pin",
                       "/etc/kernel/next-boot-pin")
RUNTIME_ORDER = (("amd_pstate:", "intel_pstate:"), "cpufreq:", "sysctl:", "pcie:", "gpu:")


class RollbackError(Exception):
    pass


def _runtime_rank(key):
    for rank, prefix in enumerate(RUNTIME_ORDER):
        if key.startswith(prefix):
            # governors before EPP: with EPP written first the kernel may refuse it (EBUSY)
            if prefix == "cpufreq:" and key.endswith("energy_performance_preference"):
                return rank + 0.5
            return rank
    return len(RUNTIME_ORDER)


def runtime_order(keys):
    return sorted(keys, key=lambda k: (_runtime_rank(k), k))


def is_boot_file(path):
    return path.startswith(BOOT_FILES_PREFIXES)


def plan_rollback(changes, manifest, force=False):
    """Plan file restorations on ``changes`` (a ChangeSet with record=False).

    Returns {"restored": [...], "removed": [...], "unchanged": [...], "conflicts": [...],
    "boot_files": [...], "runtime": [keys in restore order], "done_paths": [...]}.
    """
    out = {"restored": [], "removed": [], "unchanged": [], "conflicts": [], "boot_files": [], "runtime": [],
           "done_paths": []}
    fsroot = changes.fsroot
    # Longest paths first: files inside directories pvetune created go before anything else.
    for path in sorted(manifest.get("files", {}), key=lambda p: (-p.count("/"), p)):
        entry = manifest["files"][path]
        if entry.get("symlink"):
            real = fsroot.path(path, follow_last=False)
            current = os.readlink(real) if os.path.islink(real) else None
            original = entry.get("original_target")
            if current == original:
                out["unchanged"].append(path)
                out["done_paths"].append(path)
            elif current == entry.get("written_target") or force:
                if original is None:
                    changes.plan_remove_link(path)
                    out["removed"].append(path)
                else:
                    changes.plan_symlink(path, original)
                    out["restored"].append(path)
                out["done_paths"].append(path)
            else:
                out["conflicts"].append({"path": path, "reason": "symlink now points to %s, not to what pvetune "
                                                                 "wrote (%s)" % (current, entry.get("written_target"))})
            continue
        current = changes.read(path)
        current_sha = sha256(current)
        if entry.get("existed"):
            if current_sha == entry.get("original_sha256"):
                out["unchanged"].append(path)
                out["done_paths"].append(path)
                continue
            if current_sha != entry.get("written_sha256") and not force:
                out["conflicts"].append({"path": path, "reason": "changed since pvetune wrote it (sha256 %s, "
                                                                 "pvetune wrote %s)" % (current_sha,
                                                                                        entry.get("written_sha256"))})
                continue
            original_path = entry.get("original")
            if not original_path:
                raise RollbackError("manifest has no original for %s" % path)
            data = changes.read(original_path)
            if data is None or sha256(data) != entry.get("original_sha256"):
                raise RollbackError("the backup of %s (%s) is missing or damaged; not restoring it"
                                    % (path, original_path))
            changes.plan_file(path, data, mode=entry.get("mode", 0o644))
            out["restored"].append(path)
        else:
            if current is None:
                out["unchanged"].append(path)
                out["done_paths"].append(path)
                continue
            if current_sha != entry.get("written_sha256") and not force:
                out["conflicts"].append({"path": path, "reason": "pvetune created it, but it changed since (sha256 "
                                                                 "%s, pvetune wrote %s)" % (current_sha,
                                                                                            entry.get("written_sha256"))})
                continue
            changes.plan_remove(path)
            out["removed"].append(path)
        out["done_paths"].append(path)
    # Every boot file the manifest still holds, already original or not: the manifest is trimmed only after a
    # rollback that completed, so one that is already original was put back by a rollback that died before (or
    # while) it refreshed the boot loader, whose grub.cfg or ESP entries may still boot pvetune's arguments.
    out["boot_files"] = sorted(p for p in out["done_paths"] if is_boot_file(p))
    out["runtime"] = runtime_order(manifest.get("runtime", {}))
    return out


def remaining_manifest(manifest, done_paths, done_runtime):
    """The manifest without what was rolled back."""
    files = {p: e for p, e in manifest.get("files", {}).items() if p not in set(done_paths)}
    runtime = {k: e for k, e in manifest.get("runtime", {}).items() if k not in set(done_runtime)}
    return dict(manifest, files=files, runtime=runtime, dirs=[] if not files else manifest.get("dirs", []))


def restore_value(fsroot, key, entry, check_mode):
    """Put one sysfs/procfs value (P-state mode, cpufreq, sysctl) back to the manifest's original."""
    original = entry.get("original")
    path = entry.get("path") or ""
    if not path.startswith(("/sys/", "/proc/sys/")) or ".." in path.split("/"):
        return {"key": key, "result": "failed", "message": "refusing to write %r" % path}
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
    return rec


def restore_runtime(fsroot, runner, manifest, keys, check_mode):
    """Put runtime values back; returns (records, done keys)."""
    records, done = [], []
    for key in keys:
        entry = manifest["runtime"][key]
        if key.startswith("pcie:"):
            bdf, register = key.split(":", 1)[1].rsplit(":", 1)
            restore = pcie_acs_fix.restore if register == "acsctl" else pcie_fix.restore_devctl
            rec = restore(fsroot, runner, bdf, entry.get("original"), check_mode)
        elif key.startswith("gpu:"):
            bdf, setting = key.split(":", 1)[1].rsplit(":", 1)
            restore = gpu_fix.restore_clocks if setting == "app_clocks" else gpu_fix.restore_power
            rec = restore(fsroot, runner, bdf, entry.get("original"), check_mode)
        else:
            rec = restore_value(fsroot, key, entry, check_mode)
        rec.setdefault("key", key)
        records.append(rec)
        if rec["result"] in ("restored", "unchanged", "skipped"):
            done.append(key)
    return records, done


def remove_created_dirs(fsroot, dirs):
    """Remove the directories pvetune created, deepest first, where they are empty now."""
    for directory in sorted(dirs, key=lambda d: -d.count("/")):
        try:
            os.rmdir(fsroot.path(directory, follow_last=False))
        except OSError:
            pass  # not empty (someone else's files) or already gone


def save_remaining(fsroot, changes, manifest, done_paths, done_runtime):
    """Write the manifest of what is left, or remove the manifest and the originals when nothing is."""
    remaining = remaining_manifest(manifest, done_paths, done_runtime)
    state = fsroot.path(changes.state_dir)
    if not remaining["files"] and not remaining["runtime"]:
        if os.path.exists(os.path.join(state, "manifest.json")):
            os.unlink(os.path.join(state, "manifest.json"))
        shutil.rmtree(os.path.join(state, "originals"), ignore_errors=True)
    else:
        changes.save_manifest(remaining)


def _apply_files(fsroot, runner, changes, plan, refresh, result):
    """Write the planned files, refresh the boot loader, reload systemd; RunFailed with the files put back."""
    try:
        changes.apply_or_restore("the original files back")
    except WriteFailed as exc:
        raise RunFailed("rollback failed: %s" % exc, **result)
    if plan["boot_files"] and refresh:
        result["refreshed"] = True
        info, record = bootargs_fix.detect(fsroot, runner)
        if record:
            result["commands"].append(record)
        name, args = bootargs_fix.refresh_command(info["loader"], info["managed_by_pbt"])
        try:
            run_or_restore(runner, changes, name, args, "the restored boot configuration was not activated, so "
                           "the files were put back as they were (%s)", commands=result["commands"],
                           skipped=result["skipped_commands"], required=False)
        except RunFailed as exc:
            raise RunFailed(exc.msg, **result)
    if storage_fix.CONF in plan["restored"] + plan["removed"] and storage_fix.root_on_zfs(fsroot):
        # zfs loads from the initramfs when root is on ZFS: the next boot must not read the removed cap.
        try:
            run_or_restore(runner, None, storage_fix.INITRAMFS[0], storage_fix.INITRAMFS[1], None,
                           commands=result["commands"], skipped=result["skipped_commands"], required=False)
        except RunFailed as exc:
            raise RunFailed("%s; %s is removed, but the initramfs keeps the ARC cap until update-initramfs -u -k all "
                            "succeeds" % (exc.msg, storage_fix.CONF), **result)
    if any(path.startswith("/etc/systemd/system/") for path in plan["restored"] + plan["removed"]):
        try:
            run_or_restore(runner, None, "systemctl", ["daemon-reload"], None, commands=result["commands"],
                           skipped=result["skipped_commands"], required=False)
        except RunFailed as exc:
            raise RunFailed("%s; the unit files are rolled back, but systemd keeps the old units loaded until a "
                            "daemon-reload succeeds" % exc.msg, **result)


def next_boot_after(fsroot, manifest):
    """What the next boot starts after the rollback, against what it started before pvetune's kernel fix (the note
    kept with the pin file's original); None where pvetune never pinned a kernel. Rollback restores the boot
    configuration, not the kernel packages fix.yml installed: with the pin gone, the loader's own rule (the newest
    installed kernel, as a rule) may pick the new kernel. That is said, with how to change it."""
    note = (manifest["files"].get(kernel.PIN_FILE) or {}).get("note") or {}
    before = note.get("next_boot_before")
    if not before:
        return None
    try:
        state = kernel.kernel_state(fsroot)
    except FsError:
        return None
    after = state["next_boot_kernel"]
    found = {"before_fix": before, "after_rollback": after, "reason": state["next_boot_reason"], "message": ""}
    if after != before:
        package = note.get("package_installed")
        found["message"] = (
            "the next boot starts %s (%s), not %s as before the fix: rollback restored the boot configuration but "
            "keeps the kernel package%s fix.yml installed and its boot entries. To boot %s again: "
            "proxmox-boot-tool kernel pin %s (or remove the newer kernel's package)"
            % (after or "a kernel that cannot be told", state["next_boot_reason"] or state["next_boot_rule"], before,
               " %s" % package if package else "s", before, before))
    return found


def run_rollback(fsroot, runner, changes, manifest, params, check_mode):
    """pvetune_rollback's flow: plan, put the files back, refresh, restore runtime values, trim the manifest.

    Returns the module result (without ``diff``); raises RunFailed (msg + result keys) on a failure.
    """
    result = {"changed": False, "restored": [], "removed": [], "conflicts": [], "runtime": [],
              "reboot_required": False, "commands": [], "skipped_commands": [], "next_boot": None}
    if not manifest["files"] and not manifest["runtime"]:
        return dict(result, msg="nothing to roll back: %s has no manifest entries" % changes.state_dir)
    try:
        plan = plan_rollback(changes, manifest, force=params["force"])
    except (RollbackError, ChangeError, FsError) as exc:
        raise RunFailed(str(exc), **result)
    result.update(restored=plan["restored"], removed=plan["removed"], conflicts=plan["conflicts"])
    if plan["conflicts"] and not params["force"]:
        raise RunFailed("not rolling back: %d file(s) changed since pvetune wrote them: %s. Look at them, then "
                        "rerun with force=true (pvetune_rollback_force=true) to restore the originals anyway."
                        % (len(plan["conflicts"]), "; ".join("%s (%s)" % (c["path"], c["reason"])
                                                             for c in plan["conflicts"])), **result)
    if not check_mode:
        _apply_files(fsroot, runner, changes, plan, params["refresh"], result)
    done_runtime = []
    if params["runtime"]:
        result["runtime"], done_runtime = restore_runtime(fsroot, runner, manifest, plan["runtime"], check_mode)
    result["reboot_required"] = bool(plan["boot_files"])
    runtime_changed = any(r["result"] in ("restored", "would restore") for r in result["runtime"])
    # A boot loader refresh (or, in check mode, one that would run) changes what the host boots.
    result["changed"] = bool(changes.changed or runtime_changed or result.pop("refreshed", False)
                             or (check_mode and plan["boot_files"] and params["refresh"]))
    if not check_mode:
        remove_created_dirs(fsroot, manifest.get("dirs", []))
        result["next_boot"] = next_boot_after(fsroot, manifest)
        save_remaining(fsroot, changes, manifest, plan["done_paths"], done_runtime)
    return result


def runtime_failures(result):
    """The message for runtime values that could not be restored, or None."""
    failed = [r for r in result["runtime"] if r["result"] == "failed"]
    if not failed:
        return None
    return "files rolled back, but %d runtime value(s) could not be restored: %s" % (
        len(failed), "; ".join("%s: %s" % (r["key"], r.get("message", "")) for r in failed))


def rollback(params, run_command, check_mode, diff):
    """pvetune_rollback's one call: ``(failed, result, warnings)``.  The run's manifest (and pvetune's boot runtime
    bundle, removed with it) is read before anything is restored; a restore of the runtime settings that fails
    fails the module after everything else was put back."""
    try:
        fsroot = FsRoot(params["root"])
        changes = ChangeSet(fsroot, check_mode=check_mode, run_id=params["run_id"], record=False)
        bootunits.add_runtime_bundle(changes, removing=True)
        manifest = changes.load_manifest()
    except (ValueError, ChangeError) as exc:
        return True, {"msg": str(exc)}, []
    try:
        result = run_rollback(fsroot, Runner(fsroot, run_command), changes, manifest, params, check_mode)
    except RunFailed as exc:
        return True, exc.fail_kwargs(), []
    if "msg" in result:  # nothing to roll back
        return False, result, []
    if diff:
        result["diff"] = changes.diffs()
    warnings = [result["next_boot"]["message"]] if (result["next_boot"] or {}).get("message") else []
    failed = runtime_failures(result)
    if failed:
        return True, dict(result, msg=failed), warnings
    return False, result, warnings
