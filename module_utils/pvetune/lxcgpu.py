# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA device passthrough to LXC containers: audit and in-place repair.

The nvidia-uvm (and nvidia-caps, nvidia-nvlink, ...) character-device majors
are assigned dynamically by the kernel and can change across reboots and driver
updates.  A CT config whose ``lxc.cgroup2.devices.allow`` lines name an old
major still starts, but CUDA fails inside it.  This module

* reads the host's majors (/proc/devices) and device nodes (/dev/nvidia*,
  stat() on a live root, ``.pvetune/dev_nvidia.ls`` in a snapshot tree);
* parses Proxmox CT configs (/etc/pve/lxc/<id>.conf) keeping every byte;
* decides which allow lines are NVIDIA's and stale (docs/DESIGN.md, "CT configs
  and the cluster filesystem") and whether every NVIDIA node the CT mounts is
  covered;
* rewrites only the NVIDIA lines of the running (main) section, in place, and
  refuses (no change, with a reason) whenever it cannot be certain.

Ownership of an allow line (type ``c``, numeric major), first rule that applies:
  1. major 195 (the fixed NVIDIA major): NVIDIA's, and never stale;
  2. a current NVIDIA major (``host_majors`` / the majors of /dev/nvidia* nodes);
  3. a major registered to another driver (``char_majors_registered``): not
     NVIDIA's, left alone (warned about when it was recorded as NVIDIA's);
  4. a major recorded as NVIDIA's by an earlier run (``known_nvidia_majors``);
  5. a major registered to no driver at all while the CT mounts NVIDIA nodes,
     provided it lies in the kernel's dynamic char-major ranges (234-254,
     384-511) and the registered set is known (non-empty).
An NVIDIA-owned line is *stale* when its major is not 195 and not the current
major of any NVIDIA node the CT uses (lxc.mount.entry sources and devN:
entries).  Everything else (Coral, /dev/dri, nvram, ...) is never touched.

Pure functions, stdlib only; nothing here runs a command.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import posixpath
import re
import stat

from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot

NVIDIA_MAJOR = 195
FRONTEND_NAMES = ("nvidia-frontend", "nvidia")  # "nvidia" since driver 550.40
DYNAMIC_CHAR_MAJORS = tuple(range(234, 255)) + tuple(range(384, 512))

KEY_ALLOW_V2 = "lxc.cgroup2.devices.allow"
KEY_DENY_V2 = "lxc.cgroup2.devices.deny"
KEY_ALLOW_V1 = "lxc.cgroup.devices.allow"
KEY_DENY_V1 = "lxc.cgroup.devices.deny"
KEY_MOUNT = "lxc.mount.entry"
KEY_INCLUDE = "lxc.include"
DEVICE_KEYS = {
    KEY_ALLOW_V2: ("v2", "allow"),
    KEY_DENY_V2: ("v2", "deny"),
    KEY_ALLOW_V1: ("v1", "allow"),
    KEY_DENY_V1: ("v1", "deny"),
}
FAMILY_ALLOW_KEY = {"v2": KEY_ALLOW_V2, "v1": KEY_ALLOW_V1}
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
NEW_MOUNT_OPTIONS = "bind,optional,create=file"
DEV_LS_FALLBACK = "/.pvetune/dev_nvidia.ls"

SOURCE_STAT = "stat"
SOURCE_LS = "ls"
SOURCE_NONE = "none"

_GPU_NODE = re.compile(r"^/dev/nvidia[0-9]+$")
_DEV_KEY = re.compile(r"^dev[0-9]+$")


# ---------------------------------------------------------------------------
# /proc/devices
# ---------------------------------------------------------------------------
_PROC_DEV_LINE = re.compile(r"^\s*([0-9]+)\s+(\S.*?)\s*$")


def _text(data):
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""


def parse_proc_devices(text):
    """``/proc/devices`` -> ``{"char": {major: [names]}, "block": {...}}``.

    Lines before any "Character devices:"/"Block devices:" header count as char
    devices (a ``grep nvidia /proc/devices`` output); ``#`` lines are ignored.
    """
    result = {"char": {}, "block": {}}
    section = "char"
    for line in _text(text).splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        lower = stripped.lower()
        if lower.startswith("character devices"):
            section = "char"
            continue
        if lower.startswith("block devices"):
            section = "block"
            continue
        match = _PROC_DEV_LINE.match(stripped)
        if match:
            result[section].setdefault(int(match.group(1)), []).append(match.group(2))
    return result


def _char_table(devices):
    if isinstance(devices, dict) and "char" in devices and isinstance(devices["char"], dict):
        return devices["char"]
    return devices or {}


def nvidia_majors(devices):
    """``{name: major}`` for every char driver whose name starts with "nvidia".

    Names are exact: ``nvidia-caps`` and ``nvidia-caps-imex-channels`` are two
    drivers with two majors.  Accepts parse_proc_devices() output or its "char".
    """
    out = {}
    table = _char_table(devices)
    for major in sorted(table):
        for name in table[major]:
            if name.startswith("nvidia") and name not in out:
                out[name] = int(major)
    return out


# ---------------------------------------------------------------------------
# /dev listings and device nodes
# ---------------------------------------------------------------------------
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
    for raw in _text(text).splitlines():
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
        if not name.startswith("nvidia"):
            continue
        node = _stat_node(fsroot, "/dev/" + name)
        if node is None:
            continue
        nodes.append(node)
        if node["type"] == "d":
            try:
                sub_names = fsroot.listdir(node["path"])
            except FsError:
                sub_names = []
            for sub in sub_names:
                sub_node = _stat_node(fsroot, node["path"] + "/" + sub)
                if sub_node is not None and sub_node["type"] in ("c", "b"):
                    nodes.append(sub_node)
    if any(n["type"] == "c" for n in nodes) or _dev_has_char_devices(fsroot):
        return sorted(nodes, key=lambda n: n["path"]), SOURCE_STAT
    if fsroot.isfile(DEV_LS_FALLBACK):
        try:
            listing = fsroot.read_text(DEV_LS_FALLBACK)
        except FsError:
            return [], SOURCE_NONE
        return parse_ls_dev(listing), SOURCE_LS
    return [], SOURCE_NONE


