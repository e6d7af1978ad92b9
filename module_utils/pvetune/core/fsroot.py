# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every file pvetune reads or writes goes through an FsRoot.

An FsRoot maps host paths ("/proc/cmdline") onto a directory that looks like
"/": the live host (root "/"), a collected snapshot, or a test tree.  Paths can
never escape the root: ".." stops at the root and absolute symlinks found
inside a snapshot are resolved inside it, as a chroot would.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat

MAX_SYMLINKS = 40
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


_O_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 65536


def _read_fd(fd, limit=None):
    """All bytes of an open descriptor (at most ``limit``): procfs may return a file in several short reads."""
    chunks, size = [], 0
    while limit is None or size < limit:
        chunk = os.read(fd, _CHUNK if limit is None else min(_CHUNK, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


class FsError(Exception):
    """A read or write failed; ``path`` is the host path, ``reason`` says why."""

    def __init__(self, path, reason):
        super(FsError, self).__init__("%s: %s" % (path, reason))
        self.path = path
        self.reason = reason

    def __reduce__(self):  # pickles as itself (Exception's default would call FsError(message))
        return (FsError, (self.path, self.reason))


def _reason(exc):
    if isinstance(exc, OSError) and exc.errno is not None:
        return os.strerror(exc.errno)
    return str(exc)


def walk_in_root(root, host_path, follow_last=True, visit=None):
    """Resolve ``host_path`` inside ``root`` the way the kernel would inside a chroot: ``..`` stops at the root,
    symlinks (absolute ones re-rooted) are followed, at most MAX_SYMLINKS of them (else FsError ELOOP).

    Returns ``(components, complete)``: the resolved host components, and False when a component is missing (the
    rest is then kept literally, so callers get ENOENT).  ``visit(kind, host_path, target)`` is told of every
    symlink (``"link"``) and every directory walked through (``"dir"``); the snapshot packer records them.
    """
    parts = [p for p in host_path.split("/") if p and p != "."]
    current = []  # host components resolved so far (no symlinks)
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if current:
                current.pop()
            continue
        candidate = os.path.join(root, *(current + [part]))
        if not parts and not follow_last:
            current.append(part)
            break
        try:
            st = os.lstat(candidate)
        except OSError:
            current.append(part)
            current.extend(p for p in parts if p != "..")
            return current, False
        here = "/" + "/".join(current + [part])
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > MAX_SYMLINKS:
                raise FsError(host_path, os.strerror(errno.ELOOP))
            target = os.readlink(candidate)
            if visit:
                visit("link", here, target)
            if target.startswith("/"):
                current = []
            parts = [p for p in target.split("/") if p and p != "."] + parts
            continue
        current.append(part)
        if visit and parts and stat.S_ISDIR(st.st_mode):
            visit("dir", here, None)
    return current, True


class FsRoot:
    """Read and write host paths relative to ``root`` (default "/")."""

    def __init__(self, root="/"):
        if not isinstance(root, str) or not root:
            raise ValueError("root must be a non-empty path")
        if "\x00" in root:
            raise ValueError("root must not contain NUL bytes")
        if not os.path.isabs(root):
            raise ValueError("root must be an absolute path: %r" % root)
        if any(ord(c) < 32 or ord(c) == 127 for c in root):
            raise ValueError("root must not contain control characters: %r" % root[:80])
        self.root = os.path.normpath(os.path.realpath(root)) if root != "/" else "/"
        if root != "/" and self.root == "/":
            # A tree that turns out to be the live system ("/.", a symlink to /) would be treated as
            # a tree (no stand-ins, no reboot) while every write lands on this machine.
            raise ValueError("root %r resolves to /; pass / to act on the live host" % root[:80])
        self.live = self.root == "/"
        if not self.live and not os.path.isdir(self.root):
            # A regular file, a symlink loop, a missing tree: every read would fail later, each blamed on whatever
            # read first (a policy, the release of a lock) with a raw errno.
            raise ValueError("root %s is not a directory" % root)
        self._dir_cache = {}

    # -- path mapping -----------------------------------------------------
    @staticmethod
    def _check_host_path(path):
        if not isinstance(path, str) or not path.startswith("/"):
            raise FsError(str(path), "host paths must be absolute")
        if "\x00" in path:
            raise FsError(path.replace("\x00", "\\0"), "NUL byte in path")

    def _resolve_dir(self, host_dir):
        """Resolve a host directory path to a real path inside the root.

        A directory is resolved from its (cached) parent: one lstat per new directory
        instead of one per component (a 256-CPU sysfs walk touches ~1500 directories).
        A symlink is resolved by the full walk, exactly as before.
        """
        cached = self._dir_cache.get(host_dir)
        if cached is not None:
            return cached
        parent, name = os.path.split(host_dir)
        resolved = None
        if name and name not in (".", "..") and parent != host_dir:
            candidate = os.path.join(self._resolve_dir(parent), name)
            try:
                is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
            except OSError:
                is_link = False  # missing: kept literal, as _resolve does; callers get ENOENT
            if not is_link:
                resolved = candidate
        if resolved is None:
            resolved = self._resolve(host_dir, follow_last=True)
        self._dir_cache[host_dir] = resolved
        return resolved

    def _resolve(self, host_path, follow_last=True):
        """Walk ``host_path`` component by component inside the root."""
        current, _complete = walk_in_root(self.root, host_path, follow_last)
        return os.path.join(self.root, *current) if current else self.root

    def path(self, host_path, follow_last=True):
        """Return the real filesystem path for ``host_path`` inside the root."""
        self._check_host_path(host_path)
        if self.live:
            return os.path.normpath(host_path)
        norm = os.path.normpath(host_path)
        if norm == "/":
            return self.root
        head, tail = os.path.split(norm)
        try:
            base = self._resolve_dir(head)
            full = os.path.join(base, tail)
            if follow_last and os.path.islink(full):
                # Resolve the final symlink inside the root as well.
                rel = "/" + os.path.relpath(full, self.root)
                return self._resolve(rel, follow_last=True)
        except FsError as exc:
            # Name the path the caller asked for, not the partly resolved one (ELOOP).
            raise FsError(host_path, exc.reason)
        return full

    def host_path(self, real_path):
        """Inverse of path(): the host path for a path inside the root."""
        if self.live:
            return real_path
        rel = os.path.relpath(real_path, self.root)
        if rel == ".":
            return "/"
        if rel.startswith(".."):
            raise FsError(real_path, "outside the root")
        return "/" + rel

    # -- reads ------------------------------------------------------------
    def read_bytes(self, host_path, limit=None):
        try:
            fd = self._open_fd(host_path)
            try:
                return _read_fd(fd, limit)
            finally:
                os.close(fd)
        except (OSError, IOError) as exc:
            raise FsError(host_path, _reason(exc))

    def _open_fd(self, host_path):
        """os.open(self.path(host_path)) for reading, one lstat cheaper inside a snapshot.

        The last component is opened with O_NOFOLLOW; only when it is a symlink (ELOOP)
        is it resolved inside the root by path().  The directory part comes from
        _resolve_dir() as in path(), so it never leaves the root.  A raw descriptor, not a
        file object: a 256-CPU host's audit reads ~3500 small files, and the buffered
        wrapper costs as much as the open itself.
        """
        if not self.live and _O_NOFOLLOW:
            self._check_host_path(host_path)
            norm = os.path.normpath(host_path)
            if norm != "/":
                head, tail = os.path.split(norm)
                try:
                    full = os.path.join(self._resolve_dir(head), tail)
                except FsError as exc:
                    raise FsError(host_path, exc.reason)
                try:
                    return os.open(full, _O_READ | _O_NOFOLLOW)
                except OSError as exc:
                    if exc.errno != errno.ELOOP:
                        raise
        return os.open(self.path(host_path), _O_READ)

    def read_text(self, host_path, limit=None, errors="replace"):
        data = self.read_bytes(host_path, limit)
        return data.decode("utf-8", errors)

    def read_value(self, host_path):
        """A one-line sysfs/procfs value, stripped; FsError when unreadable."""
        return self.read_text(host_path, limit=65536).strip()

    def try_value(self, host_path, default=None):
        try:
            return self.read_value(host_path)
        except FsError:
            return default

    def exists(self, host_path):
        try:
            return os.path.exists(self.path(host_path))
        except FsError:
            return False

    def isdir(self, host_path):
        try:
            return os.path.isdir(self.path(host_path))
        except FsError:
            return False

    def isfile(self, host_path):
        try:
            return os.path.isfile(self.path(host_path))
        except FsError:
            return False

    def listdir(self, host_path):
        """Sorted names in a directory; [] when it does not exist."""
        try:
            return sorted(os.listdir(self.path(host_path)))
        except FileNotFoundError:
            return []
        except (OSError, IOError) as exc:
            raise FsError(host_path, _reason(exc))

    def lstat(self, host_path):
        try:
            return os.lstat(self.path(host_path, follow_last=False))
        except (OSError, IOError) as exc:
            raise FsError(host_path, _reason(exc))

    def stat(self, host_path):
        try:
            return os.stat(self.path(host_path))
        except (OSError, IOError) as exc:
            raise FsError(host_path, _reason(exc))

    def readlink(self, host_path):
        try:
            return os.readlink(self.path(host_path, follow_last=False))
        except (OSError, IOError) as exc:
            raise FsError(host_path, _reason(exc))


SNAPSHOT_DIR = "/.pvetune"
