# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""/etc/pve/storage.cfg (pve-storage's section config) and where a CT's rootfs volume lives on the host.

A section starts with ``<type>: <storage id>`` at the start of a line; its options follow, indented, as
``<key> <value>``.  ``rootfs_dir`` answers with a host directory only for volumes that are plain directories on the
host (ZFS subvolumes, ``subvol-*`` directories of directory-type storages, a bind-mounted path), else with the reason.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath
import re

STORAGE_CFG = "/etc/pve/storage.cfg"
_HEADER = re.compile(r"\A([a-z][a-z0-9]*):\s+([A-Za-z][A-Za-z0-9._-]*)\s*\Z")
_OPTION = re.compile(r"\A\s+([a-z][a-z0-9_-]*)(?:\s+(.*?))?\s*\Z")
_VOLUME = re.compile(r"\A([A-Za-z][A-Za-z0-9._-]*):([A-Za-z0-9][A-Za-z0-9._/-]*)\Z")
# Storage types whose volumes live below a "path" (pve-storage's DirPlugin and the plugins built on it).
DIR_TYPES = ("dir", "nfs", "cifs", "glusterfs", "cephfs", "btrfs")


def parse_storage_cfg(text):
    """``({storage id: {"type", options...}}, [warning])``; lines it cannot place are warnings, never fatal."""
    out, warnings, current = {}, [], None
    for no, line in enumerate((text or "").splitlines(), 1):
        if not line:
            # An empty line ends a section, as in pve-common's SectionConfig parse_config: the options after a
            # broken header are its own, never the previous section's.
            current = None
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        head = _HEADER.match(line)
        if head:
            current = out.setdefault(head.group(2), {"type": head.group(1)})
            continue
        opt = _OPTION.match(line)
        if opt and current is not None and opt.group(1) in current:
            # SectionConfig keeps the first value ("duplicate attribute"); "type" is the header's.
            warnings.append("%s:%d: duplicate option %s ignored" % (STORAGE_CFG, no, opt.group(1)))
        elif opt and current is not None:
            current[opt.group(1)] = opt.group(2) or ""
        else:
            warnings.append("%s:%d: not a section header or an option: %r" % (STORAGE_CFG, no, line[:60]))
    return out, warnings


def rootfs_volume(value):
    """``local-zfs:subvol-101-disk-0,size=8G`` -> ``("local-zfs", "subvol-101-disk-0")``; a path -> (None, path)."""
    volume = (value or "").split(",", 1)[0].strip()
    if volume.startswith("volume="):
        volume = volume[len("volume="):]
    if volume.startswith("/"):
        return None, posixpath.normpath(volume)
    match = _VOLUME.match(volume)
    if not match or ".." in match.group(2).split("/"):
        raise ValueError("rootfs %r is not <storage>:<volume> or a path" % volume[:80])
    return match.group(1), match.group(2)


def rootfs_dir(value, storages):
    """``(host directory, None)`` of a CT's rootfs when it is a plain directory there, else ``(None, why not)``."""
    try:
        storage, volume = rootfs_volume(value)
    except ValueError as exc:
        return None, str(exc)
    if storage is None:
        return volume, None
    conf = storages.get(storage)
    if conf is None:
        return None, "storage %s is not in %s" % (storage, STORAGE_CFG)
    kind = conf["type"]
    if kind == "zfspool":
        if not volume.startswith("subvol-"):
            return None, "rootfs %s is a zvol on %s: not a directory on the host" % (volume, storage)
        base = conf.get("mountpoint") or "/" + conf.get("pool", "").strip("/")
        return posixpath.join(base, volume), None
    if kind in DIR_TYPES and conf.get("path"):
        # pve-storage names these volumes <owner vmid>/<file>: images/<vmid>/subvol-*.subvol is a directory.
        if not re.match(r"\A[0-9]+/subvol-[^/]+\Z", volume):
            return None, "rootfs %s on %s storage %s is an image file: not a directory on the host" % (
                volume, kind, storage)
        return posixpath.join(conf["path"], "images", volume), None
    return None, "rootfs %s is on %s storage %s: a block device, not a directory on the host" % (volume, kind, storage)
