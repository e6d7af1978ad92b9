# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Proxmox side of the LXC GPU fix and health check: per-CT config locks and ``pct`` status/reboot.

Config edits hold Proxmox's own per-CT lock (flock on /run/lock/lxc/pve-config-<id>.lock, as ``pct set`` does), so
pvetune never interleaves with a Proxmox task on the same CT.  Not in check mode (taking a lock creates the lock
file).  ``pct`` runs only through the runner (stand-ins for a root other than /).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import os
import re
import time

from ansible.module_utils.pvetune.core.filewrite import makedirs
from ansible.module_utils.pvetune.core.fsroot import FsError

LOCK_FILE = "/run/lock/lxc/pve-config-%d.lock"
LOCK_TIMEOUT = 10


class CtLocks:
    """Proxmox's per-CT config locks (flock on /run/lock/lxc/pve-config-<id>.lock)."""

    def __init__(self, fsroot, timeout=None, sleep=time.sleep, clock=time.monotonic):
        self.fsroot = fsroot
        self.timeout = LOCK_TIMEOUT if timeout is None else timeout
        self.sleep = sleep
        self.clock = clock
        self.held = {}

    def acquire(self, ctid):
        """Returns None, or why the lock could not be taken."""
        host_path = LOCK_FILE % ctid
        try:
            real = self.fsroot.path(host_path)
            makedirs(os.path.dirname(real))
            fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except (OSError, FsError) as exc:
            return "cannot open %s: %s" % (host_path, exc)
        deadline = self.clock() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.held[ctid] = fd
                return None
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    return "cannot lock %s: %s" % (host_path, exc)
            if self.clock() >= deadline:
                os.close(fd)
                return ("%s is held by another Proxmox task (waited %s s); not changing the config while it runs"
                        % (host_path, self.timeout))
            self.sleep(0.2)

    def release_all(self):
        for fd in self.held.values():
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self.held = {}


_STATUS = re.compile(r"^status:\s*(\S+)\s*$", re.M)


def ct_status(runner, ctid):
    """``(status, error)``: "running"/"stopped"/... from ``pct status <id>``."""
    rc, out, err = runner.run("pct", ["status", str(int(ctid))])
    if rc != 0:
        return None, "pct status %d exited %d: %s" % (ctid, rc, excerpt(err or out))
    match = _STATUS.search(out or "")
    if not match:
        return None, "pct status %d printed no status: %s" % (ctid, excerpt(out))
    return match.group(1), None


def excerpt(text, limit=400):
    text = (text or "").strip()
    return text if len(text) <= limit else text[:limit] + "..."


def restart_ct(runner, ctid, timeout):
    """``pct reboot <id> --timeout <s>``, then ``pct status``; returns None or the error."""
    rc, out, err = runner.run("pct", ["reboot", str(int(ctid)), "--timeout", str(int(timeout))])
    if rc != 0:
        return "pct reboot %d exited %d: %s" % (ctid, rc, excerpt(err or out))
    status, error = ct_status(runner, ctid)
    if error:
        return "after pct reboot: %s" % error
    if status != "running":
        return "after pct reboot CT %d is %s, not running" % (ctid, status)
    return None
