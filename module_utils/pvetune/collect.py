# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshots: capture exactly what the audit reads, so it can run on the copy.

``collect(fsroot, runner)`` runs the audit's gather() through a recording
view of the root, then packs every file it read, every directory it listed
(entries it did not read become empty placeholders), every symlink on the way
(sysfs device links, /etc/pve/lxc) and the command outputs a snapshot needs
(``.pvetune/``) into a tar.gz held in memory.  Nothing is written on the host.

``extract(data, dest)`` unpacks such an archive safely: regular files,
directories and symlinks only, no absolute or ``..`` member names, no links
that point outside the snapshot once re-rooted.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import io
import json
import os
import posixpath
import re
import shutil
import stat
import tarfile
import time

from ansible.module_utils.pvetune.core.filewrite import atomic_write, makedirs
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot, walk_in_root
from ansible.module_utils.pvetune.core.runner import Runner
from ansible.module_utils.pvetune.concerns.gpu import checks as gpu
from ansible.module_utils.pvetune.concerns.lxcres import checks as lxcres
from ansible.module_utils.pvetune.concerns.nvidia import checks as nvidia
from ansible.module_utils.pvetune.concerns.storage import checks as storage
from ansible.module_utils.pvetune.formats import dev_nodes, pci_ids

SNAPSHOT_FORMAT = 1
MAX_FILE = 4 * 1024 * 1024


class RecordingRoot(FsRoot):
    """An FsRoot that remembers every path it was asked about."""

    def __init__(self, root="/"):
        super(RecordingRoot, self).__init__(root)
        self.read_paths = set()
        self.listed = {}
        self.probed = set()
        self.linked = set()

    def read_bytes(self, host_path, limit=None):
        self.read_paths.add(host_path)
        return super(RecordingRoot, self).read_bytes(host_path, limit)

    def listdir(self, host_path):
        names = super(RecordingRoot, self).listdir(host_path)
        self.listed[host_path] = names
        return names

    def exists(self, host_path):
        self.probed.add(host_path)
        return super(RecordingRoot, self).exists(host_path)

    def isdir(self, host_path):
        self.probed.add(host_path)
        return super(RecordingRoot, self).isdir(host_path)

    def isfile(self, host_path):
        self.probed.add(host_path)
        return super(RecordingRoot, self).isfile(host_path)

    def readlink(self, host_path):
        self.linked.add(host_path)
        return super(RecordingRoot, self).readlink(host_path)

    def stat(self, host_path):
        self.probed.add(host_path)
        return super(RecordingRoot, self).stat(host_path)

    def lstat(self, host_path):
        self.probed.add(host_path)
        return super(RecordingRoot, self).lstat(host_path)


def _read_chunked(real):
    """Read up to MAX_FILE + 1 bytes in 64 KiB chunks (procfs refuses one huge read with ENOMEM)."""
    chunks = []
    size = 0
    with open(real, "rb") as handle:
        while size <= MAX_FILE:
            chunk = handle.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)


