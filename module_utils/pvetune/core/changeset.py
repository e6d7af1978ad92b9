# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Planned, backed-up, check-mode-safe file and runtime changes.

Every fix module plans its changes on a ``ChangeSet`` and then calls
``apply()``.  In check mode ``apply()`` writes nothing; the planned diffs are
what the module reports.  Otherwise, for every file:

* the first time pvetune ever touches a path, its original bytes (or the fact
  that it did not exist) are kept under ``<state>/originals/`` and recorded in
  ``<state>/manifest.json``; rollback restores exactly that;
* every run also keeps a per-run backup under ``<state>/runs/<run_id>/``;
* files under /etc/pve (the Proxmox cluster filesystem, where rename-over,
  chmod and chown fail) are written in place: open, write, truncate, fsync;
  everything else is written to a temporary file in the same directory and
  renamed over the original, keeping its mode and owner.

``restore_run()`` puts back the files this ChangeSet wrote (used when a
follow-up command such as update-grub fails).  The state directory defaults to
/var/lib/pvetune on the host (inside the root).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import errno
import hashlib
import json
import os
import posixpath
import re
import stat

from ansible.module_utils.pvetune.core import busy, faults
from ansible.module_utils.pvetune.core.filewrite import (
    PMXCFS_PREFIX, ChangeError, atomic_symlink, atomic_write, inplace_write, makedirs)
from ansible.module_utils.pvetune.core.fsroot import FsError

STATE_DIR = "/var/lib/pvetune"
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MANIFEST_VERSION = 1


def sha256(data):
    return hashlib.sha256(data).hexdigest() if data is not None else None


def new_run_id():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def validate_run_id(run_id):
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        raise ValueError("run_id must match %s" % RUN_ID.pattern)
    return run_id


def is_pmxcfs(host_path):
    return host_path.startswith(PMXCFS_PREFIX)


def _text(data):
    if data is None:
        return ""
    return data.decode("utf-8", "replace")


BUNDLE_LIST_MAX = 5  # a bundle lists at most this many files per action, by name; more are counted


def _file_action(item):
    if item["remove"]:
        return "remove"
    return "create" if item["before"] is None else "update"


def _describe(item, side):
    if item.get("link") is not None or item.get("remove_link"):
        target = item["link_before"] if side == "before" else item["link"]
        return "symlink -> %s" % target
    data = item[side]
    return "%d bytes, sha256 %s" % (len(data), sha256(data)[:16])


def _shown(rt, side):
    """(label, value) of a runtime change for diffs()."""
    if rt.get("shown"):
        return rt["shown"][0], rt["shown"][1 if side == "before" else 2]
    return rt["key"], rt[side]


def _bundle_diff(bundle, items):
    """One diff entry for a bundle's planned files: per action and directory, the files with their sizes and
    digests, or their count when a directory has more than BUNDLE_LIST_MAX of them."""
    before, after = [bundle["before"]] if bundle["before"] else [], [bundle["after"]] if bundle["after"] else []
    for action in ("create", "update", "remove"):
        groups = {}
        for i in items:
            if _file_action(i) == action:
                groups.setdefault(bundle["group"](i["path"]), []).append(i)
        for top, chosen in sorted(groups.items()):
            if len(chosen) > BUNDLE_LIST_MAX:
                sizes = [sum(len(i[side] or b"") for i in chosen) for side in ("before", "after")]
                if action != "create":
                    before.append("%d files under %s (%d bytes)" % (len(chosen), top, sizes[0]))
                if action != "remove":
                    after.append("%s %d files under %s (%d bytes)" % (action, len(chosen), top, sizes[1]))
                continue
            for i in chosen:
                if i["before"] is not None:
                    before.append("%s (%s)" % (i["path"], _describe(i, "before")))
                if i["after"] is not None:
                    after.append("%s %s (%s)" % (action, i["path"], _describe(i, "after")))
    return {"before_header": bundle["label"], "after_header": bundle["label"],
            "before": "".join(line + "\n" for line in before), "after": "".join(line + "\n" for line in after)}


class WriteFailed(ChangeError):
    """apply_or_restore: a write failed and this run's writes were put back (``restored``: their paths)."""

    def __init__(self, what, reason, restored):
        ChangeError.__init__(self, "writing %s failed: %s; restored: %s"
                             % (what, reason, ", ".join(restored) or "nothing had been written"))
        self.restored = restored


