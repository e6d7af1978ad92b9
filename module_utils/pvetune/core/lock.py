# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-host fix lock: one JSON file naming the run that holds it, taken with O_EXCL.

The holder is the run id, the invocation's token (fixed once per ansible-playbook invocation by the run check:
two invocations given the same pvetune_run_id_override are two runs), the controller (host and pid) and the owner.
``manage_lock`` is pvetune_lock's one call: it checks the run id and the root, then ``lock`` takes or releases the
lock; it returns ``(failed, result, warnings)`` for the module to exit with.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import os
import time

from ansible.module_utils.pvetune.core import busy
from ansible.module_utils.pvetune.core.changeset import validate_run_id
from ansible.module_utils.pvetune.core.fsroot import FsRoot

LOCK_DIRS = ("/run/", "/var/lock/", "/var/lib/pvetune/")


def validate(path, owner, token="", controller=""):
    """The error message for a bad lock path, owner, token or controller, or None."""
    if (not path.startswith(LOCK_DIRS) or ".." in path.split("/")
            or any(ord(c) < 32 or ord(c) == 127 for c in path)):
        return "path must be under /run, /var/lock or /var/lib/pvetune, got %r" % path
    for name, value in (("owner", owner), ("controller", controller)):
        if len(value) > 200 or any(ord(c) < 32 or ord(c) == 127 for c in value):
            return "%s must be one short line of printable characters" % name
    if len(token) > 64 or not all(c in "0123456789abcdef" for c in token):
        return "token must be at most 64 lowercase hex digits"
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


def held_message(path, holder, age, stale, stale_after, running, same_run=False):
    taken_at = float(holder.get("taken_at") or 0)
    who = ("another invocation of run %s" if same_run else "run %s") % holder.get("run_id")
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(taken_at))
    msg = ("another pvetune run (fix.yml or rollback.yml) holds %s on this host: %s by %s%s since %s (%d s ago)%s. "
           % (path, who, holder.get("owner") or "unknown",
              " from %s" % holder["controller"] if holder.get("controller") else "", since, age,
              ", stale" if stale else ""))
    if running:
        return msg + ("A pvetune module still changes this host: %s. Wait for it to finish; the lock is not broken "
                      "while it runs." % busy.describe(running))
    return msg + ("Wait for it to finish; if it crashed, remove the file or rerun with pvetune_break_stale_lock=true "
                  "once it is older than %d s." % stale_after)


def ours(holder, run_id, token):
    """Whether the lock's holder is this invocation: the same run id, and the same token unless either has none (a
    lock written before tokens existed, a caller that passes none)."""
    if holder is None or holder.get("run_id") != run_id:
        return False
    return not (token and holder.get("token")) or holder.get("token") == token


def release(real, holder, run_id, check_mode, token=""):
    if not ours(holder, run_id, token):
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


def lock(fsroot, run_id, state, path, owner, stale_after, break_stale, check_mode, now=None, token="",
         controller=""):
    """Take (state=present) or release (absent) the lock at ``path``; returns ``(failed, result)``."""
    error = validate(path, owner, token, controller)
    if error:
        return True, {"msg": error}
    real = fsroot.path(path)
    holder = read_holder(real)
    now = time.time() if now is None else now
    if state == "absent":
        return release(real, holder, run_id, check_mode, token)
    if holder is not None:
        if ours(holder, run_id, token):
            return False, {"changed": False, "holder": holder}
        age = now - float(holder.get("taken_at") or 0)
        stale = age > stale_after
        # A module the holder started may outlive its controller (setsid): never break the lock under it.
        running = busy.live(fsroot, os.getpid())
        if not (stale and break_stale) or running:
            return True, {"msg": held_message(path, holder, age, stale, stale_after, running,
                                              holder.get("run_id") == run_id), "holder": holder}
    new = {"run_id": run_id, "owner": owner, "taken_at": now, "token": token, "controller": controller,
           "pid_note": "held across tasks by the controller's run, not by a host process"}
    if check_mode:
        # Nothing is taken in check mode: say what would happen, report no change.
        return False, {"changed": False, "holder": new, "msg": "check mode: the lock would be taken"}
    return take(real, holder, new, path)


def manage_lock(params, run_command, check_mode, diff):
    """pvetune_lock's one call: ``(failed, result, warnings)`` of ``lock`` with the module's options, after the run id
    and the root are checked."""
    try:
        validate_run_id(params["run_id"])
        fsroot = FsRoot(params["root"])
    except ValueError as exc:
        if params["state"] == "absent" and params["run_id"] and "root" in str(exc):
            # No lock can be held under a root that is no directory: nothing to release, and a failure here would
            # hide why the run stopped (the rollout's next task says it).
            return False, {"changed": False, "holder": {}, "msg": "not held: %s" % exc}, []
        return True, {"msg": str(exc)}, []
    failed, result = lock(fsroot, params["run_id"], params["state"], params["path"], params["owner"],
                          params["stale_after"], params["break_stale"], check_mode, token=params["token"],
                          controller=params["controller"])
    return failed, result, []