# ---------------------------------------------------------------------------
# CT config model
# ---------------------------------------------------------------------------
_SECTION = re.compile(r"^\[([^\[\]]+)\][ \t]*$")
_COMMENT = re.compile(r"^[ \t]*#")
_BLANK = re.compile(r"^[ \t]*$")
_KV = re.compile(r"^([ \t]*)([A-Za-z][A-Za-z0-9_.\-]*)([ \t]*(?::|=)[ \t]*)(.*?)([ \t]*)$", re.DOTALL)
_RULE = re.compile(r"^([abc])(?:[ \t]+(\*|[0-9]+):(\*|[0-9]+)(?:[ \t]+([A-Za-z]+))?)?$")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class DeviceRule:
    """One devices.allow/deny value: ``c 195:* rwm``, ``c 510:1 rw``, ``a``."""

    def __init__(self, kind, family, dtype, major, minor, access, major_span):
        self.kind = kind            # "allow" | "deny"
        self.family = family        # "v2" | "v1"
        self.type = dtype           # "a" | "b" | "c"
        self.major = major          # int, or None for "*"
        self.minor = minor          # int, or None for "*"
        self.access = access        # as written ("" when omitted: rwm)
        self.major_span = major_span  # (start, end) of the major in the value

    @property
    def all(self):
        return self.type == "a"

    @property
    def effective_access(self):
        return set(self.access or "rwm")

    def matches(self, major, minor, dtype="c"):
        if self.all:
            return True
        if self.type != dtype:
            return False
        return self.major in (None, major) and self.minor in (None, minor)

    def grants_rw(self, major, minor):
        return self.kind == "allow" and self.matches(major, minor) and {"r", "w"} <= self.effective_access

    def identity(self):
        return (self.family, self.kind, self.type, self.major, self.minor, "".join(sorted(self.effective_access)))


def parse_device_rule(value, kind="allow", family="v2"):
    """``(DeviceRule, None)`` or ``(None, problem)`` for a devices.allow/deny value."""
    match = _RULE.match(value.strip())
    if not match:
        return None, f"unrecognised device rule {value!r}"
    dtype, major, minor, access = match.groups()
    if dtype != "a" and major is None:
        return None, f"device rule {value!r} lacks major:minor"
    access = access or ""
    if access and (set(access) - set("rwm") or len(set(access)) != len(access)):
        return None, f"bad access {access!r} in device rule {value!r}"
    offset = len(value) - len(value.lstrip())
    span = None
    if major is not None:
        start = offset + match.start(2)
        span = (start, start + len(major))
    return DeviceRule(kind, family, dtype, None if major in (None, "*") else int(major),
                      None if minor in (None, "*") else int(minor), access, span), None


class MountEntry:
    """An ``lxc.mount.entry`` value (fstab format)."""

    def __init__(self, value):
        self.value = value
        self.fields = value.split()
        self.source = self.fields[0].replace("\\040", " ") if self.fields else ""
        self.target = self.fields[1] if len(self.fields) > 1 else ""
        self.fstype = self.fields[2] if len(self.fields) > 2 else ""
        self.options = self.fields[3].split(",") if len(self.fields) > 3 else []

    @property
    def optional(self):
        return "optional" in self.options

    @property
    def norm_source(self):
        return posixpath.normpath(self.source) if self.source.startswith("/") else self.source


def _is_nvidia_path(path):
    return bool(path) and isinstance(path, str) and posixpath.normpath(path).startswith("/dev/nvidia")


def _nvidia_relevant(line):
    """Whether a line could matter for NVIDIA passthrough (used to refuse on unreadable bytes)."""
    display = line.display.lower()
    if line.kind == "kv":
        if line.key in DEVICE_KEYS or line.key == KEY_INCLUDE or line.key.startswith("lxc.hook."):
            return True
        if line.key == KEY_MOUNT or _DEV_KEY.match(line.key):
            return "nvidia" in display
        return False
    if line.kind == "garbage":
        return any(word in display for word in ("nvidia", "cgroup", "devices.", "lxc.mount", "lxc.include"))
    return False


def _parse_dev_entry(value):
    parts = value.split(",")
    path = None
    options = {}
    for index, part in enumerate(parts):
        part = part.strip()
        if "=" in part:
            key, val = part.split("=", 1)
            options[key.strip()] = val.strip()
            if key.strip() == "path":
                path = val.strip()
        elif index == 0:
            path = part
    return {"path": path, "options": options}


class CtLine:
    """One line of a CT config, with its exact bytes."""

    def __init__(self, line_no, body, eol, section):
        self.line_no = line_no
        self.body = body            # bytes without the line ending
        self.eol = eol              # b"\n", b"\r\n", b"\r" or b"" (last line)
        self.section = section      # None = main section, else "snap1", "pve:pending"
        self.decodable = True
        self.kind = "garbage"       # blank|comment|section|kv|garbage
        self.key = None
        self.value = None
        self.prefix = b""           # indentation + key + separator, as bytes
        self.suffix = b""           # trailing blanks, as bytes
        self.separator = None       # ":" or "="
        self.sep = ""               # the separator as written (": ", " = ", ...)
        self.rule = None
        self.mount = None
        self.dev = None
        self.problem = None
        try:
            self.text = body.decode("utf-8")
        except UnicodeDecodeError:
            self.text = body.decode("utf-8", "surrogateescape")
            self.decodable = False

    @property
    def raw(self):
        return self.body + self.eol

    @property
    def display(self):
        """The line as text for messages/diffs (undecodable bytes replaced)."""
        return self.body.decode("utf-8", "replace")

    @property
    def clean(self):
        """Decodable and free of control characters."""
        return self.decodable and not _CONTROL.search(self.text)

    def with_value(self, value):
        """Body bytes with the value replaced, keeping key, separator and spacing."""
        return self.prefix + value.encode("utf-8", "surrogateescape") + self.suffix


