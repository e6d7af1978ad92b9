# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health evidence from ``nvidia-smi -q``: active clock event (throttle) reasons, ECC errors, retired pages and
remapped rows, per GPU.

``-q`` is an indented tree: ``GPU 00000000:18:00.0`` starts a GPU, a line without " : " opens a block (``ECC
Errors``, ``Volatile``), ``Key : Value`` is a leaf; the block a line belongs to follows from its indentation.  Older
drivers call the clock block "Clocks Throttle Reasons" (newer "Clocks Event Reasons") and the page block
"Pending Page Blacklist" (newer "Pending Page Retirement").  Only what is worth an operator's look is returned.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_GPU = re.compile(r"\AGPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*\Z")
CLOCK_BLOCKS = ("Clocks Event Reasons", "Clocks Throttle Reasons")
# Reasons that are normal on a healthy GPU (no work, or clocks the operator set).
BENIGN_REASONS = ("Idle", "Applications Clocks Setting", "Display Clock Setting", "Sync Boost")


def _tree(text):
    """Yield (bus id, block path tuple, key, value) for every leaf of every GPU."""
    bus, stack = None, []
    for raw in (text or "").splitlines():
        if not raw.strip():
            continue
        gpu = _GPU.match(raw.strip())
        if gpu and not raw.startswith(" "):
            bus, stack = gpu.group(1).lower(), []
            continue
        if bus is None:
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key, sep, value = raw.strip().partition(" : ")
        if not sep and raw.rstrip().endswith(":"):
            key, sep, value = raw.strip()[:-1], ":", ""
        if sep and value.strip():
            yield bus, tuple(name for _i, name in stack), key.strip(), value.strip()
        else:
            stack.append((indent, key.strip()))


def _count(value):
    # Like "N/A", anything but a plain ASCII count is 0 (str.isdigit() takes "²", and int() refuses 4301 digits).
    return int(value) if re.match(r"\A[0-9]{1,18}\Z", value) else 0


def parse_health(text):
    """{bus id: {"throttle": [active reasons], "ecc_uncorrectable": {"volatile": n, "aggregate": n},
    "retired_double_bit": n, "retired_pending": bool, "remap_uncorrectable": n, "remap_pending": bool,
    "remap_failure": bool}} for the GPUs of an ``nvidia-smi -q`` output."""
    out = {}
    for bus, path, key, value in _tree(text):
        gpu = out.setdefault(bus, {"throttle": [], "ecc_uncorrectable": {"volatile": 0, "aggregate": 0},
                                   "retired_double_bit": 0, "retired_pending": False, "remap_uncorrectable": 0,
                                   "remap_pending": False, "remap_failure": False})
        top = path[0] if path else None
        if top in CLOCK_BLOCKS and value == "Active" and key not in BENIGN_REASONS:
            gpu["throttle"].append(key)
        elif top == "ECC Errors" and len(path) >= 2 and "Uncorrectable" in key and "Sources" not in path[-1]:
            kind = path[1].lower()
            if kind in gpu["ecc_uncorrectable"]:
                gpu["ecc_uncorrectable"][kind] += _count(value)
        elif top == "Retired Pages":
            if key == "Double Bit ECC":
                gpu["retired_double_bit"] += _count(value)
            elif key.startswith("Pending Page"):
                gpu["retired_pending"] = value == "Yes"
        elif top == "Remapped Rows" and len(path) == 1:
            if key == "Uncorrectable Error":
                gpu["remap_uncorrectable"] = _count(value)
            elif key == "Pending":
                gpu["remap_pending"] = value == "Yes"
            elif key == "Remapping Failure Occurred":
                gpu["remap_failure"] = value == "Yes"
    return out


def health_lines(health):
    """Evidence lines: one per GPU with something to report, or one line saying there is nothing."""
    lines = []
    for bus, gpu in sorted(health.items()):
        found = []
        if gpu["throttle"]:
            found.append("clocks held down by " + ", ".join(gpu["throttle"]))
        ecc = gpu["ecc_uncorrectable"]
        if ecc["volatile"] or ecc["aggregate"]:
            found.append("uncorrectable ECC errors: %d since boot, %d in all" % (ecc["volatile"], ecc["aggregate"]))
        if gpu["retired_double_bit"] or gpu["retired_pending"]:
            found.append("%d pages retired for double-bit errors%s" % (
                gpu["retired_double_bit"], ", retirement pending (reset the GPU)" if gpu["retired_pending"] else ""))
        if gpu["remap_uncorrectable"] or gpu["remap_pending"] or gpu["remap_failure"]:
            found.append("%d rows remapped for uncorrectable errors%s%s" % (
                gpu["remap_uncorrectable"], ", remap pending (reset the GPU)" if gpu["remap_pending"] else "",
                ", a remapping FAILED (replace the GPU)" if gpu["remap_failure"] else ""))
        if found:
            lines.append("nvidia-smi -q %s: %s" % (bus, "; ".join(found)))
    if health and not lines:
        lines.append("nvidia-smi -q: no throttling, uncorrectable ECC errors, retired pages or remapped rows on %d "
                     "GPUs" % len(health))
    return lines
