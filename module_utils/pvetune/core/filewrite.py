# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way pvetune writes a file: atomically (a temporary ``.<name>.pvetune-tmp`` renamed over it, mode and owner
kept) or, on the Proxmox cluster filesystem, in place with a read-back. ChangeSet, the boot helper's state files and
the metrics textfile all write through here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

PMXCFS_PREFIX = "/etc/pve/"


class ChangeError(Exception):
    pass


def makedirs(path):
    if not os.path.isdir(path):
        os.makedirs(path, 0o755)


def atomic_write(real, data, mode):
    """Write via a temporary file in the same directory and rename it over ``real``."""
    directory, name = os.path.split(real)
    tmp = os.path.join(directory, ".%s.pvetune-tmp" % name)
    existing = None
    try:
        existing = os.stat(real)
    except OSError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if existing is not None:
            os.chmod(tmp, existing.st_mode & 0o7777)
            try:
                os.chown(tmp, existing.st_uid, existing.st_gid)
            except OSError:
                pass
        else:
            os.chmod(tmp, mode if mode is not None else 0o644)
        os.rename(tmp, real)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def atomic_symlink(real, target):
    """Point the symlink ``real`` at ``target`` by renaming a new link over it (readers see the old or the new)."""
    tmp = os.path.join(os.path.dirname(real), ".%s.pvetune-tmp" % os.path.basename(real))
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.rename(tmp, real)


def inplace_write(real, data, host_path=None):
    """Write without rename/chmod/chown (the Proxmox cluster filesystem refuses them), then read back.

    Raises ChangeError naming the file when a step fails or the file does not read back as written
    (EACCES on /etc/pve means pmxcfs has no quorum).
    """
    shown = host_path or real
    try:
        fd = os.open(real, os.O_RDWR | os.O_CREAT, 0o640)
        with os.fdopen(fd, "r+b") as handle:
            handle.seek(0)
            handle.write(data)
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
        with open(real, "rb") as handle:
            back = handle.read()
    except (OSError, IOError) as exc:
        hint = ""
        if exc.errno in (errno.EACCES, errno.EROFS) and shown.startswith(PMXCFS_PREFIX):
            hint = " (/etc/pve refuses changes while this node has no quorum)"
        reason = os.strerror(exc.errno) if exc.errno else exc
        raise ChangeError("writing %s in place failed: %s%s" % (shown, reason, hint))
    if back != data:
        raise ChangeError("%s does not read back what was written (%d bytes read, %d written)"
                          % (shown, len(back), len(data)))