class CtConfig:
    """A parsed CT config; ``to_bytes()`` gives back the input exactly."""

    def __init__(self, path, lines, warnings, eol):
        self.path = path
        self.lines = lines
        self.warnings = warnings
        self.eol = eol

    @property
    def ctid(self):
        if not self.path:
            return None
        base, ext = posixpath.splitext(posixpath.basename(self.path))
        return base if ext == ".conf" else base + ext

    @property
    def sections(self):
        """Section names in file order (main section excluded)."""
        return [line.section for line in self.lines if line.kind == "section"]

    @property
    def ends_with_newline(self):
        return not self.lines or self.lines[-1].eol in (b"\n", b"\r\n")

    def main_lines(self):
        return [line for line in self.lines if line.section is None]

    def section_lines(self, name):
        return [line for line in self.lines if line.section == name]

    def get_all(self, key, section=None):
        return [line.value for line in self.lines if line.section == section and line.key == key]

    def to_bytes(self):
        return b"".join(line.raw for line in self.lines)


def _split_lines(data):
    chunks = data.split(b"\n")
    out = []
    for index, chunk in enumerate(chunks):
        last = index == len(chunks) - 1
        if last:
            if chunk == b"":
                break
            if chunk.endswith(b"\r"):
                out.append((chunk[:-1], b"\r"))
            else:
                out.append((chunk, b""))
        elif chunk.endswith(b"\r"):
            out.append((chunk[:-1], b"\r\n"))
        else:
            out.append((chunk, b"\n"))
    return out


