# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a CT's NVIDIA nodes come from besides the host's /dev: custom node directories and LXC hook scripts.

A CT sees an NVIDIA node at ``dev/nvidia*`` whatever the ``lxc.mount.entry`` source is; admins bind nodes they made
with mknod in a directory of their own (often to give an unprivileged CT other owners), and hooks (``lxc.hook.*``)
can mknod nodes at start.  Either carries majors that go stale exactly like allow lines.  ``read_ct_sources`` is the
one reader (audit, fix and boot helper): the nodes behind the CT's non-/dev sources (stat through the root, or the
snapshot's ``ls -l`` listing) and the text of its hook scripts.  ``hook_nodes`` reads the mknod calls of a script.
The host's cgroup version (``cgroup_version_of``) and the config of a CT's last start (``read_started_config``) are
read here too: the other inputs that decide which device rules a CT has.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath
import re
import shlex

from ansible.module_utils.pvetune.core.fsroot import FsError
from ansible.module_utils.pvetune.formats import dev_nodes
from ansible.module_utils.pvetune.formats.ct_config import DEVICE_KEYS, KEY_MOUNT

HOOK_LIMIT = 256 * 1024
_CT_NVIDIA = re.compile(r"^/dev/nvidia[^/]*(/[^/]+)?$")
# the CT-side path a mknod argument names: ${LXC_ROOTFS_MOUNT}/dev/nvidia-uvm, $ROOT/dev/nvidia0, /dev/nvidiactl
_MKNOD_TARGET = re.compile(r"(?:^|/)dev/(nvidia[A-Za-z0-9_.-]*(?:/[A-Za-z0-9_.-]+)?)$")
_NUMBER = re.compile(r"^[0-9]+$")


def cgroup_version_of(fsroot):
    """2 on a unified (cgroup v2) host, 1 on a legacy/hybrid one, None when the root does not say."""
    if fsroot.isfile("/sys/fs/cgroup/cgroup.controllers"):
        return 2
    if fsroot.isdir("/sys/fs/cgroup/devices"):
        return 1
    return None


# Proxmox writes the LXC config of every start here (update_lxc_config: raw lxc.* keys as "key = value", devN
# entries as "lxc.cgroup2.devices.allow = c M:m rw" with the majors of that moment): the rules a running CT has.
STARTED_CONFIG = "/var/lib/lxc/%s/config"


def read_started_config(fsroot, ctid):
    """The LXC config CT ``ctid`` was last started with (text, surrogateescape), or None when there is none."""
    try:
        return fsroot.read_bytes(STARTED_CONFIG % ctid).decode("utf-8", "surrogateescape")
    except FsError:
        return None


def ct_path_of(mount):
    """The path a mount entry's target has inside the CT (``dev/nvidia0`` -> ``/dev/nvidia0``), or None.

    LXC mounts a relative target below the CT's rootfs; an absolute target outside the rootfs is skipped ("Ignoring
    mount point", conf.c mount_entry_on_absolute_rootfs), so it gives no CT path (see ``ignored_target``).
    """
    target = mount.target
    if not target:
        return None
    if target.startswith("/"):
        marker = "/rootfs/"
        if marker not in target:
            return None
        target = target.split(marker, 1)[1]
    return "/" + posixpath.normpath(target.replace("\\040", " ")).lstrip("/")


def ignored_target(mount):
    """Whether LXC skips this entry because its target is absolute and outside the CT's rootfs."""
    return mount.target.startswith("/") and "/rootfs/" not in mount.target


def is_nvidia_ct_path(path):
    return bool(path) and bool(_CT_NVIDIA.match(path))


def nvidia_mount(mount):
    """Whether a mount entry gives the CT an NVIDIA node: its source is /dev/nvidia* or its target dev/nvidia*."""
    source = mount.norm_source
    return bool(source) and (source.startswith("/dev/nvidia") or is_nvidia_ct_path(ct_path_of(mount)))


def custom_sources(ct):
    """Host paths outside /dev/nvidia* that the CT binds as NVIDIA nodes, in file order."""
    out = []
    for line in ct.main_lines():
        if line.key == KEY_MOUNT and line.mount is not None and nvidia_mount(line.mount):
            source = line.mount.norm_source
            if source.startswith("/") and not source.startswith("/dev/nvidia") and source not in out:
                out.append(source)
    return out


def hook_lines(ct):
    """``[(line, script path or None)]`` for the main section's ``lxc.hook.*`` lines.

    A hook value is a shell command line (LXC runs ``sh -c "exec <value> ..."``); its first word is the program.
    """
    out = []
    for line in ct.main_lines():
        if line.kind == "kv" and line.key.startswith("lxc.hook.") and line.key != "lxc.hook.version":
            try:
                words = shlex.split(line.value or "")
            except ValueError:
                words = []
            path = words[0] if words and words[0].startswith("/") else None
            out.append((line, posixpath.normpath(path) if path else None))
    return out


