#!/usr/bin/env python3
"""A FUSE test filesystem that behaves like /etc/pve (pmxcfs) for the operations pvetune uses.

    python tests/pmxcfs/pmxcfs_fuse.py BACKING MOUNTPOINT --state STATEFILE [--log OPLOG]

Mounts BACKING (a plain directory holding the files) on MOUNTPOINT, in the foreground, through
libfuse 3 (mfusepy).  Tests use ``tests/pmxcfs/pmxcfs.py`` (``mounted()``), which starts this as a
subprocess and unmounts it reliably.

What pmxcfs does (pve-cluster, src/pmxcfs/pmxcfs.c, cfs-plug-memdb.c, memdb.c, dcdb.c; researched,
described here, not copied):

* mounted with ``default_permissions``; every file reports uid 0, gid www-data (33) and mode 0640
  (0600 under priv/), directories and symlinks 0755 - the owner write bits drop (0440/0555) while
  the node has no quorum;
* ``chmod`` succeeds only when the requested permission bits are exactly the ones it reports (0640,
  0600 under priv/) and changes nothing; any other mode is EPERM.  ``chown`` succeeds only for uid
  0/-1 and gid www-data/-1 (a no-op); anything else is EPERM;
* ``rename`` works inside the database, also over an existing file (the target is unlinked, as
  PVE's own file_set_contents relies on), except: a lock directory under priv/lock is EACCES, a
  guest config renamed onto the id of a guest on another node is EEXIST, and across plugs
  (.version, .members, the local/lxc/qemu-server symlinks) EACCES;
* ``open`` never checks quorum, but every change (write, truncate, create, mkdir, rmdir, unlink,
  rename, utimens) goes through the cluster and fails with EACCES while the node has no quorum;
* files are limited to 1 MiB (EFBIG); there is no symlink, link, mknod, xattr or fsync operation
  (libfuse answers ENOSYS; the kernel turns an fsync ENOSYS into success).

The STATE file selects the behaviour and is read on every operation, so a test can switch it
while mounted:

  ``quorate``   pmxcfs with quorum, as above (the default when the file is missing);
  ``noquorum``  pmxcfs without quorum: read-only as above (modes 0440/0555, changes EACCES);
  ``strict``    what docs/DESIGN.md assumes, stricter than pmxcfs: rename (also to a new name),
                chmod and chown always EPERM; everything else as ``quorate``.  pvetune must work
                here too, which proves it never relies on rename, chmod or chown in /etc/pve.

OPLOG (optional) receives one JSON line per changing operation: ``[op, path(s)..., errno]``
(errno 0 = success), so tests can assert which operations pvetune attempted.
"""
import argparse
import errno
import json
import os
import stat
import sys
import threading

import mfusepy
from mfusepy import FUSE, FuseOSError, Operations

WWW_DATA_GID = 33
MAX_FILE_SIZE = 1024 * 1024
MODES = ("quorate", "noquorum", "strict")