def parse_ct_config(data, path=None):
    """Parse a Proxmox CT config (bytes or str) into a CtConfig; never loses a byte.

    Raises TypeError only when ``data`` is neither bytes nor str.  Per-line
    problems (undecodable bytes, unparseable lines or device rules, duplicate
    Proxmox keys) are recorded in ``warnings`` as ``{"line_no", "section",
    "message"}`` and on the line itself (``problem``).
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    elif isinstance(data, (bytes, bytearray)):
        data = bytes(data)
    else:
        raise TypeError(f"CT config must be bytes or str, not {type(data).__name__}")
    crlf = data.count(b"\r\n")
    lf = data.count(b"\n") - crlf
    eol = b"\r\n" if crlf > lf else b"\n"
    lines = []
    warnings = []
    section = None
    seen_keys = {}

    def warn(line, message):
        line.problem = message if line.problem is None else line.problem + "; " + message
        warnings.append({"line_no": line.line_no, "section": line.section, "message": message})

    for number, (body, ending) in enumerate(_split_lines(data), 1):
        line = CtLine(number, body, ending, section)
        lines.append(line)
        text = line.text
        if not line.decodable:
            warn(line, "line is not valid UTF-8")
        section_match = _SECTION.match(text)
        if _BLANK.match(text):
            line.kind = "blank"
        elif _COMMENT.match(text):
            line.kind = "comment"
        elif section_match:
            section = section_match.group(1)
            line.kind = "section"
            line.section = section
        else:
            kv = _KV.match(text)
            if not kv:
                warn(line, "unparseable line")
                continue
            lead, key, sep, value, trail = kv.groups()
            line.kind = "kv"
            line.key = key
            line.value = value
            line.separator = "=" if "=" in sep else ":"
            line.sep = sep
            line.prefix = (lead + key + sep).encode("utf-8", "surrogateescape")
            line.suffix = trail.encode("utf-8", "surrogateescape")
            if lead:
                warn(line, f"leading whitespace before key {key}")
            if line.separator == "=" and not key.startswith("lxc."):
                warn(line, "Proxmox accepts 'key = value' only for lxc.* keys")
            if not key.startswith("lxc."):
                previous = seen_keys.get((section, key))
                if previous is not None:
                    warn(line, f"duplicate key {key} (also line {previous}); Proxmox keeps one")
                else:
                    seen_keys[(section, key)] = number
            if key in DEVICE_KEYS:
                family, kind = DEVICE_KEYS[key]
                rule, problem = parse_device_rule(value, kind, family)
                if problem:
                    warn(line, problem)
                line.rule = rule
            elif key == KEY_MOUNT:
                line.mount = MountEntry(value)
                if len(line.mount.fields) < 3:
                    warn(line, "mount entry needs at least source, target and fstype")
            elif _DEV_KEY.match(key):
                line.dev = _parse_dev_entry(value)
    return CtConfig(path, lines, warnings, eol)


# ---------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------
def _normalize_known(known):
    """known_nvidia_majors -> {major: name or None}."""
    out = {}
    if not known:
        return out
    if isinstance(known, dict):
        for key, value in known.items():
            if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
                out[int(key)] = value if isinstance(value, str) else None
            elif isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
                out[int(value)] = key
        return out
    for item in known:
        if isinstance(item, int) or (isinstance(item, str) and item.isdigit()):
            out[int(item)] = None
    return out


def _normalize_registered(registered):
    """char_majors_registered -> {major: [names]} (names may be empty)."""
    if not registered:
        return {}
    table = _char_table(registered) if isinstance(registered, dict) else registered
    if isinstance(table, dict):
        return {int(k): list(v) if isinstance(v, (list, tuple)) else [] for k, v in table.items()}
    return {int(k): [] for k in table}


def _node_label(node):
    return "{} ({}:{})".format(node["path"], node["major"], node["minor"])


class _Analysis:
    pass


def _family_order(families):
    return [f for f in ("v2", "v1") if f in families]


def _covered(rules, major, minor):
    """Whether rules (in order) leave read+write access to c major:minor."""
    state = set()
    for rule in rules:
        if rule.all:
            state = set(rule.effective_access) if rule.kind == "allow" else set()
            continue
        if rule.matches(major, minor):
            if rule.kind == "allow":
                state |= rule.effective_access
            else:
                state -= rule.effective_access
    return {"r", "w"} <= state


def _analyze(ct, host_majors, host_nodes, known_nvidia_majors, char_majors_registered, cgroup_version):
    a = _Analysis()
    a.known = _normalize_known(known_nvidia_majors)
    a.registered = _normalize_registered(char_majors_registered)
    host_majors = dict(host_majors or {})
    a.host_majors = host_majors
    a.nodes_known = host_nodes is not None
    nodes = list(host_nodes.values()) if isinstance(host_nodes, dict) else list(host_nodes or [])
    a.char_nodes = {n["path"]: n for n in nodes if n.get("type") == "c" and n.get("major") is not None}
    a.dirs = {n["path"] for n in nodes if n.get("type") == "d"}
    a.current_nvidia = {int(m) for m in host_majors.values()}
    a.current_nvidia |= {n["major"] for n in a.char_nodes.values() if _is_nvidia_path(n["path"])}
    a.major_names = {}
    for name, major in host_majors.items():
        a.major_names.setdefault(int(major), name)
    for major, names in a.registered.items():
        for name in names:
            if name.startswith("nvidia"):
                a.current_nvidia.add(major)
                a.major_names.setdefault(major, name)

    main = ct.main_lines()
    a.main = main
    a.rule_lines = [line for line in main if line.kind == "kv" and line.key in DEVICE_KEYS]
    a.bad_rule_lines = [line for line in a.rule_lines if line.rule is None]
    a.rules = [line for line in a.rule_lines if line.rule is not None]
    a.allow_all = [line for line in a.rules if line.rule.kind == "allow" and line.rule.all]
    a.nv_mounts = [line for line in main if line.mount is not None and _is_nvidia_path(line.mount.source)]
    a.nv_devs = [line for line in main if line.dev is not None and _is_nvidia_path(line.dev["path"])]
    a.includes = [line for line in main if line.key == KEY_INCLUDE]
    a.hooks = [line for line in main if line.key and line.key.startswith("lxc.hook.")
               and "nvidia" in (line.value or "")]
    a.families_present = {line.rule.family for line in a.rules} | {
        DEVICE_KEYS[line.key][0] for line in a.bad_rule_lines}
    # Lines we cannot read with certainty but which matter for NVIDIA.
    a.unclean = [line for line in main if not line.clean and _nvidia_relevant(line)]
    # Unparseable lines that look like device rules, mounts or includes: Proxmox drops them with a warning,
    # but what the author meant cannot be known, so they block a rewrite like an unparseable rule does.
    a.unparsed = [line for line in main if line.kind == "garbage" and line.clean and _nvidia_relevant(line)]

    # Nodes the CT uses.
    a.mount_used = {}   # path -> node (bound into the CT by lxc.mount.entry)
    a.added_mounts = []  # control nodes regenerate() adds
    a.dev_used = {}     # path -> node (devN:, Proxmox grants these itself)
    a.missing = []
    for line in a.nv_mounts if a.nodes_known else ():
        found = _nodes_for_source(a, line.mount.norm_source)
        if found is None:
            optional = line.mount.optional
            a.missing.append({"line_no": line.line_no, "key": line.key, "source": line.mount.norm_source,
                              "optional": optional, "aborts_start": not optional, "text": line.display})
            continue
        for node in found:
            a.mount_used.setdefault(node["path"], node)
    for line in a.nv_devs if a.nodes_known else ():
        found = _nodes_for_source(a, posixpath.normpath(line.dev["path"]))
        if not found:
            a.missing.append({"line_no": line.line_no, "key": line.key,
                              "source": posixpath.normpath(line.dev["path"]), "optional": False,
                              "aborts_start": True, "text": line.display})
            continue
        for node in found:
            a.dev_used.setdefault(node["path"], node)
    a.mounts_nvidia = bool(a.nv_mounts or a.nv_devs)
    a.usage_known = a.mounts_nvidia and a.nodes_known   # we know which NVIDIA majors the CT needs
    a.used_majors = {n["major"] for n in a.mount_used.values()} | {n["major"] for n in a.dev_used.values()}
    # CUDA control nodes a CT that mounts a GPU needs but does not mount (regenerate() adds them).
    a.implied_controls = []
    if a.nodes_known and any(_GPU_NODE.match(line.mount.norm_source) for line in a.nv_mounts):
        have = {line.mount.norm_source for line in a.nv_mounts} | set(a.dev_used)
        a.implied_controls = [p for p in CONTROL_NODES if p in a.char_nodes and p not in have]
    a.used_majors |= {a.char_nodes[p]["major"] for p in a.implied_controls}
    a.uses_nvidia = bool(a.mounts_nvidia or a.hooks or any(
        line.rule.type == "c" and line.rule.major == NVIDIA_MAJOR for line in a.rules))

    # Ownership and staleness of allow lines.
    a.owned = {}     # id(line) -> reason
    a.stale = []     # [(line, reason)]
    a.foreign = []   # [(line, message)] registered to another driver, recorded as NVIDIA's before
    for line in a.rules:
        rule = line.rule
        if rule.kind != "allow" or rule.type != "c" or rule.major is None:
            continue
        reason = _ownership(a, rule.major)
        if reason is None:
            if (rule.major in a.known and rule.major in a.registered and a.mounts_nvidia
                    and rule.major not in a.current_nvidia):
                names = ", ".join(a.registered[rule.major]) or "another driver"
                recorded = a.known[rule.major] or "earlier run"
                message = (f"major {rule.major} was recorded as NVIDIA's ({recorded}) but is now registered to "
                           f"{names}; the CT is granted that device")
                a.foreign.append((line, message))
            continue
        a.owned[id(line)] = reason
        if rule.major == NVIDIA_MAJOR:
            continue
        if a.usage_known:
            if rule.major not in a.used_majors:
                a.stale.append((line, f"{reason}; no NVIDIA node the CT uses has major {rule.major}{_uses_text(a)}"))
        elif rule.major not in a.current_nvidia:
            a.stale.append((line, f"{reason}; not the major of any current NVIDIA node"))
    a.stale_ids = {id(entry[0]) for entry in a.stale}

    # Which cgroup key families must cover the nodes.
    if cgroup_version in (2, "2", "v2"):
        a.families = ["v2"]
    elif cgroup_version in (1, "1", "v1"):
        a.families = ["v1"]
    else:
        a.families = _family_order(a.families_present) or ["v2"]
    a.uncovered = []
    for family in a.families:
        rules = [line.rule for line in a.rules if line.rule.family == family]
        for path in sorted(a.mount_used, key=lambda p: _mount_order(a, p)):
            node = a.mount_used[path]
            if not _covered(rules, node["major"], node["minor"]):
                a.uncovered.append({"node": path, "major": node["major"], "minor": node["minor"],
                                    "key": FAMILY_ALLOW_KEY[family]})
    a.deny_hits = [line for line in a.rules if line.rule.kind == "deny" and not line.rule.all
                   and line.rule.effective_access & {"r", "w"}
                   and any(line.rule.matches(n["major"], n["minor"]) for n in a.mount_used.values())]
    return a


def _uses_text(a):
    majors = sorted(a.used_majors - {NVIDIA_MAJOR})
    if not majors:
        return ""
    return " (uses {})".format(", ".join(f"{m}={a.major_names.get(m, '?')}" for m in majors))


def _mount_order(a, path):
    """Sort key: the order of the CT's NVIDIA mount entries (then mounts pvetune adds)."""
    sources = [line.mount.norm_source for line in a.nv_mounts] + a.added_mounts
    for index, source in enumerate(sources):
        if path == source or path.startswith(source + "/"):
            return (index, path)
    return (len(sources), path)


