# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proxmox CT configs (/etc/pve/lxc/<vmid>.conf): a byte-exact line model, and which file names are CT configs.

``parse_ct_config`` keeps every byte (comments, blank lines, CRLF, snapshot sections such as ``[pve:pending]``,
unknown keys) so that ``CtConfig.to_bytes()`` gives the input back and an edit touches only the lines it means to.
Device rules (``lxc.cgroup2.devices.allow`` / ``lxc.cgroup.devices.allow`` values), mount entries and ``devN:``
entries are parsed on their lines.  ``ct_config_name`` is the one rule for which file names are CT configs, the rule
pmxcfs applies when it builds the VM list pct reads.  No policy here: what is NVIDIA's is decided by concerns/lxcgpu.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath
import re

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
DEV_KEY = re.compile(r"^dev[0-9]+$")
# A vmid is 100-999999999 (pve-common's pve-vmid format), written without a leading zero.
CTID = re.compile(r"\A[1-9][0-9]{2,8}\Z")
CT_CONF = re.compile(r"\A([1-9][0-9]{2,8})\.conf\Z")
_SECTION = re.compile(r"^\[([^\[\]]+)\][ \t]*$")
_COMMENT = re.compile(r"^[ \t]*#")
_BLANK = re.compile(r"^[ \t]*$")
_KV = re.compile(r"^([ \t]*)([A-Za-z][A-Za-z0-9_.\-]*)([ \t]*(?::|=)[ \t]*)(.*?)([ \t]*)$", re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class DeviceRule:
    """One devices.allow/deny value as LXC reads it: ``c 195:* rwm``, ``c 510:1 rw # note``, ``a``, ``/dev/x rw``."""

    def __init__(self, kind, family, dtype, major, minor, access, major_span, path=None, ignored=""):
        self.kind = kind            # "allow" | "deny"
        self.family = family        # "v2" | "v1"
        self.type = dtype           # "a" | "b" | "c" ("c" for a path rule until its node is known)
        self.major = major          # int, or None for "*" (and for a path rule)
        self.minor = minor          # int, or None for "*"
        self.access = access        # the access characters LXC reads ("" for the bare "a")
        self.major_span = major_span  # (start, end) of the major in the value; None for "a" and path rules
        self.path = path            # the host path of a path rule (resolved by stat at CT start)
        self.ignored = ignored      # text after the access field, which LXC never reads (a trailing comment)

    @property
    def all(self):
        return self.type == "a"

    @property
    def effective_access(self):
        return set(self.access or "rwm")

    def matches(self, major, minor, dtype="c"):
        if self.all:
            return True
        if self.type != dtype or (self.path is not None and self.major is None):
            return False
        return self.major in (None, major) and self.minor in (None, minor)

    def grants_rw(self, major, minor):
        return self.kind == "allow" and self.matches(major, minor) and {"r", "w"} <= self.effective_access

    def identity(self):
        return (self.family, self.kind, self.type, self.major, self.minor, "".join(sorted(self.effective_access)),
                self.path)


_ISSPACE = " \t\v\f\r"   # C isspace() without the newline, which cannot occur inside a value


def _lxc_access(value, pos):
    """LXC's access field (cgfsng.c device_cgroup_parse_access): at most three characters, each r, w or m; the end
    of the value may come first; whatever follows the third is never read.  ``(access, ignored, problem)``."""
    field = value[pos:pos + 3]
    for char in field:
        if char not in "rwm":
            return None, None, ("access field %r: LXC reads up to three characters and each must be r, w or m "
                                "(found %r)" % (value[pos:], char))
    return field, value[pos + 3:], None


def _lxc_number(value, pos):
    """``*`` or decimal digits at ``pos``: ``(None for *, end)`` or ``(int, end)``; ``(False, pos)`` if neither."""
    if value[pos:pos + 1] == "*":
        return None, pos + 1
    end = pos
    while end < len(value) and value[end].isdigit() and value[end].isascii():
        end += 1
    if end == pos:
        return False, pos
    return int(value[pos:end]), end


def pve_bool(value):
    """A Proxmox boolean option value (pve-common parse_boolean: 1/on/yes/true, any case) as True/False."""
    return str(value or "").strip().lower() in ("1", "on", "yes", "true")


def parse_device_rule(value, kind="allow", family="v2"):
    """``(DeviceRule, None)`` or ``(None, problem)`` for a devices.allow/deny value, read as LXC reads it.

    LXC's own parser (lxc src/lxc/cgroups/cgfsng.c device_cgroup_rule_parse; the kernel's v1 devices.allow parser
    reads the same shape): the value is trimmed and one pair of matching quotes is removed (confile.c parse_line);
    exactly ``a`` is the rule that resets the list; otherwise a type ``a``/``b``/``c``, exactly one blank, the major
    (digits or ``*``), ``:``, the minor, exactly one blank and the access field (see _lxc_access).  So
    ``c 195:* rwm # note`` is ``c 195:* rwm`` and ``c 195:* rw # note`` is rejected.  A value starting with ``/`` is
    a path rule (``/dev/nvidia0 rw``; allow only): the node is stat()ed at CT start, so it has no major to go stale.
    """
    text = value.strip(" \t")
    offset = len(value) - len(value.lstrip(" \t"))
    if len(text) > 1 and text[0] in "'\"" and text[-1] == text[0]:
        text, offset = text[1:-1], offset + 1
    if text == "a":
        return DeviceRule(kind, family, "a", None, None, "", None), None
    if text.startswith("/"):
        if kind != "allow":
            return None, "device rule %r: a path rule is read only for devices.allow" % value
        path, _sep, rest = text.partition(" ")
        if not rest:
            return None, "device rule %r: a path rule needs an access field after one space" % value
        field, sep, after = rest.partition(" ")   # the access field ends at the next space (devpath form)
        access, ignored, problem = _lxc_access(field, 0)
        if problem or not access:
            return None, "device rule %r: %s" % (value, problem or "empty access field")
        return DeviceRule(kind, family, "c", None, None, access, None, path=path,
                          ignored=ignored + sep + after), None
    if not text or text[0] not in "abc":
        return None, "device rule %r: the type must be a, b or c" % value
    if len(text) < 2 or text[1] not in _ISSPACE:
        return None, "device rule %r: one blank must follow the type" % value
    major, pos = _lxc_number(text, 2)
    if major is False:
        return None, "device rule %r: the major must follow the type after exactly one blank" % value
    major_span = (offset + 2, offset + pos)
    if text[pos:pos + 1] != ":":
        return None, "device rule %r lacks major:minor" % value
    minor, pos = _lxc_number(text, pos + 1)
    if minor is False:
        return None, "device rule %r: the minor must be digits or *" % value
    if text[pos:pos + 1] == "" or text[pos] not in _ISSPACE:
        return None, "device rule %r: an access field must follow major:minor after exactly one blank" % value
    access, ignored, problem = _lxc_access(text, pos + 1)
    if problem:
        return None, "device rule %r: %s" % (value, problem)
    if not access:
        return None, "device rule %r has an empty access field" % value
    return DeviceRule(kind, family, text[0], major, minor, access, major_span, ignored=ignored), None


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


def family_order(families):
    return [f for f in ("v2", "v1") if f in families]


def is_covered(rules, major, minor):
    """Whether device rules (in order, as LXC applies them) leave read+write access to c major:minor."""
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
            if key.startswith("lxc.") and line.separator == ":" and sep[:1] in (" ", "\t"):
                # parse_pct_config wants ':' right after an lxc.* key (or blanks then '='): it drops this line
                # with a warning, so LXC never sees it.
                line.kind = "garbage"
                warn(line, "pct drops this line: no blank may stand between an lxc.* key and ':'")
                continue
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
            elif DEV_KEY.match(key):
                line.dev = _parse_dev_entry(value)
    return CtConfig(path, lines, warnings, eol)


def main_value(ct, key):
    """The last value of ``key`` in the main section (what pct reads), or None."""
    values = [line.value for line in ct.main_lines() if line.kind == "kv" and line.key == key]
    return values[-1] if values else None


def set_main_value(ct, key, value):
    """The config's bytes with every main-section ``key`` line set to ``value`` (key, separator and spacing kept),
    or, without one, a new ``key: value`` line after the main section's last ``lxc.*`` line (else its last key);
    every other byte stays.  ``value`` must be one clean line (the caller validates it)."""
    if _CONTROL.search(value) or "\n" in value:
        raise ValueError("%s: refusing a value with control characters" % key)
    lines = ct.lines
    hits = [i for i, line in enumerate(lines) if line.section is None and line.kind == "kv" and line.key == key]
    out = [line.raw for line in lines]
    if hits:
        for i in hits:
            out[i] = lines[i].with_value(value) + lines[i].eol
        return b"".join(out)
    main = [i for i, line in enumerate(lines) if line.section is None and line.kind == "kv"]
    lxc = [i for i in main if lines[i].key.startswith("lxc.")]
    at = (lxc or main or [-1])[-1]
    new = ("%s: %s" % (key, value)).encode("utf-8") + ct.eol
    if at >= 0 and not lines[at].eol:      # the anchor is the last line and has no line ending
        out[at] = lines[at].body + ct.eol
    out.insert(at + 1, new)
    return b"".join(out)


def ct_config_name(name):
    """``(ctid, None)`` when ``name`` is a CT config file name, ``(None, why not)`` for another ``*.conf``.

    pmxcfs (pve-cluster src/pmxcfs/memdb.c, name_is_vm_config) puts a file into the VM list only when its name starts
    with 1-9 and is digits then ".conf"; pct and the API read CTs from that list and a vmid is 100-999999999.  So
    ``0101.conf`` or ``99.conf`` in /etc/pve/lxc is no CT: Proxmox never starts it and pvetune neither audits nor
    fixes it, but says so.  Names not ending in ".conf" give ``(None, None)`` (not worth a word).
    """
    match = CT_CONF.match(name)
    if match:
        return int(match.group(1)), None
    if not name.endswith(".conf"):
        return None, None
    stem = name[:-5]
    if stem.isdigit() and stem.startswith("0"):
        why = "leading zero: pmxcfs lists only <vmid>.conf without one, so pct never sees it"
    elif stem.isdigit():
        why = "not a vmid (100-999999999), so pct never sees it"
    else:
        why = "not <vmid>.conf, so pct never sees it"
    return None, "%s: not a CT config (%s)" % (name, why)