class ChangeSet:
    """Changes one module run makes, applied together."""

    def __init__(self, fsroot, check_mode=False, run_id=None, state_dir=STATE_DIR, record=True):
        self.fsroot = fsroot
        self.record = record  # False: keep per-run backups but leave the manifest alone (rollback)
        self.check_mode = check_mode
        self.run_id = validate_run_id(run_id or new_run_id())
        self.state_dir = state_dir
        self.files = []  # dicts: path, before, after, mode, remove
        self.runtime = []  # dicts: key, path, before, after
        self.written = []  # (path, before bytes or None) actually written by apply()
        self.created_dirs = []  # real paths of directories apply() created, parents first (restore_run removes them)
        self.removed_modes = {}  # host path -> mode of a file apply() removed (restore_run recreates it so)
        self.bundles = []  # add_bundle(): files shown as one summary in diffs() instead of their contents
        self.swept = []  # host paths of leftover temporary files apply() removed (a killed run's)
        self.applied = False

    # -- planning -----------------------------------------------------------
    def read(self, host_path):
        """Current bytes of a host path, or None when it does not exist."""
        try:
            return self.fsroot.read_bytes(host_path)
        except FsError as exc:
            if exc.reason == os.strerror(errno.ENOENT):
                return None
            raise

    def plan_file(self, host_path, new_data, mode=0o644, note=None):
        """Plan ``host_path`` to contain ``new_data``; returns True if that is a change. ``note`` (a JSON-able dict)
        goes into the file's manifest entry with the original, for rollback (what the host was like before)."""
        if isinstance(new_data, str):
            new_data = new_data.encode("utf-8")
        before = self.read(host_path)
        if before == new_data:
            return False
        self._refuse_symlink(host_path)
        self.files.append({"path": host_path, "before": before, "after": new_data, "mode": mode, "remove": False,
                           "note": note})
        return True

    def _refuse_symlink(self, host_path):
        """A file write or removal never goes through a symlink: inside a tree it would change the link's
        target, on the live host replace or remove the link itself; neither is what was planned."""
        real = self.fsroot.path(host_path, follow_last=False)
        if os.path.islink(real):
            raise ChangeError("%s is a symlink to %s; not writing through it" % (host_path, os.readlink(real)))

    def plan_symlink(self, host_path, target):
        """Plan ``host_path`` to be a symlink to ``target``; returns True if that is a change."""
        real = self.fsroot.path(host_path, follow_last=False)
        current = os.readlink(real) if os.path.islink(real) else None
        if current == target:
            return False
        if current is None and os.path.lexists(real):
            raise ChangeError("%s exists and is not a symlink; not replacing it" % host_path)
        self.files.append({"path": host_path, "before": None if current is None else ("-> " + current).encode(),
                           "after": ("-> " + target).encode(), "mode": None, "remove": False, "link": target,
                           "link_before": current})
        return True

    def plan_remove_link(self, host_path):
        """Plan removing the symlink ``host_path`` (not what it points to)."""
        real = self.fsroot.path(host_path, follow_last=False)
        if not os.path.islink(real):
            return False
        current = os.readlink(real)
        self.files.append({"path": host_path, "before": ("-> " + current).encode(), "after": None, "mode": None,
                           "remove": True, "link": None, "link_before": current, "remove_link": True})
        return True

    def plan_remove(self, host_path):
        before = self.read(host_path)
        if before is None:
            return False
        self._refuse_symlink(host_path)
        self.files.append({"path": host_path, "before": before, "after": None, "mode": None, "remove": True})
        return True

    def plan_runtime(self, key, host_path, before, after, shown=None):
        """Record a runtime (sysfs/procfs/register) change the caller performs itself.

        ``shown``: (label, before text, after text) for diffs() when the stored values are not what an
        operator reads (a register word whose meaning is a size); the manifest keeps the stored values."""
        if before == after:
            return False
        entry = {"key": key, "path": host_path, "before": before, "after": after}
        if shown:
            entry["shown"] = shown
        self.runtime.append(entry)
        return True

    def add_bundle(self, label, match, group=posixpath.dirname, before_note="", after_note=""):
        """Show the planned files for which ``match(host path)`` is true as one summary entry in diffs():
        their paths, sizes and sha256 instead of their contents (pvetune's own installed code, which an
        operator reviews by version and digest, not line by line); ``group(path)`` names the directory
        under which more than BUNDLE_LIST_MAX files are counted instead of listed."""
        self.bundles.append({"label": label, "match": match, "group": group, "before": before_note,
                             "after": after_note})

    def planned_view(self):
        """A read-only FsRoot-like view in which the planned files already have their new content."""
        return PlannedView(self.fsroot, {f["path"]: f["after"] for f in self.files})

    @property
    def changed(self):
        return bool(self.files or self.runtime)

    def diffs(self):
        """Ansible diff entries, one per file (or per bundle, see add_bundle) and one for all runtime values."""
        out = []
        bundled = [[] for bundle in self.bundles]
        for item in self.files:
            owner = next((i for i, b in enumerate(self.bundles) if b["match"](item["path"])), None)
            if owner is not None:
                bundled[owner].append(item)
                continue
            if item.get("remove_link"):
                out.append({"before_header": item["path"], "after_header": item["path"] + " (removed)",
                            "before": "symlink -> %s\n" % item["link_before"], "after": ""})
                continue
            if item.get("link") is not None:
                out.append({"before_header": item["path"], "after_header": item["path"],
                            "before": "symlink -> %s\n" % item["link_before"] if item["link_before"] else "",
                            "after": "symlink -> %s\n" % item["link"]})
                continue
            out.append({
                "before_header": item["path"] + ("" if item["before"] is not None else " (absent)"),
                "after_header": item["path"] + (" (removed)" if item["remove"] else ""),
                "before": _text(item["before"]),
                "after": _text(item["after"]),
            })
        out += [_bundle_diff(b, items) for b, items in zip(self.bundles, bundled) if items]
        if self.runtime:
            out.append({
                "before_header": "runtime values",
                "after_header": "runtime values",
                "before": "".join("%s = %s\n" % _shown(r, "before") for r in self.runtime),
                "after": "".join("%s = %s\n" % _shown(r, "after") for r in self.runtime),
            })
        return out

    def summary(self):
        return {
            "files": [{"path": f["path"], "action": _file_action(f) + (" symlink" if f.get("link") is not None else "")}
                      for f in self.files],
            "runtime": [{"key": r["key"], "before": r["before"], "after": r["after"]} for r in self.runtime],
        }

    # -- state ----------------------------------------------------------------
    def _state_path(self, *parts):
        return self.fsroot.path(os.path.join(self.state_dir, *parts))

    def load_manifest(self):
        path = self._state_path("manifest.json")
        if not os.path.exists(path):
            return {"version": MANIFEST_VERSION, "files": {}, "runtime": {}}
        with open(path, "rb") as handle:
            try:
                data = json.loads(handle.read().decode("utf-8"))
            except ValueError as exc:
                raise ChangeError("%s/manifest.json is corrupt (%s); refusing to write without knowing what "
                                  "pvetune changed before" % (self.state_dir, exc))
        data.setdefault("files", {})
        data.setdefault("runtime", {})
        return data

    def save_manifest(self, manifest):
        path = self._state_path("manifest.json")
        makedirs(os.path.dirname(path))
        atomic_write(path, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8"), 0o600)

    def _keep_original(self, manifest, item):
        if not self.record:
            return {}
        entry = manifest["files"].get(item["path"])
        if entry is not None:
            return entry
        entry = {"existed": item["before"] is not None, "original_sha256": sha256(item["before"]),
                 "first_run": self.run_id}
        if item.get("note"):
            entry["note"] = item["note"]
        if item["before"] is not None:
            rel = item["path"].lstrip("/")
            dest = self._state_path("originals", rel)
            makedirs(os.path.dirname(dest))
            atomic_write(dest, item["before"], 0o600)
            entry["original"] = os.path.join(self.state_dir, "originals", rel)
            st = self._stat(item["path"])
            if st is not None:
                entry["mode"] = st.st_mode & 0o7777
                entry["uid"] = st.st_uid
                entry["gid"] = st.st_gid
        manifest["files"][item["path"]] = entry
        return entry

    def _stat(self, host_path):
        try:
            return os.stat(self.fsroot.path(host_path))
        except OSError:
            return None

    # -- applying -------------------------------------------------------------
    def apply(self):
        """Write every planned file (nothing in check mode); returns the written paths."""
        if self.check_mode or self.applied:
            return []
        self.applied = True
        if not self.files and not self.runtime:
            return []
        self._check_pmxcfs_writable()
        # Announced while it writes: a lock break must not let another run write beside a module still running.
        with busy.Announcement(self.fsroot, self.run_id, "writing %d path(s)" % (len(self.files) + len(self.runtime))):
            return self._apply_planned()

    def _apply_planned(self):
        manifest = self.load_manifest() if self.record else {"files": {}, "runtime": {}}
        self._sweep_temps()
        try:
            for item in self.files:
                if item.get("remove_link"):
                    os.unlink(self.fsroot.path(item["path"], follow_last=False))
                    self.written.append((item["path"], ("link", item["link_before"])))
                    continue
                if item.get("link") is not None:
                    self._apply_symlink(manifest, item)
                    continue
                entry = self._keep_original(manifest, item)
                if item["before"] is not None:
                    backup = self._state_path("runs", self.run_id, item["path"].lstrip("/"))
                    makedirs(os.path.dirname(backup))
                    atomic_write(backup, item["before"], 0o600)
                entry["written_sha256"] = sha256(item["after"])
                entry["last_run"] = self.run_id
                self._write_ahead(manifest)
                real = self.fsroot.path(item["path"])
                if item["remove"]:
                    st = self._stat(item["path"])
                    if st is not None:
                        self.removed_modes[item["path"]] = st.st_mode & 0o7777
                    os.unlink(real)
                else:
                    self._create_parents(manifest, item["path"])
                    if is_pmxcfs(item["path"]):
                        # Recorded first: an in-place write that fails half-way leaves part of the new bytes,
                        # and restore_run() must put the original back.
                        self.written.append((item["path"], item["before"]))
                        inplace_write(real, item["after"], item["path"])
                    else:
                        atomic_write(real, item["after"], item["mode"] if item["before"] is None else None)
                if not (is_pmxcfs(item["path"]) and not item["remove"]):
                    self.written.append((item["path"], item["before"]))
                faults.kill_point(self.fsroot, item["path"])
            for rt in self.runtime:
                manifest["runtime"].setdefault(rt["key"], {"path": rt["path"], "original": rt["before"],
                                                           "first_run": self.run_id})
                manifest["runtime"][rt["key"]]["last"] = rt["after"]
        finally:
            if self.record:
                self.save_manifest(manifest)
        return [entry[0] for entry in self.written]

    def _sweep_temps(self):
        """Remove the temporary files of pvetune's own pattern (.<name>.pvetune-tmp) that a killed run left in the
        directories this one writes to: one fix run at a time holds the host (pvetune_lock), so none is in use."""
        for host_dir in sorted({posixpath.dirname(item["path"]) for item in self.files}):
            try:
                real = self.fsroot.path(host_dir)
                names = os.listdir(real) if os.path.isdir(real) else []
            except (OSError, FsError):
                continue
            for name in names:
                path = os.path.join(real, name)
                if name.startswith(".") and name.endswith(".pvetune-tmp") and not os.path.isdir(path):
                    os.unlink(path)
                    self.swept.append(posixpath.join(host_dir, name))

    def _write_ahead(self, manifest):
        """Save the manifest before the write it describes: a run killed right after a write (the controller lost,
        SIGKILL, a power cut) leaves an entry that rollback and the next run find, never an unrecorded change."""
        if self.record:
            self.save_manifest(manifest)

    def _create_parents(self, manifest, host_path):
        """Create the missing parent directories of ``host_path``. They are remembered for restore_run()
        (this run's failure) and, when recording, in the manifest for rollback."""
        missing = []  # deepest first
        parent = os.path.dirname(host_path)
        while parent not in ("/", "") and not os.path.isdir(self.fsroot.path(parent)):
            missing.append(parent)
            parent = os.path.dirname(parent)
        if not missing:
            return
        if self.record:
            created = manifest.setdefault("dirs", [])
            created.extend(d for d in missing if d not in created)
            self._write_ahead(manifest)
        makedirs(self.fsroot.path(missing[0]))
        self.created_dirs.extend(self.fsroot.path(d) for d in reversed(missing))

    def _apply_symlink(self, manifest, item):
        entry = manifest["files"].get(item["path"]) if self.record else {}
        if entry is None:
            entry = {"existed": item["link_before"] is not None, "symlink": True,
                     "original_target": item["link_before"], "first_run": self.run_id}
            manifest["files"][item["path"]] = entry
        real = self.fsroot.path(item["path"], follow_last=False)
        self._create_parents(manifest, item["path"])
        entry["written_target"] = item["link"]
        entry["last_run"] = self.run_id
        self._write_ahead(manifest)
        atomic_symlink(real, item["link"])
        self.written.append((item["path"], None if item["link_before"] is None else ("link", item["link_before"])))

    def apply_or_restore(self, what="the files"):
        """apply(); when a write fails, put back what this run had written and raise WriteFailed naming ``what``,
        the reason and the restored paths. Every fix that writes several files uses this, so a failure half-way
        never leaves a mixed state behind."""
        try:
            return self.apply()
        except (OSError, IOError, FsError, ChangeError) as exc:
            raise WriteFailed(what, exc, self.restore_run())

    def restore_run(self):
        """Undo this ChangeSet's file writes (newest first); returns restored paths."""
        restored = []
        for path, before in reversed(self.written):
            try:
                real = self.fsroot.path(path, follow_last=False)
                if isinstance(before, tuple):
                    if os.path.lexists(real):
                        os.unlink(real)
                    os.symlink(before[1], real)
                elif before is None:
                    if os.path.lexists(real):
                        os.unlink(real)
                elif self.read(path) == before:
                    pass  # still (or again) the original bytes: nothing to write (e.g. a write refused at once)
                elif is_pmxcfs(path):
                    inplace_write(real, before, path)
                else:
                    atomic_write(real, before, self.removed_modes.get(path))
            except (OSError, IOError, FsError, ChangeError) as exc:
                # Never raise from here: the caller is already reporting a failure.  Say what is left to do.
                restored.append("%s (NOT restored: %s; the original is in %s/runs/%s)"
                                % (path, exc, self.state_dir, self.run_id))
                continue
            restored.append(path)
        self.written = []
        for real in reversed(self.created_dirs):
            try:
                os.rmdir(real)  # only when empty: a directory this run created and nobody filled since
            except OSError:
                pass
        self.created_dirs = []
        return restored

    def _check_pmxcfs_writable(self):
        """Refuse before anything is written when /etc/pve is read-only (pmxcfs without quorum).

        pmxcfs reports files 0440 and directories 0555 while the node has no quorum, and then answers
        every change with EACCES.  Root would pass the permission check and only fail at the first
        write, after the backups; this check stops the run first, with the reason.
        """
        for item in self.files:
            if not is_pmxcfs(item["path"]):
                continue
            real = self.fsroot.path(item["path"], follow_last=False)
            target = real if os.path.lexists(real) else os.path.dirname(real)
            try:
                mode = os.stat(target).st_mode
            except OSError:
                continue
            if not mode & stat.S_IWUSR:
                raise ChangeError("%s is read-only (mode %04o): /etc/pve (pmxcfs) refuses every change while this "
                                  "node has no quorum (pvecm status); nothing was written"
                                  % (item["path"] if target == real else os.path.dirname(item["path"]),
                                     stat.S_IMODE(mode)))


class PlannedView:
    """Reads through an FsRoot, but planned files show their planned content (None = removed)."""

    def __init__(self, fsroot, planned):
        self._fsroot = fsroot
        self._planned = planned

    def listdir(self, host_path):
        names = set(self._fsroot.listdir(host_path) if self._fsroot.isdir(host_path) else ())
        for path, data in self._planned.items():
            if os.path.dirname(path) == host_path.rstrip("/"):
                if data is None:
                    names.discard(os.path.basename(path))
                else:
                    names.add(os.path.basename(path))
        return sorted(names)

    def isfile(self, host_path):
        if host_path in self._planned:
            return self._planned[host_path] is not None
        return self._fsroot.isfile(host_path)

    def read_text(self, host_path, limit=None, errors="replace"):
        if host_path in self._planned:
            return (self._planned[host_path] or b"").decode("utf-8", errors)
        return self._fsroot.read_text(host_path, limit, errors)

    def read_value(self, host_path):
        return self.read_text(host_path).strip()

    def exists(self, host_path):
        if host_path in self._planned:
            return self._planned[host_path] is not None
        return self._fsroot.exists(host_path)

    def isdir(self, host_path):
        # A directory a planned file will be created in is one.
        return self._fsroot.isdir(host_path) or any(
            data is not None and path.startswith(host_path.rstrip("/") + "/") for path, data in self._planned.items())