def _nodes_for_source(a, source):
    """Host char nodes a source path stands for; None when it does not exist."""
    node = a.char_nodes.get(source)
    if node is not None:
        return [node]
    under = [n for p, n in sorted(a.char_nodes.items()) if p.startswith(source + "/")]
    if under or source in a.dirs:
        return under
    return None


def _ownership(a, major):
    """Why an allow line with this char major is NVIDIA's, or None."""
    if major == NVIDIA_MAJOR:
        return "fixed NVIDIA major 195"
    if major in a.current_nvidia:
        return "current NVIDIA major ({})".format(a.major_names.get(major, "NVIDIA device node"))
    if major in a.registered:
        return None
    if major in a.known:
        return "recorded as NVIDIA's%s by an earlier run" % (
            f" ({a.known[major]})" if a.known[major] else "")
    if a.registered and a.mounts_nvidia and major in DYNAMIC_CHAR_MAJORS:
        return "registered to no driver while the CT mounts NVIDIA nodes (stale dynamic major)"
    return None


# ---------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------
def evaluate_ct(ct, host_majors, host_nodes, known_nvidia_majors=(), char_majors_registered=frozenset(),
                cgroup_version=None):
    """Audit one CT's NVIDIA passthrough against the host's current majors/nodes.

    ``host_majors``: nvidia_majors() output.  ``host_nodes``: parse_ls_dev() /
    stat_dev_nodes() nodes (None = unknown).  ``known_nvidia_majors``: majors
    recorded as NVIDIA's before (iterable, or {major: name}).
    ``char_majors_registered``: every registered char major (iterable, or the
    parse_proc_devices() output / its "char" table); empty = unknown.
    ``cgroup_version``: 2, 1 or None (unknown: every key family present must cover).
    """
    a = _analyze(ct, host_majors, host_nodes, known_nvidia_majors, char_majors_registered, cgroup_version)
    messages = []
    result = {
        "ctid": ct.ctid,
        "uses_nvidia": a.uses_nvidia,
        "status": "pass",
        "stale_lines": [{"line_no": line.line_no, "text": line.display, "major": line.rule.major,
                         "key": line.key, "reason": reason} for line, reason in a.stale],
        "uncovered": a.uncovered,
        "missing_sources": a.missing,
        "dev_entries": [{"line_no": line.line_no, "key": line.key, "path": line.dev["path"],
                         "present": _nodes_for_source(a, posixpath.normpath(line.dev["path"])) is not None}
                        for line in a.nv_devs],
        "missing_control_nodes": list(a.implied_controls),
        "cgroup_keys": {"v2": "v2" in a.families_present, "v1": "v1" in a.families_present},
        "foreign_lines": [{"line_no": line.line_no, "text": line.display, "major": line.rule.major,
                           "message": msg} for line, msg in a.foreign],
        "parse_warnings": [w for w in ct.warnings if w["section"] is None],
        "messages": messages,
    }
    if not a.uses_nvidia:
        result["status"] = "skip"
        messages.append("CT passes no NVIDIA devices")
        return result
    if a.hooks and not a.mounts_nvidia and not a.rules:
        result["status"] = "skip"
        where = ", ".join(f"line {line.line_no}" for line in a.hooks)
        messages.append(f"NVIDIA devices come from an LXC hook ({where}); the hook sets up nodes and cgroup "
                        "rules at start")
        return result
    fail = warn = False
    if not a.nodes_known:
        messages.append("host NVIDIA device nodes unknown; coverage not checked")
        warn = True
    for line, reason in a.stale:
        messages.append(f"line {line.line_no} {line.display!r}: stale NVIDIA allow line: {reason}")
        fail = True
    if a.stale and a.missing:
        messages.append("some NVIDIA nodes the CT mounts are missing on the host, so the majors it needs "
                        "are not fully known; pvetune will not rewrite stale lines until they exist")
    if a.uncovered:
        what = ", ".join("{} {}".format(u["key"], _node_label({"path": u["node"], "major": u["major"],
                                                              "minor": u["minor"]})) for u in a.uncovered)
        if a.includes:
            messages.append(f"not covered by this file (lxc.include may cover them): {what}")
            warn = True
        else:
            messages.append(f"NVIDIA nodes mounted but not allowed (rw): {what}")
            fail = True
    for missing in a.missing:
        if missing["aborts_start"]:
            messages.append(f"line {missing['line_no']}: {missing['source']} does not exist on the host and is "
                            "not optional: the CT will not start")
            fail = True
        else:
            messages.append(f"line {missing['line_no']}: {missing['source']} does not exist on the host "
                            "(optional: the CT starts without it)")
            warn = True
    if a.allow_all:
        messages.append(f"line {a.allow_all[0].line_no}: allow-all device rule {a.allow_all[0].display!r}; "
                        "every device is allowed")
        warn = True
    for line in a.bad_rule_lines + [x for x in a.unclean + a.unparsed if x not in a.bad_rule_lines]:
        messages.append(f"line {line.line_no}: cannot be read with certainty: {line.problem or 'unclean'}")
        warn = True
    for line in a.deny_hits:
        messages.append(f"line {line.line_no} {line.display!r} denies a mounted NVIDIA node")
        warn = True
    for line, msg in a.foreign:
        messages.append(f"line {line.line_no}: {msg}")
        warn = True
    if result["cgroup_keys"]["v1"]:
        if result["cgroup_keys"]["v2"]:
            messages.append("both lxc.cgroup2.* and lxc.cgroup.* device keys present; "
                            "Proxmox VE 7+ (cgroup v2) uses only lxc.cgroup2.*")
        else:
            messages.append("only cgroup v1 device keys (lxc.cgroup.devices.*); Proxmox VE 7+ (cgroup v2) "
                            "ignores them")
            warn = True
    if not a.mounts_nvidia:
        messages.append("allows NVIDIA devices but mounts no NVIDIA nodes (nodes created in the CT or by a hook?)")
    if a.implied_controls:
        messages.append("mounts a GPU but not %s (CUDA needs them)" % ", ".join(a.implied_controls))
        warn = True
    if a.mounts_nvidia and not a.nv_mounts:
        messages.append("NVIDIA devices passed with devN: entries only; Proxmox grants their current "
                        "majors at CT start")
    result["status"] = "fail" if fail else ("warn" if warn else "pass")
    return result