def read_ct_sources(fsroot, ct):
    """``{"nodes", "unknown", "hooks"}`` for one parsed CT config (the reader of what custom sources and hooks hold).

    ``nodes``: the char nodes (and directories) behind custom_sources(); ``unknown``: sources a snapshot listing does
    not describe; ``hooks``: ``{script path: text}``, or ``{"error": why}`` for a script that cannot be read.
    """
    nodes, unknown = dev_nodes.stat_paths(fsroot, custom_sources(ct))
    hooks = {}
    for _line, path in hook_lines(ct):
        if path is None or path in hooks:
            continue
        try:
            hooks[path] = fsroot.read_text(path, limit=HOOK_LIMIT)
        except FsError as exc:
            hooks[path] = {"error": exc.reason}
    return {"nodes": nodes, "unknown": unknown, "hooks": hooks}


def _mknod_calls(text):
    """``[(line_no, [words after mknod])]`` for every mknod call in a shell script (comments skipped)."""
    calls = []
    for number, raw in enumerate(text.splitlines(), 1):
        if "mknod" not in raw:
            continue
        try:
            words = shlex.split(raw, comments=True)
        except ValueError:
            words = raw.split()
        for index, word in enumerate(words):
            if posixpath.basename(word) == "mknod":
                args = []
                for arg in words[index + 1:]:
                    if arg in (";", "&&", "||", "|") or arg.endswith(";"):
                        args.append(arg.rstrip(";"))
                        break
                    args.append(arg)
                calls.append((number, args))
    return calls


def hook_nodes(text):
    """The NVIDIA nodes a hook script makes: ``[{"ct_path", "major", "minor", "line_no", "literal"}]``.

    ``mknod [-m MODE] PATH c MAJOR MINOR``; ``literal`` is False when the major is computed (``$(...)``, a variable),
    which is how a hook stays right across driver updates.
    """
    out = []
    for number, args in _mknod_calls(text):
        words = []
        skip = False
        for arg in args:
            if skip:
                skip = False
                continue
            if arg in ("-m", "--mode", "-Z", "--context"):
                skip = True
                continue
            if arg.startswith("-"):
                continue
            words.append(arg)
        if len(words) < 4 or words[1] not in ("c", "u"):
            continue
        match = _MKNOD_TARGET.search(words[0])
        if not match:
            continue
        literal = bool(_NUMBER.match(words[2]))
        out.append({"ct_path": "/dev/" + match.group(1), "line_no": number, "literal": literal,
                    "major": int(words[2]) if literal else None,
                    "minor": int(words[3]) if _NUMBER.match(words[3]) else None})
    return out


# ---------------------------------------------------------------------------
# Analysis helpers (called by concerns/lxcgpu.analyze)
# ---------------------------------------------------------------------------
def is_nvidia_path(path):
    return bool(path) and isinstance(path, str) and posixpath.normpath(path).startswith("/dev/nvidia")


def ct_config_path(line):
    """Where a mount line's node appears in the CT (its target), else its source."""
    return ct_path_of(line.mount) or line.mount.norm_source


def resolve_path_rule(rule, char_nodes):
    """A path rule (``/dev/nvidia0 rw``) names the node LXC stat()s at CT start: take its current type and numbers."""
    node = char_nodes.get(posixpath.normpath(rule.path))
    if node is not None:
        rule.type, rule.major, rule.minor = node["type"], node["major"], node["minor"]


def stale_custom(a, line, found):
    """Nodes behind a custom source whose numbers differ from the host's node of the same name in /dev."""
    out = []
    source, ct_path = line.mount.norm_source, ct_config_path(line)
    for node in found:
        if node["type"] != "c":
            continue
        rel = node["path"][len(source):] if node["path"] != source else ""
        host = a.char_nodes.get(ct_path + rel)
        if host is not None and is_nvidia_path(host["path"]) and (host["major"], host["minor"]) != (
                node["major"], node["minor"]):
            out.append({"line_no": line.line_no, "source": node["path"], "ct_path": ct_path + rel,
                        "major": node["major"], "minor": node["minor"],
                        "host_major": host["major"], "host_minor": host["minor"]})
    return out


def hook_analysis(ct, texts):
    """``(nodes the hooks make, [(line, script, why)] unreadable, NVIDIA hook lines)`` (lxcgpu_sources.hook_nodes)."""
    made, unknown, lines = [], [], []
    for line, path in hook_lines(ct):
        text = texts.get(path) if path else None
        mentions = "nvidia" in (line.value or "").lower()
        if isinstance(text, str):
            nodes = hook_nodes(text)
            for node in nodes:
                node.update(script=path, hook_line=line.line_no)
            made.extend(nodes)
            if nodes or mentions or "nvidia" in text.lower():
                lines.append(line)
        else:
            if mentions:
                lines.append(line)
            if texts and path:
                unknown.append((line, path, text["error"] if isinstance(text, dict) else "not read"))
    return made, unknown, lines


