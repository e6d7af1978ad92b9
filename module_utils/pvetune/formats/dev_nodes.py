# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA device nodes: ``ls -l /dev/nvidia*`` listings and stat() of the nodes under a root.

``stat_dev_nodes(fsroot)`` gives the host's /dev/nvidia* and /dev/nvidia*/* nodes with their majors and minors: from
stat() when the root's /dev holds real character devices, else from the ``ls -l`` capture a snapshot carries in
``<root>/.pvetune/dev_nvidia.ls`` (git and unprivileged tar cannot hold device nodes), parsed by ``parse_ls_dev``.
No policy: which majors are NVIDIA's is decided by the callers.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import posixpath
import re
import stat

from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.formats.proc_devices import as_text

DEV_LS_FALLBACK = "/.pvetune/dev_nvidia.ls"
# where stat_dev_nodes() found the nodes
SOURCE_STAT = "stat"
SOURCE_LS = "ls"
SOURCE_NONE = "none"
_LS_MODE = re.compile(r"^([bcdlps-])([rwxsStTl-]{9})[.+@]?(?=\s)")
_LS_MAJMIN = re.compile(r"(?<![0-9,])([0-9]+),\s*([0-9]+)(?![0-9,])")
_CAP_NAME = re.compile(r"^nvidia-cap[0-9]+$")


def _resolve_ls_name(name, current, directory):
    if name.startswith("/"):
        return posixpath.normpath(name)
    base = current or directory
    if base is None:
        base = "/dev/nvidia-caps" if _CAP_NAME.match(name) else "/dev"
    return posixpath.normpath(posixpath.join(base, name))


def parse_ls_dev(text, directory=None):
    """Parse ``ls -l /dev/nvidia*`` (GNU, busybox, eza/``ll`` with icons) output.

    Returns ``[{"path", "type", "major", "minor", "mode"}]``; ``type`` is the
    first mode letter ("c", "d", "l", "-", ...), major/minor are ints for
    device nodes, else None.  ``/dev/nvidia-caps:`` headers set the directory
    of the bare names that follow; bare names without a header are resolved
    against ``directory``, else ``/dev`` (``nvidia-capN`` -> /dev/nvidia-caps).
    ``.``/``..``, ``total N`` and unrecognised lines are skipped.
    """
    nodes = []
    current = None
    for raw in as_text(text).splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        mode_match = _LS_MODE.match(line)
        if not mode_match:
            if line.endswith(":") and line.startswith("/"):
                current = posixpath.normpath(line[:-1])
            continue
        ftype = mode_match.group(1)
        rest = line[mode_match.end():]
        if ftype == "l" and " -> " in rest:
            rest = rest.split(" -> ", 1)[0]
        tokens = rest.split()
        if not tokens:
            continue
        name = tokens[-1]
        if name in (".", ".."):
            continue
        major = minor = None
        if ftype in ("c", "b"):
            majmin = _LS_MAJMIN.search(rest)
            if not majmin:
                continue
            major, minor = int(majmin.group(1)), int(majmin.group(2))
        nodes.append({
            "path": _resolve_ls_name(name, current, directory),
            "type": ftype,
            "major": major,
            "minor": minor,
            "mode": mode_match.group(1) + mode_match.group(2),
        })
    return nodes


def _node_from_stat(host_path, st):
    if stat.S_ISCHR(st.st_mode):
        ftype, major, minor = "c", os.major(st.st_rdev), os.minor(st.st_rdev)
    elif stat.S_ISBLK(st.st_mode):
        ftype, major, minor = "b", os.major(st.st_rdev), os.minor(st.st_rdev)
    elif stat.S_ISDIR(st.st_mode):
        ftype, major, minor = "d", None, None
    else:
        return None
    return {"path": host_path, "type": ftype, "major": major, "minor": minor, "mode": stat.filemode(st.st_mode)}


def _stat_node(fsroot, host_path):
    try:
        st = fsroot.lstat(host_path)
        if stat.S_ISLNK(st.st_mode):
            st = fsroot.stat(host_path)
    except FsError:
        return None
    return _node_from_stat(host_path, st)


def _dev_has_char_devices(fsroot):
    try:
        names = fsroot.listdir("/dev")
    except FsError:
        return False
    for name in names:
        try:
            if stat.S_ISCHR(fsroot.lstat("/dev/" + name).st_mode):
                return True
        except FsError:
            continue
    return False


def stat_dev_nodes(fsroot):
    """``(nodes, source)``: the host's /dev/nvidia* and /dev/nvidia*/* nodes.

    ``source`` is "stat" (real device nodes under the root), "ls" (the root's
    /dev holds no character devices at all, as in a git tree, and
    ``<root>/.pvetune/dev_nvidia.ls`` was parsed) or "none" (neither).  A live
    host without NVIDIA nodes gives ``([], "stat")``.
    """
    if not isinstance(fsroot, FsRoot):
        fsroot = FsRoot(fsroot)
    nodes = []
    try:
        names = fsroot.listdir("/dev")
    except FsError:
        names = []
    for name in names:
        if name.startswith("nvidia"):
            nodes.extend(_stat_tree(fsroot, "/dev/" + name))
    if any(n["type"] == "c" for n in nodes) or _dev_has_char_devices(fsroot):
        return sorted(nodes, key=lambda n: n["path"]), SOURCE_STAT
    listed = _listing(fsroot)
    return (listed, SOURCE_LS) if listed is not None else ([], SOURCE_NONE)


def _stat_tree(fsroot, host_path):
    """The node at ``host_path`` and, for a directory, the device nodes in it ([] when it does not exist)."""
    node = _stat_node(fsroot, host_path)
    if node is None:
        return []
    out = [node]
    if node["type"] == "d":
        try:
            names = fsroot.listdir(host_path)
        except FsError:
            names = []
        for name in names:
            sub = _stat_node(fsroot, posixpath.join(host_path, name))
            if sub is not None and sub["type"] in ("c", "b"):
                out.append(sub)
    return out


def _listing(fsroot):
    """The snapshot's ``ls -l`` listing of device nodes, parsed; None when the root has none."""
    if not fsroot.isfile(DEV_LS_FALLBACK):
        return None
    try:
        return parse_ls_dev(fsroot.read_text(DEV_LS_FALLBACK))
    except FsError:
        return None


def stat_paths(fsroot, paths):
    """``(nodes, unknown)`` for host paths outside /dev/nvidia* (nodes an admin made in a directory of their own).

    The same rule as stat_dev_nodes: stat() when the root's /dev holds real character devices (a path that does not
    exist gives no node: the caller reports it missing); else the snapshot's listing, where a path it does not
    describe is ``unknown`` (the snapshot cannot tell).  A directory gives itself and the char nodes in it.
    """
    if not paths:
        return [], []
    if not isinstance(fsroot, FsRoot):
        fsroot = FsRoot(fsroot)
    nodes, unknown = [], []
    if _dev_has_char_devices(fsroot):
        for path in paths:
            nodes.extend(_stat_tree(fsroot, path))
        return nodes, unknown
    listed = _listing(fsroot) or []
    for path in paths:
        found = [n for n in listed if n["path"] == path or n["path"].startswith(path + "/")]
        if found:
            nodes.extend(n for n in found if n not in nodes)
        else:
            unknown.append(path)
    return nodes, unknown