# ---------------------------------------------------------------------------
# Rewriting
# ---------------------------------------------------------------------------
def _mount_value(template, path):
    """A new mount entry value for ``path`` in the style of ``template``."""
    parts = re.split(r"([ \t]+)", template.value.strip())
    fields = parts[0::2]
    seps = parts[1::2]
    target = path if template.target.startswith("/") else path.lstrip("/")
    new_fields = [path, target, "none", NEW_MOUNT_OPTIONS] + fields[4:]
    out = []
    for index, field in enumerate(new_fields):
        if index:
            out.append(seps[index - 1] if index - 1 < len(seps) else " ")
        out.append(field)
    return "".join(out)


def _rule_value(template_line, major, minor, access):
    """A new allow value; reuses the template line's inner spacing when it has one."""
    gap1 = gap2 = " "
    if template_line is not None and template_line.rule is not None:
        match = re.match(r"^[abc]([ \t]+)(?:\*|[0-9]+):(?:\*|[0-9]+)(?:([ \t]+)[A-Za-z]+)?", template_line.value)
        if match:
            gap1 = match.group(1)
            gap2 = match.group(2) or " "
    return "c{}{}:{}{}{}".format(gap1, major, "*" if minor is None else minor, gap2, access)


class _Edit:
    def __init__(self):
        self.replace = {}    # line index -> new body bytes
        self.remove = set()  # line indexes
        self.insert = {}     # line index -> [(body bytes, text)] inserted after that line
        self.changes = []


