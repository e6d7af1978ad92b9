# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small /proc formats: /proc/meminfo, /proc/mounts (and /proc/<pid>/mounts), /proc/<pid>/limits.  No policy.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_MEMINFO = re.compile(r"\A([A-Za-z0-9_()]+):\s+([0-9]{1,20})(?:\s+kB)?\Z")
_OCTAL = re.compile(r"\\([0-7]{3})")
_LIMIT = re.compile(r"\AMax locked memory\s+(\S+)\s+(\S+)\s+(\S+)")


def parse_meminfo(text):
    """``{key: int}`` (kB for sizes, a count for HugePages_*); ValueError naming the line for a malformed one (the
    reader adds the file)."""
    out = {}
    for no, line in enumerate((text or "").splitlines(), 1):
        if not line.strip():
            continue
        match = _MEMINFO.match(line.strip())
        if not match:
            raise ValueError("line %d: not a '<key>: <number> [kB]' line: %r" % (no, line[:60]))
        out[match.group(1)] = int(match.group(2))
    return out


def _unescape(field):
    # The kernel writes space, tab, newline and backslash in mount fields as \040, \011, \012, \134.
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mounts(text, path="/proc/mounts"):
    """``[{"source", "target", "fstype", "options" [str]}]`` in mount order; ValueError naming the line for one of
    fewer than four fields."""
    out = []
    for no, line in enumerate((text or "").splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) < 4:
            raise ValueError("%s:%d: not a mount line: %r" % (path, no, line[:60]))
        out.append({"source": _unescape(fields[0]), "target": _unescape(fields[1]), "fstype": fields[2],
                    "options": fields[3].split(",")})
    return out


def mount_of(target, mounts):
    """The mount a path lives on: the last mounted of those whose target is the path or one of its parents."""
    best = None
    target = "/" + target.strip("/")
    for mount in mounts:
        top = mount["target"].rstrip("/") or "/"
        if target == top or target.startswith(top + "/") or top == "/":
            if best is None or len(top) >= len(best["target"].rstrip("/") or "/"):
                best = mount
    return best


def mount_option(mount, name):
    """The value of ``name=value`` among a mount's options, else None."""
    for opt in mount["options"]:
        key, sep, value = opt.partition("=")
        if sep and key == name:
            return value
    return None


def parse_memlock(text, path="limits"):
    """``(soft, hard)`` of the "Max locked memory" row of /proc/<pid>/limits: bytes, or None for unlimited;
    ValueError naming the file when there is no such row or a value is not a number."""
    for line in (text or "").splitlines():
        match = _LIMIT.match(line)
        if match:
            values = []
            for raw in match.group(1, 2):
                if raw == "unlimited":
                    values.append(None)
                elif raw.isdigit():
                    values.append(int(raw))
                else:
                    raise ValueError("%s: Max locked memory %r is not a number or unlimited" % (path, raw))
            return tuple(values)
    raise ValueError("%s: no 'Max locked memory' row" % path)