class _Packer:
    def __init__(self, fsroot):
        self.fsroot = fsroot
        self.entries = {}  # host path -> ("dir",) | ("file", bytes) | ("link", target) | ("placeholder",)
        self.notes = []

    def _real(self, host_parts):
        return os.path.join(self.fsroot.root, *host_parts) if host_parts else self.fsroot.root

    def walk(self, host_path):
        """Resolve ``host_path`` inside the root, recording directories and symlinks on the way.

        Returns the resolved host path, or None when a component is missing or the links loop.
        """
        def visit(kind, here, target):
            self.entries.setdefault(here, ("link", target) if kind == "link" else ("dir",))

        try:
            current, complete = walk_in_root(self.fsroot.root, host_path, visit=visit)
        except FsError:
            return None
        return "/" + "/".join(current) if complete else None

    def add_file(self, host_path):
        resolved = self.walk(host_path)
        if resolved is None:
            return
        real = self._real([p for p in resolved.split("/") if p])
        try:
            st = os.stat(real)
        except OSError:
            return
        if stat.S_ISDIR(st.st_mode):
            self.entries.setdefault(resolved, ("dir",))
            return
        if not stat.S_ISREG(st.st_mode):
            return  # device nodes etc. are described in .pvetune/ instead
        try:
            data = _read_chunked(real)
        except (OSError, IOError) as exc:
            self.notes.append("%s: %s" % (resolved, exc))
            return
        if len(data) > MAX_FILE:
            self.notes.append("%s: larger than %d bytes, truncated" % (resolved, MAX_FILE))
            data = data[:MAX_FILE]
        self.entries[resolved] = ("file", data)

    def _add_children(self, directory, names, dirs=True):
        """Entries for the names in a directory: symlinks as links, subdirectories (with ``dirs``) as directories,
        anything else as an empty placeholder (its name is what the audit saw)."""
        for name in names:
            child = posixpath.join(directory, name)
            real = self._real([p for p in child.split("/") if p])
            try:
                st = os.lstat(real)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                self.entries.setdefault(child, ("link", os.readlink(real)))
            elif stat.S_ISDIR(st.st_mode):
                if dirs:
                    self.entries.setdefault(child, ("dir",))
            elif child not in self.entries:
                self.entries[child] = ("placeholder",)

    def add_dir(self, host_path, names):
        resolved = self.walk(host_path)
        if resolved is None:
            return
        self.entries.setdefault(resolved, ("dir",))
        self._add_children(resolved, names)

    def add_ct_root_dir(self, host_path, names):
        """A library directory in a running CT's root, /proc/<pid>/root/...: taken literally (walking would resolve
        the magic root link to the host's /) and only with the NVIDIA library names the audit reads."""
        parts = [p for p in host_path.split("/") if p]
        for i in range(2, len(parts) + 1):
            self.entries.setdefault("/" + "/".join(parts[:i]), ("dir",))
        self._add_children(host_path, names, dirs=False)

    def add_probe(self, host_path):
        resolved = self.walk(host_path)
        if resolved is None:
            return
        real = self._real([p for p in resolved.split("/") if p])
        if os.path.isdir(real):
            self.entries.setdefault(resolved, ("dir",))
        elif os.path.isfile(real) and resolved not in self.entries:
            self.add_file(resolved)

    def add_generated(self, host_path, data):
        self.entries[host_path] = ("file", data if isinstance(data, bytes) else data.encode("utf-8"))

    def tarball(self, mtime):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
            for path in sorted(self.entries):
                kind = self.entries[path]
                info = tarfile.TarInfo(name="." + path)
                info.mtime = mtime
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                if kind[0] == "dir":
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)
                elif kind[0] == "link":
                    info.type = tarfile.SYMTYPE
                    info.linkname = kind[1]
                    info.mode = 0o777
                    tar.addfile(info)
                else:
                    data = kind[1] if kind[0] == "file" else b""
                    info.size = len(data)
                    info.mode = 0o644
                    tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()


def format_ls(nodes):
    """``ls -l``-style listing of device nodes (what a snapshot carries instead of the nodes)."""
    lines = []
    for node in sorted(nodes, key=lambda n: n["path"]):
        lines.append("crw-rw-rw- 1 root root %d, %3d Jan  1 00:00 %s" % (node["major"], node["minor"], node["path"]))
    return "\n".join(lines) + ("\n" if lines else "")


def collect_archive(params, run_command, check_mode, diff):
    """pvetune_collect's one call: ``(failed, result, warnings)``, the result carrying collect()'s archive as base64
    (``archive_b64``), its ``info`` and its ``size``.  Nothing is written, in check mode or not."""
    try:
        data, info = collect(params["root"], lambda fsroot: Runner(fsroot, run_command))
    except ValueError as exc:
        return True, {"msg": "root: %s" % exc}, []
    return False, {"changed": False, "archive_b64": base64.b64encode(data).decode("ascii"), "info": info,
                   "size": len(data)}, []