def _plan(ct, host_majors, host_nodes, known, registered, cgroup_version):
    """Compute the edits; returns (edit, analysis, refusal reasons)."""
    a = _analyze(ct, host_majors, host_nodes, known, registered, cgroup_version)
    edit = _Edit()
    if not a.mounts_nvidia and not a.stale:
        return edit, a, []
    index_of = {id(line): i for i, line in enumerate(ct.lines)}

    # 1. Control nodes CUDA needs, after the last NVIDIA mount entry.
    mount_anchor = a.nv_mounts[-1] if a.nv_mounts else None
    added_mounts = []
    if a.implied_controls:
        for path in a.implied_controls:
            value = _mount_value(mount_anchor.mount, path)
            body = mount_anchor.prefix + value.encode("utf-8")
            added_mounts.append((body, body.decode("utf-8", "replace")))
            a.mount_used.setdefault(path, a.char_nodes[path])
            a.added_mounts.append(path)
        if added_mounts:
            edit.insert.setdefault(index_of[id(mount_anchor)], []).extend(added_mounts)
            for _after, text in added_mounts:
                edit.changes.append({"action": "add", "line_no": None, "after_line": mount_anchor.line_no,
                                     "old": None, "new": text, "reason": "CUDA control node not mounted"})

    # 2. Allow lines, per key family.
    families = list(a.families)
    for family in _family_order({entry[0].rule.family for entry in a.stale}):
        if family not in families:
            families.append(family)
    stale_reason = {id(line): reason for line, reason in a.stale}
    for family in families:
        _plan_family(a, ct, edit, family, index_of, stale_reason, added_mounts, mount_anchor)

    refusals = []
    if edit.replace or edit.remove or edit.insert:
        touches_existing = bool(edit.replace or edit.remove)
        if not a.nodes_known:
            refusals.append("host NVIDIA device nodes unknown")
        if a.allow_all:
            refusals.append(f"line {a.allow_all[0].line_no} allows all devices ({a.allow_all[0].display!r}); "
                            "not rewriting")
        if a.includes:
            refusals.append("lxc.include (line {}) may hold allow lines pvetune cannot see".format(", ".join(
                str(line.line_no) for line in a.includes)))
        if a.bad_rule_lines:
            refusals.append("device rule(s) that cannot be parsed: line {}".format(", ".join(
                str(line.line_no) for line in a.bad_rule_lines)))
        if a.unparsed:
            refusals.append("unparseable line(s) that mention devices, mounts or includes: line {}".format(
                ", ".join(str(line.line_no) for line in a.unparsed)))
        if a.unclean:
            refusals.append("NVIDIA-related line(s) with undecodable bytes or control characters: "
                            "line {}".format(", ".join(str(line.line_no) for line in a.unclean)))
        if a.deny_hits:
            refusals.append("deny rule(s) for mounted NVIDIA nodes: line {}".format(", ".join(
                str(line.line_no) for line in a.deny_hits)))
        if touches_existing and a.missing:
            refusals.append("NVIDIA node(s) {} mounted by the CT do not exist on the host, so the majors it needs "
                            "are not known".format(", ".join(m["source"] for m in a.missing)))
        if touches_existing and not a.host_majors:
            refusals.append("no NVIDIA driver is registered in /proc/devices (driver not loaded?), so the current "
                            "majors are not known")
        if touches_existing and a.nodes_known and not a.mounts_nvidia:
            refusals.append("the CT mounts no NVIDIA nodes, so the majors it needs are not known")
    return edit, a, refusals


def _plan_family(a, ct, edit, family, index_of, stale_reason, added_mounts, mount_anchor):
    lines = [line for line in a.rules if line.rule.family == family]
    stale = [line for line in lines if id(line) in stale_reason]
    kept_rules = [line.rule for line in lines if id(line) not in stale_reason]
    needed = []
    for path in sorted(a.mount_used, key=lambda p: _mount_order(a, p)):
        node = a.mount_used[path]
        if not _covered(kept_rules, node["major"], node["minor"]):
            needed.append(node)
    needed_by_major = {}
    major_order = []
    for node in needed:
        if node["major"] not in needed_by_major:
            major_order.append(node["major"])
        needed_by_major.setdefault(node["major"], []).append(node["minor"])

    # Map stale majors to current majors: recorded names first, then file order.
    old_order = []
    for line in stale:
        if line.rule.major not in old_order:
            old_order.append(line.rule.major)
    targets = [m for m in major_order if m != NVIDIA_MAJOR]
    mapping = {}
    for old in old_order:
        name = a.known.get(old)
        current = a.host_majors.get(name) if name else None
        if current in targets and current not in mapping.values():
            mapping[old] = current
    free = [m for m in targets if m not in mapping.values()]
    for old in old_order:
        if old not in mapping and free:
            mapping[old] = free.pop(0)

    # Replace in place (same key, separator, spacing, granularity, access) or remove.
    created = set()
    new_rules = []   # rules in file order after the edit, for the coverage check
    for line in lines:
        if id(line) not in stale_reason:
            new_rules.append(line.rule)
            continue
        i = index_of[id(line)]
        rule = line.rule
        new_major = mapping.get(rule.major)
        keep_minor = rule.minor is None or (new_major is not None and rule.minor in needed_by_major.get(new_major, []))
        if new_major is None or not keep_minor:
            edit.remove.add(i)
            edit.changes.append({"action": "remove", "line_no": line.line_no, "old": line.display, "new": None,
                                 "reason": stale_reason[id(line)]})
            continue
        start, end = rule.major_span
        value = line.value[:start] + str(new_major) + line.value[end:]
        new_rule = parse_device_rule(value, rule.kind, rule.family)[0]
        if new_rule.identity() in created:
            edit.remove.add(i)
            edit.changes.append({"action": "remove", "line_no": line.line_no, "old": line.display, "new": None,
                                 "reason": "duplicate of a line pvetune rewrote"})
            continue
        created.add(new_rule.identity())
        new_rules.append(new_rule)
        body = line.with_value(value)
        edit.replace[i] = body
        edit.changes.append({"action": "replace", "line_no": line.line_no, "old": line.display,
                             "new": body.decode("utf-8", "replace"),
                             "reason": f"{stale_reason[id(line)]}; current major {new_major} "
                                       f"({a.major_names.get(new_major, '?')})"})

    # Whatever is still not covered is added after the last NVIDIA allow line.
    remaining = [n for n in needed if not _covered(new_rules, n["major"], n["minor"])]
    if not remaining:
        return
    owned = [line for line in lines if id(line) in a.owned]
    kept = [line for line in owned if index_of[id(line)] not in edit.remove]
    if kept:
        anchor = template = kept[-1]
    elif owned:
        # Only removed stale lines: the new lines take the first one's place and style.
        anchor = template = owned[0]
    else:
        others = [line for line in a.rules if id(line) in a.owned and index_of[id(line)] not in edit.remove]
        anchor = others[-1] if others else None
        template = None
    wildcard = any(line.rule.minor is None for line in owned if line.rule.major != NVIDIA_MAJOR)
    per_minor = any(line.rule.minor is not None for line in owned)
    access = "rwm"
    if template is not None and {"r", "w"} <= template.rule.effective_access:
        access = template.rule.access or "rwm"
    new_values = []   # [(value, reason)]
    seen = {}
    for node in remaining:
        if node["major"] == NVIDIA_MAJOR or (per_minor and not wildcard):
            spec = (node["major"], node["minor"])
        else:
            spec = (node["major"], None)
        if spec in seen:
            seen[spec].append(node)
            continue
        seen[spec] = [node]
        new_values.append((_rule_value(template, spec[0], spec[1], access), seen[spec]))
    if anchor is not None:
        at = index_of[id(anchor)]
        after_line = anchor.line_no
        style = anchor
    else:
        # No allow line at all: after the last NVIDIA mount entry (and any mounts added there).
        at = index_of[id(mount_anchor)]
        after_line = mount_anchor.line_no
        style = mount_anchor
    key = FAMILY_ALLOW_KEY[family]
    lead = style.prefix[:len(style.prefix) - len(style.prefix.lstrip(b" \t"))]
    prefix = lead + key.encode("ascii") + (style.sep or ": ").encode("ascii")
    bucket = edit.insert.setdefault(at, [])
    for value, covered_nodes in new_values:
        body = prefix + value.encode("utf-8")
        bucket.append((body, body.decode("utf-8", "replace")))
        edit.changes.append({"action": "add", "line_no": None, "after_line": after_line, "old": None,
                             "new": body.decode("utf-8", "replace"),
                             "reason": "cover {}".format(", ".join(_node_label(n) for n in covered_nodes))})