# ---------------------------------------------------------------------------
# What the audit says about them (on concerns/lxcgpu's analysis)
# ---------------------------------------------------------------------------
def source_messages(a):
    """``[(status, message)]`` for custom sources, ignored mount entries and hooks of one analysed CT."""
    out = []
    for node in a.stale_nodes:
        out.append(("fail", "line {line_no}: {source} (the CT's {ct_path}) is c {major}:{minor} but the host's "
                            "{ct_path} is c {host_major}:{host_minor}, so the CT gets a node no driver answers: "
                            "recreate it (mknod -m 666 {source} c {host_major} {host_minor}) or bind {ct_path} "
                            "instead".format(**node)))
    for node in a.stale_hook_nodes:
        out.append(("fail", "line {hook_line}: hook {script} (its line {line_no}) makes {ct_path} with major {major}, "
                            "but the host's {ct_path} is c {host_major}:{host_minor}: make the script read the major "
                            "from /proc/devices".format(**node)))
    for line in a.unknown_mounts:
        out.append(("warn", "line %d: cannot tell what %s is (the snapshot's listing does not describe it)"
                    % (line.line_no, line.mount.norm_source)))
    for line in a.ignored_mounts:
        target = line.mount.target
        out.append(("warn", "line %d: LXC skips this mount entry, so the CT does not get %s: its target %s is "
                            "absolute and outside the CT's rootfs ('Ignoring mount point'); write %s"
                    % (line.line_no, line.mount.norm_source, target, target.lstrip("/"))))
    if a.uses_nvidia:
        for line, path, why in a.hook_unknown:
            out.append(("warn", "line %d: cannot tell which device nodes hook %s makes (%s)"
                        % (line.line_no, path, why)))
    return out


def _salvage(line):
    """The rule LXC would accept that the author most likely meant (``c 195:* rw # x`` -> ``c 195:* rw``), or None."""
    match = re.match(r"^[ \t]*([abc])[ \t]+(\*|[0-9]+)[ \t]*:[ \t]*(\*|[0-9]+)[ \t]+([rwm]{1,3})(?![rwm])", line.value)
    return "%s %s:%s %s" % match.groups() if match else None


def rule_messages(a):
    """``[(status, message)]`` for device rules LXC cannot parse, said as LXC treats them.

    cgroup2 keys (and v1 keys on a cgroup v1 host): the CT does not start ("Failed to parse device rule",
    cgfsng.c bpf_device_cgroup_prepare / the kernel's devices.allow).  v1 keys on a cgroup2 host: LXC 6 ignores
    them unread, LXC 7 refuses the key.
    """
    out = []
    v2_host = a.families == ["v2"]
    for line in a.bad_rule_lines:
        family = DEVICE_KEYS[line.key][0]
        hint = _salvage(line)
        hint = "; write %r" % hint if hint else ""
        if family == "v1" and v2_host:
            out.append(("warn", "line %d: %s (LXC ignores lxc.cgroup.* keys on a cgroup v2 host)%s"
                        % (line.line_no, line.problem, hint)))
        else:
            out.append(("fail", "line %d: LXC cannot parse this device rule, so the CT does not start: %s%s"
                        % (line.line_no, line.problem, hint)))
    return out


def ct_nodes(ct):
    """``[(path in the CT, host source)]`` of the NVIDIA nodes the CT gets from mount entries and devN."""
    out = []
    for line in ct.main_lines():
        if line.mount is not None and nvidia_mount(line.mount) and not ignored_target(line.mount):
            out.append((ct_path_of(line.mount) or line.mount.norm_source, line.mount.norm_source))
        elif line.dev is not None and line.dev.get("path"):
            path = posixpath.normpath(line.dev["path"])
            out.append((path, path))
    return out


def gpu_nodes_of(ct, host_nodes=None):
    """/dev/nvidiaN paths the CT gets (mount entries by their target, and devN), in file order.

    With ``host_nodes`` only those whose /dev source exists on the host (a missing optional mount is simply absent
    in the CT; a missing devN node stops its start); nodes bound from other directories are not filtered.
    """
    present = None if host_nodes is None else {n["path"] for n in host_nodes if n.get("type") == "c"}
    paths = []
    for path, source in ct_nodes(ct):
        if not re.match(r"^/dev/nvidia[0-9]+$", path) or path in paths:
            continue
        if present is not None and source.startswith("/dev/") and source not in present:
            continue
        paths.append(path)
    return paths


def uses_node(ct, path):
    """Whether the CT gets ``path`` (a mount entry whose target or /dev source it is, or a devN entry)."""
    return any(path in (ct_path, source) for ct_path, source in ct_nodes(ct))