def collect(fsroot_root, runner_factory, hostname=None, now=None):
    """Gather through a recording root and pack what was read. Returns (bytes, info)."""
    from ansible.module_utils.pvetune import audit
    from ansible.module_utils.pvetune.core.policy import merge_policy

    rec = RecordingRoot(fsroot_root)
    runner = runner_factory(rec)
    facts = audit.gather(rec, runner, merge_policy(None))
    packer = _Packer(rec)
    in_ct_root = re.compile(r"\A/proc/[0-9]+/root(/|\Z)").match
    for path, names in sorted(rec.listed.items()):
        if in_ct_root(path):
            packer.add_ct_root_dir(path, [n for n in names if lxcres.is_nvidia_lib(n)])
    for path in sorted(rec.read_paths):
        if path in pci_ids.PCI_IDS_PATHS:
            # The names of this host's functions, not the whole 1.3 MB database.
            fns = ((facts.get("pci") or {}).get("functions") or []) + list(
                ((facts.get("pci") or {}).get("bridges") or {}).values())
            wanted = {(f.get("vendor_id"), f.get("device_id")) for f in fns}
            packer.add_generated(path, pci_ids.excerpt(rec.read_text(path), wanted))
            continue
        packer.add_file(path)
    for path, names in sorted(rec.listed.items()):
        if not in_ct_root(path):
            packer.add_dir(path, names)
    for path in sorted(rec.probed | rec.linked):
        if in_ct_root(path):
            continue      # add_ct_root_dir took them
        if path in rec.linked:
            packer.walk(path)
        else:
            packer.add_probe(path)
    # /dev cannot travel as device nodes: describe them, with the nodes CTs bind from other directories.
    nodes, source = dev_nodes.stat_dev_nodes(rec)
    for ct in (facts.get("lxc") or {}).get("cts") or ():
        nodes.extend(n for n in (ct.get("sources") or {}).get("nodes") or () if n["type"] == "c" and n not in nodes)
    if source == "stat" or not rec.live:
        if source == "stat":
            packer.add_generated("/.pvetune/dev_nvidia.ls", format_ls(nodes))
        else:
            packer.add_file("/.pvetune/dev_nvidia.ls")
    commands = {}
    for name, args, dest in (("nvidia-smi", nvidia.SMI_ARGS, nvidia.SMI_SNAPSHOT),
                             (gpu.XID_COMMAND[0], gpu.XID_COMMAND[1], gpu.XID_SNAPSHOT),
                             (storage.ZFS_GET[0], list(storage.ZFS_GET[1]), storage.ZFS_GET_SNAPSHOT),
                             (storage.ZPOOL_LIST[0], list(storage.ZPOOL_LIST[1]), storage.ZPOOL_LIST_SNAPSHOT),
                             ("proxmox-boot-tool", ["status"], "/.pvetune/proxmox-boot-tool-status.txt")):
        if not rec.live:
            packer.add_file(dest)
            continue
        exe = runner.which(name)
        if not exe:
            commands[name] = "not installed"
            continue
        rc, out, err = runner.run(name, args)
        commands[name] = "exit %d" % rc
        if rc == 0 or (dest == gpu.XID_SNAPSHOT and rc == 1 and not (out + err).strip()):
            packer.add_generated(dest, out)       # journalctl --grep exits 1 when no line matches
    now = now if now is not None else time.time()
    host = hostname or (facts.get("host") or {}).get("hostname") or "unknown"
    info = {
        "format": SNAPSHOT_FORMAT,
        "host": host,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "collector": "pvetune collect.yml (pvetune_collect)",
        "source_root": rec.root,
        "files": sum(1 for e in packer.entries.values() if e[0] == "file"),
        "placeholders": sorted(p for p, e in packer.entries.items() if e[0] == "placeholder"),
        "commands": commands,
        "notes": packer.notes,
        "gather_errors": facts.get("errors", []),
    }
    packer.add_generated("/.pvetune/snapshot.json", json.dumps(info, indent=2, sort_keys=True) + "\n")
    return packer.tarball(int(now)), info


class UnsafeArchive(Exception):
    pass


