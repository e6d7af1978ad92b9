# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""/proc/devices: the kernel's registered character and block majors.

Parses the listing (``parse_proc_devices``), picks out the NVIDIA drivers' majors (``nvidia_majors``) and tells
whether a text is a /proc/devices listing at all (``listing_problem``: an empty or foreign file, as a /proc copy that
trusted st_size 0 or a truncated collect gives, would otherwise read as "no driver registers any major" and make every
NVIDIA allow line look stale).  No policy and no host reads: callers pass the text.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

NVIDIA_MAJOR = 195
FRONTEND_NAMES = ("nvidia-frontend", "nvidia")  # "nvidia" since driver 550.40
# The kernel's dynamic char-major ranges (fs/char_dev.c: 234-254, then 384-511).
DYNAMIC_CHAR_MAJORS = tuple(range(234, 255)) + tuple(range(384, 512))
PROC_DEVICES_HEADER = re.compile(r"^Character devices:", re.M)
_PROC_DEV_LINE = re.compile(r"^\s*([0-9]+)\s+(\S.*?)\s*$")


def as_text(data):
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
    for line in as_text(text).splitlines():
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


def char_table(devices):
    if isinstance(devices, dict) and "char" in devices and isinstance(devices["char"], dict):
        return devices["char"]
    return devices or {}


def nvidia_majors(devices):
    """``{name: major}`` for every char driver whose name starts with "nvidia".

    Names are exact: ``nvidia-caps`` and ``nvidia-caps-imex-channels`` are two
    drivers with two majors.  Accepts parse_proc_devices() output or its "char".
    """
    out = {}
    table = char_table(devices)
    for major in sorted(table):
        for name in table[major]:
            if name.startswith("nvidia") and name not in out:
                out[name] = int(major)
    return out


def listing_problem(text):
    """None when ``text`` is a /proc/devices listing, else why not (for the evidence and the error)."""
    if PROC_DEVICES_HEADER.search(as_text(text)):
        return None
    return "no 'Character devices:' section (%d bytes): not a /proc/devices listing" % len(as_text(text))