class PmxcfsLike(Operations):
    use_ns = True

    def __init__(self, backing, state_file, log_file=None):
        self.backing = os.path.realpath(backing)
        self.state_file = state_file
        self.log_file = log_file
        self.log_lock = threading.Lock()

    # -- helpers ----------------------------------------------------------------------------------
    def mode(self):
        try:
            with open(self.state_file) as handle:
                value = handle.read().strip()
        except OSError:
            return "quorate"
        return value if value in MODES else "quorate"

    def real(self, path):
        return os.path.join(self.backing, path.lstrip("/"))

    @staticmethod
    def private(path):
        return path == "/priv" or path.startswith("/priv/")

    def log(self, op, *args):
        if not self.log_file:
            return
        with self.log_lock, open(self.log_file, "a") as handle:
            handle.write(json.dumps([op] + list(args)) + "\n")

    def change(self, op, *paths):
        """Refuse a change while there is no quorum (EACCES, as dcdb_send_fuse_message does)."""
        if self.mode() == "noquorum":
            self.log(op, *(list(paths) + [errno.EACCES]))
            raise FuseOSError(errno.EACCES)

    def done(self, op, *paths):
        self.log(op, *(list(paths) + [0]))

    # -- metadata ---------------------------------------------------------------------------------
    def getattr(self, path, fh=None):
        st = os.lstat(self.real(path)) if fh is None else os.fstat(fh)
        quorate = self.mode() != "noquorum"
        if stat.S_ISDIR(st.st_mode):
            mode = stat.S_IFDIR | (0o755 if quorate else 0o555)
        elif stat.S_ISLNK(st.st_mode):
            mode = stat.S_IFLNK | (0o777 if quorate else 0o555)
        else:
            mode = stat.S_IFREG | (0o666 if quorate else 0o444)
        mode &= 0o777700 if self.private(path) else (0o777755 if not stat.S_ISREG(mode) else 0o777750)
        return {"st_mode": mode, "st_ino": st.st_ino, "st_nlink": st.st_nlink, "st_uid": 0,
                "st_gid": WWW_DATA_GID, "st_size": st.st_size, "st_atime": st.st_atime_ns,
                "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns, "st_blocks": st.st_blocks}

    def readdir(self, path, fh):
        # With use_ino, an entry without st_ino would reach readdir(3) as inode 0, which glibc skips.
        out = []
        real = self.real(path)
        for name in [".", ".."] + sorted(os.listdir(real)):
            st = os.lstat(os.path.join(real, name)) if name not in (".", "..") else os.lstat(real)
            out.append((name, {"st_ino": st.st_ino, "st_mode": stat.S_IFMT(st.st_mode)}, 0))
        return out

    def readlink(self, path):
        return os.readlink(self.real(path))

    def statfs(self, path):
        sv = os.statvfs(self.real(path))
        return {key: getattr(sv, key) for key in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                                  "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    def chmod(self, path, mode):
        allowed = 0o600 if self.private(path) else 0o640
        if self.mode() == "strict" or (mode & 0o7777) != allowed:
            self.log("chmod", path, oct(mode & 0o7777), errno.EPERM)
            raise FuseOSError(errno.EPERM)
        self.done("chmod", path, oct(mode & 0o7777))
        return 0

    def chown(self, path, uid, gid):
        ok = uid in (0, -1, 0xFFFFFFFF) and gid in (WWW_DATA_GID, -1, 0xFFFFFFFF)
        if self.mode() == "strict" or not ok:
            self.log("chown", path, uid, gid, errno.EPERM)
            raise FuseOSError(errno.EPERM)
        self.done("chown", path, uid, gid)
        return 0

    def utimens(self, path, times=None):
        self.change("utimens", path)
        os.utime(self.real(path), ns=times) if times else os.utime(self.real(path))
        self.done("utimens", path)
        return 0

    # -- files ------------------------------------------------------------------------------------
    def open(self, path, flags):
        if flags & os.O_TRUNC:
            # libfuse 2 (pmxcfs) turns O_TRUNC into a truncate call, which needs quorum.
            self.change("truncate", path)
        fd = os.open(self.real(path), flags & ~os.O_CREAT)
        if flags & os.O_TRUNC:
            self.done("truncate", path)
        return fd

    def create(self, path, mode, fi=None):
        self.change("create", path)
        try:
            fd = os.open(self.real(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o640)
        except FileExistsError:
            self.log("create", path, errno.EEXIST)
            raise FuseOSError(errno.EEXIST)
        self.done("create", path)
        return fd

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        self.change("write", path)
        if offset + len(data) > MAX_FILE_SIZE:
            self.log("write", path, errno.EFBIG)
            raise FuseOSError(errno.EFBIG)
        written = os.pwrite(fh, data, offset)
        self.done("write", path)
        return written

    def truncate(self, path, length, fh=None):
        self.change("truncate", path)
        if length > MAX_FILE_SIZE:
            raise FuseOSError(errno.EFBIG)
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self.real(path), length)
        self.done("truncate", path)
        return 0

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)
        return 0

    def unlink(self, path):
        self.change("unlink", path)
        os.unlink(self.real(path))
        self.done("unlink", path)
        return 0

    def mkdir(self, path, mode):
        self.change("mkdir", path)
        os.mkdir(self.real(path), 0o755)
        self.done("mkdir", path)
        return 0

    def rmdir(self, path):
        self.change("rmdir", path)
        os.rmdir(self.real(path))
        self.done("rmdir", path)
        return 0

    def rename(self, old, new):
        if self.mode() == "strict":
            self.log("rename", old, new, errno.EPERM)
            raise FuseOSError(errno.EPERM)
        self.change("rename", old, new)
        if old.startswith("/priv/lock/") and os.path.isdir(self.real(old)):
            self.log("rename", old, new, errno.EACCES)
            raise FuseOSError(errno.EACCES)
        target = self.real(new)
        if os.path.isdir(target) and os.listdir(target):
            raise FuseOSError(errno.ENOTEMPTY)
        os.rename(self.real(old), target)
        self.done("rename", old, new)
        return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backing")
    parser.add_argument("mountpoint")
    parser.add_argument("--state", required=True, help="file holding quorate, noquorum or strict")
    parser.add_argument("--log", help="JSON lines of every changing operation")
    args = parser.parse_args(argv)
    ops = PmxcfsLike(args.backing, args.state, args.log)
    FUSE(ops, args.mountpoint, foreground=True, allow_other=True, default_permissions=True, use_ino=True,
         fsname="pmxcfs-test", subtype="pmxcfs", attr_timeout=0, entry_timeout=0, negative_timeout=0)
    return 0


if __name__ == "__main__":
    mfusepy.log.setLevel("ERROR")
    sys.exit(main())