def _safe_member(member, dest_real):
    name = member.name
    if name.startswith("/") or "\x00" in name:
        raise UnsafeArchive("absolute member name %r" % name)
    norm = posixpath.normpath(name)
    if norm == ".." or norm.startswith("../"):
        raise UnsafeArchive("member %r leaves the snapshot" % name)
    if not (member.isdir() or member.isfile() or member.issym()):
        raise UnsafeArchive("member %r is not a file, directory or symlink" % name)
    if member.issym():
        target = member.linkname
        base = posixpath.dirname(norm)
        resolved = posixpath.normpath(target.lstrip("/") if target.startswith("/") else posixpath.join(base, target))
        if resolved == ".." or resolved.startswith("../"):
            raise UnsafeArchive("symlink %r -> %r leaves the snapshot" % (name, target))
    return norm


def _refuse_symlink_components(dest_real, norm, name):
    """A file must not be written through a symlink (it could point anywhere once extracted)."""
    current = dest_real
    for part in norm.split("/"):
        current = os.path.join(current, part)
        if os.path.islink(current):
            raise UnsafeArchive("member %r would be written through the symlink %s" % (name, current))


def extract(data, dest):
    """Unpack a snapshot archive into ``dest`` (created); returns the member count."""
    dest_real = os.path.realpath(dest)
    count = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
        for member in members:
            _safe_member(member, dest_real)
        if not os.path.isdir(dest_real):
            os.makedirs(dest_real, 0o755)
        for member in members:
            norm = posixpath.normpath(member.name)
            target = os.path.join(dest_real, norm)
            if member.isdir():
                if not os.path.isdir(target):
                    os.makedirs(target, 0o755)
            elif member.issym():
                parent = os.path.dirname(target)
                if not os.path.isdir(parent):
                    os.makedirs(parent, 0o755)
                if os.path.lexists(target):
                    os.unlink(target)
                os.symlink(member.linkname, target)
            else:
                parent = os.path.dirname(target)
                if not os.path.isdir(parent):
                    os.makedirs(parent, 0o755)
                _refuse_symlink_components(dest_real, norm, member.name)
                handle = tar.extractfile(member)
                with open(target, "wb") as out:
                    out.write(handle.read())
                os.chmod(target, 0o644)
            count += 1
    return count


def read_info(data):
    """The snapshot.json of an archive (without extracting it)."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        try:
            member = tar.getmember("./.pvetune/snapshot.json")
        except KeyError:
            raise FsError("/.pvetune/snapshot.json", "not in the archive")
        return json.loads(tar.extractfile(member).read().decode("utf-8"))


def store_snapshot(params, run_command, check_mode, diff):
    """pvetune_snapshot's one call: decode the archive collect.yml fetched (base64 ``data``), write it to ``dest``
    and, with ``extract``, unpack it beside (``extract_dir``; a staging directory renamed into place, so a refused
    or broken archive leaves the previous tree).  Returns ``(failed, result, warnings)``."""
    try:
        data = base64.b64decode(params["data"], validate=True)
        info = read_info(data)
    except (binascii.Error, ValueError) as exc:
        return True, {"msg": "data is not a pvetune snapshot archive: %s" % exc}, []
    except Exception as exc:  # tarfile raises several types for a damaged archive
        return True, {"msg": "data is not a readable snapshot archive: %s" % exc}, []
    dest = os.path.abspath(params["dest"])
    target = os.path.abspath(params["extract_dir"] or (dest[:-7] if dest.endswith(".tar.gz") else dest + ".d"))
    members = 0
    if not check_mode:
        makedirs(os.path.dirname(dest))
        atomic_write(dest, data, 0o644)
        if params["extract"]:
            staging = target + ".tmp"
            if os.path.lexists(staging):
                shutil.rmtree(staging)
            try:
                members = extract(data, staging)
            except UnsafeArchive as exc:
                shutil.rmtree(staging, ignore_errors=True)
                return True, {"msg": "refusing to unpack %s: %s" % (dest, exc)}, []
            if os.path.lexists(target):
                shutil.rmtree(target)
            os.rename(staging, target)
    return False, {"changed": not check_mode, "dest": dest, "extract_dir": target if params["extract"] else "",
                   "members": members, "info": info}, []
