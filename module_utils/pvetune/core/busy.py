# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which pvetune module processes are changing this host right now.

A controller that dies (killed, lost network) leaves the module it started running on the host: Ansible's module
process calls setsid and outlives the connection. Breaking that run's lock would let a second run write beside it.
So every ChangeSet.apply() announces itself while it writes: ``/run/pvetune/busy.<pid>`` names its pid, the
process's start time (so a reused pid is not taken for it) and the run; ``live()`` lists the announcements whose
process still runs. A process killed with SIGKILL leaves its file behind; its pid is gone, so it no longer counts.
Everything goes through the root, so a test tree simulates a running process with ``proc/<pid>/stat``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import posixpath

from ansible.module_utils.pvetune.core.fsroot import FsError

BUSY_DIR = "/run/pvetune"
PREFIX = "busy."


def start_time(fsroot, pid):
    """Field 22 of /proc/<pid>/stat (the process's start time in clock ticks since boot), or None when there is no
    such process. The name in field 2 may hold spaces and parentheses: the fields after it follow its last ')'."""
    try:
        with open(fsroot.path("/proc/%d/stat" % pid), "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except (OSError, ValueError, FsError):
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


class Announcement:
    """``with Announcement(fsroot, run_id, what):`` the announcement file exists while the block runs. Never fails
    the change it announces: a /run that cannot be written only means a break cannot see this process."""

    def __init__(self, fsroot, run_id, what):
        self.fsroot = fsroot
        self.entry = {"pid": os.getpid(), "run_id": run_id, "what": what,
                      "started": start_time(fsroot, os.getpid())}
        self.real = None
        self.created = []

    def __enter__(self):
        try:
            sweep(self.fsroot)
            parent = BUSY_DIR
            missing = []
            while parent not in ("/", "") and not os.path.isdir(self.fsroot.path(parent)):
                missing.append(parent)
                parent = posixpath.dirname(parent)
            for host_dir in reversed(missing):
                os.mkdir(self.fsroot.path(host_dir), 0o755)
                self.created.append(self.fsroot.path(host_dir))
            self.real = self.fsroot.path(posixpath.join(BUSY_DIR, PREFIX + str(self.entry["pid"])))
            with open(self.real, "w") as handle:
                handle.write(json.dumps(self.entry, sort_keys=True) + "\n")
        except (OSError, ValueError, FsError):
            self.real = None
        return self

    def __exit__(self, *exc):
        try:
            if self.real:
                os.unlink(self.real)
            # pvetune's own directory when nothing is left in it (as the lock's release does), and the directories
            # above it that this announcement created.
            os.rmdir(self.fsroot.path(BUSY_DIR))
            for real in reversed(self.created[:-1]):
                os.rmdir(real)
        except (OSError, ValueError, FsError):
            pass
        return False


def sweep(fsroot):
    """Remove the announcements of processes that are gone (killed: SIGKILL runs no cleanup)."""
    real_dir = fsroot.path(BUSY_DIR)
    alive = {e["pid"] for e in live(fsroot)}
    for pid in announced(fsroot):
        if pid not in alive:
            os.unlink(os.path.join(real_dir, PREFIX + str(pid)))


def announced(fsroot):
    """The pids with an announcement file, alive or not."""
    try:
        names = os.listdir(fsroot.path(BUSY_DIR))
    except (OSError, ValueError, FsError):
        return []
    return sorted(int(n[len(PREFIX):]) for n in names if n.startswith(PREFIX) and n[len(PREFIX):].isdigit())


def live(fsroot, own_pid=None):
    """The announcements of pvetune processes that still run (other than ``own_pid``), lowest pid first."""
    found = []
    for pid in announced(fsroot):
        if pid == own_pid:
            continue
        try:
            with open(fsroot.path(posixpath.join(BUSY_DIR, PREFIX + str(pid)))) as handle:
                entry = json.loads(handle.read())
        except (OSError, ValueError, FsError):
            entry = None
        if not isinstance(entry, dict):
            entry = {}
        started = start_time(fsroot, pid)
        if started is None or (entry.get("started") is not None and entry.get("started") != started):
            continue   # gone, or the pid now belongs to another process
        found.append({"pid": pid, "run_id": str(entry.get("run_id") or "?"), "what": str(entry.get("what") or "?")})
    return found


def describe(entries):
    return ", ".join("pid %d (run %s, %s)" % (e["pid"], e["run_id"], e["what"]) for e in entries)