def _apply(ct, edit):
    out = []   # [body, eol]
    for i, line in enumerate(ct.lines):
        if i not in edit.remove:
            out.append([edit.replace.get(i, line.body), line.eol])
        for body, _origin in edit.insert.get(i, []):
            out.append([body, line.eol if line.eol not in (b"", b"\r") else ct.eol])
    for item in out[:-1]:
        if item[1] in (b"", b"\r"):
            item[1] = ct.eol
    if out and not ct.ends_with_newline:
        out[-1][1] = ct.lines[-1].eol
    return b"".join(body + eol for body, eol in out)


def regenerate(ct, host_majors, host_nodes, known_nvidia_majors=(), char_majors_registered=frozenset(),
               cgroup_version=None, _check=True):
    """Rewrite the CT's NVIDIA allow lines/mounts for the current majors.

    Returns ``(new_bytes, changes)``.  ``changes`` lists
    ``{"action": "replace"|"add"|"remove", "line_no", "after_line", "old", "new", "reason"}``;
    when pvetune cannot be certain it returns the original bytes and a single
    ``{"action": "refused", "reason": ...}``.  Arguments as for evaluate_ct().

    Main section only: stale NVIDIA allow lines are replaced in place (same key,
    separator, spacing, access and granularity; per-minor lines only for minors
    the CT mounts), stale lines with no counterpart are removed, coverage still
    missing is added after the last NVIDIA allow line (else after the last NVIDIA
    mount entry), and a CT that mounts /dev/nvidiaN gets the missing
    nvidiactl/nvidia-uvm/nvidia-uvm-tools mounts.  Refused (no change) when a
    change is needed but: host nodes are unknown, an allow-all ``a`` rule or an
    ``lxc.include`` is present, a device rule cannot be parsed, an NVIDIA-related
    line has undecodable bytes, a deny rule takes rw from a mounted NVIDIA node,
    an NVIDIA node the CT mounts is missing on the host (for replacements and
    removals), or the result would not be a fixed point.  Idempotent.
    """
    original = ct.to_bytes()
    edit, _unused, refusals = _plan(ct, host_majors, host_nodes, known_nvidia_majors, char_majors_registered,
                                    cgroup_version)
    if not edit.changes:
        return original, []
    if refusals:
        return original, [{"action": "refused", "line_no": None, "after_line": None, "old": None, "new": None,
                           "reason": "; ".join(refusals)}]
    new = _apply(ct, edit)
    for change in edit.changes:
        change.setdefault("after_line", None)
    if _check:
        again, more = regenerate(parse_ct_config(new, ct.path), host_majors, host_nodes, known_nvidia_majors,
                                 char_majors_registered, cgroup_version, _check=False)
        if more or again != new:
            return original, [{"action": "refused", "line_no": None, "after_line": None, "old": None, "new": None,
                               "reason": "rewrite would not converge ({})".format("; ".join(
                                   c.get("reason") or "" for c in more))}]
    return new, edit.changes


def diff_lines(changes):
    """Human-readable ``-old``/``+new`` lines for a changes list."""
    out = []
    for change in changes:
        if change["action"] == "refused":
            out.append("! {}".format(change["reason"]))
            continue
        where = change["line_no"] if change["line_no"] is not None else "after {}".format(change.get("after_line"))
        if change["old"] is not None:
            out.append("-{}: {}".format(where, change["old"]))
        if change["new"] is not None:
            out.append("+{}: {}".format(where, change["new"]))
    return out
