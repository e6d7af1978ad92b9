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
* lists the runtime values to put back, in a safe order: the amd_pstate mode,
  governors, EPP, sysctls, then PCIe Device Control (MaxReadReq).

Nothing here writes; the module applies the plan.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils.pvetune.core.changeset import sha256

BOOT_FILES_PREFIXES = ("/etc/default/grub", "/etc/kernel/cmdline", "/etc/kernel/proxmox-boot-pin",
                       "/etc/kernel/next-boot-pin")
RUNTIME_ORDER = ("amd_pstate:", "cpufreq:", "sysctl:", "pcie:")


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
        if is_boot_file(path):
            out["boot_files"].append(path)
    out["runtime"] = runtime_order(manifest.get("runtime", {}))
    return out


def remaining_manifest(manifest, done_paths, done_runtime):
    """The manifest without what was rolled back."""
    files = {p: e for p, e in manifest.get("files", {}).items() if p not in set(done_paths)}
    runtime = {k: e for k, e in manifest.get("runtime", {}).items() if k not in set(done_runtime)}
    return dict(manifest, files=files, runtime=runtime, dirs=[] if not files else manifest.get("dirs", []))
