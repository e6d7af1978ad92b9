# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-host fix lock: one JSON file naming the run that holds it, taken with O_EXCL.

``lock`` is the entry point (pvetune_lock); it returns ``(failed, result)`` for the module to exit with.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import time

LOCK_DIRS = ("/run/", "/var/lock/", "/var/lib/pvetune/")


def validate(path, owner):
    """The error message for a bad lock path or owner, or None."""
    if (not path.startswith(LOCK_DIRS) or ".." in path.split("/")
            or any(ord(c) < 32 or ord(c) == 127 for c in path)):
        return "path must be under /run, /var/lock or /var/lib/pvetune, got %r" % path
    if len(owner) > 200 or any(c in owner for c in "\n\r\x00"):
        return "owner must be one short line"
    return None


def read_holder(real):
    """The lock file's holder: a mapping with run_id and taken_at, None when there is no lock file. A file that is
    not what pvetune writes (empty, not JSON, null, a list, a taken_at that is no time) is still a lock: its holder
    says what is wrong with it, and dates from the file's modification time."""
    try:
        with open(real, "rb") as handle:
            data = handle.read()
        mtime = os.path.getmtime(real)
    except FileNotFoundError:
        return None
    try:
        holder = json.loads(data.decode("utf-8"))
    except ValueError:
        holder = None
        what = "empty" if not data.strip() else "not JSON"
    else:
        what = "a JSON %s, not an object" % type(holder).__name__ if not isinstance(holder, dict) else ""
    if what:
        return {"run_id": "(unreadable lock file: %s)" % what, "taken_at": mtime}
    try:
        taken_at = float(holder.get("taken_at"))
    except (TypeError, ValueError):
        taken_at = None
    if taken_at is None or math.isnan(taken_at) or taken_at < 0:   # missing, not a number, NaN
        holder = dict(holder, taken_at=mtime)
    if not isinstance(holder.get("run_id"), str) or not holder["run_id"]:
        holder = dict(holder, run_id="(unreadable lock file: no run id)")
    return holder


def held_message(path, holder, age, stale, stale_after):
    taken_at = float(holder.get("taken_at") or 0)
    return ("another pvetune run (fix.yml or rollback.yml) holds %s on this host: run %s by %s since %s (%d s ago)%s. "
            "Wait for it "
            "to finish; if it crashed, remove the file or rerun with pvetune_break_stale_lock=true once it "
            "is older than %d s." % (path, holder.get("run_id"), holder.get("owner") or "unknown",
                                     time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(taken_at)),
                                     age, ", stale" if stale else "", stale_after))


def release(real, holder, run_id, check_mode):
    if holder is None or holder.get("run_id") != run_id:
        return False, {"changed": False, "holder": holder or {},
                       "msg": "not held by this run" if holder else "not held"}
    if not check_mode:
        os.unlink(real)
        try:
            os.rmdir(os.path.dirname(real))  # pvetune's own lock directory, if nothing else is in it
        except OSError:
            pass
    return False, {"changed": True, "holder": {}}


def take(real, holder, new, path):
    directory = os.path.dirname(real)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    if holder is not None:  # breaking a stale lock
        os.unlink(real)
    try:
        fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return True, {"msg": "another pvetune run took %s a moment ago: %s" % (path, read_holder(real))}
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(new, sort_keys=True) + "\n")
    return False, {"changed": True, "holder": new}


def lock(fsroot, run_id, state, path, owner, stale_after, break_stale, check_mode, now=None):
    """Take (state=present) or release (absent) the lock at ``path``; returns ``(failed, result)``."""
    error = validate(path, owner)
    if error:
        return True, {"msg": error}
    real = fsroot.path(path)
    holder = read_holder(real)
    now = time.time() if now is None else now
    if state == "absent":
        return release(real, holder, run_id, check_mode)
    if holder is not None:
        if holder.get("run_id") == run_id:
            return False, {"changed": False, "holder": holder}
        age = now - float(holder.get("taken_at") or 0)
        stale = age > stale_after
        if not (stale and break_stale):
            return True, {"msg": held_message(path, holder, age, stale, stale_after), "holder": holder}
    new = {"run_id": run_id, "owner": owner, "taken_at": now, "pid_note": "held across tasks, not a pid"}
    if check_mode:
        # Nothing is taken in check mode: say what would happen, report no change.
        return False, {"changed": False, "holder": new, "msg": "check mode: the lock would be taken"}
    return take(real, holder, new, path)
