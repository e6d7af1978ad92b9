# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-GPU runtime state from ``nvidia-smi -q``: power limits, applications clocks, clock event (throttle) reasons,
PCIe replays, ECC errors, retired pages and remapped rows.

``-q`` is an indented tree: ``GPU 00000000:18:00.0`` starts a GPU, a line without " : " opens a block (``ECC
Errors``, ``Volatile``), ``Key : Value`` is a leaf; the block a line belongs to follows from its indentation.  Names
changed across driver branches, and both forms are read: "Clocks Throttle Reasons" (before r535) / "Clocks Event
Reasons"; "Power Readings" with "Power Limit" (requested) and "Enforced Power Limit" (before r530) / "GPU Power
Readings" with "Requested Power Limit" and "Current Power Limit"; "Pending Page Blacklist" / "Pending Page
Retirement".  Parsing only: what is worth an operator's look is decided by concerns/gpu.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_GPU = re.compile(r"\AGPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*\Z")
CLOCK_BLOCKS = ("Clocks Event Reasons", "Clocks Throttle Reasons")
# Reasons that are normal on a healthy GPU (no work, or clocks the operator set: concerns/gpu judges those).
BENIGN_REASONS = ("Idle", "Applications Clocks Setting", "Display Clock Setting", "Sync Boost")
POWER_BLOCKS = ("GPU Power Readings", "Power Readings")
# Power Readings key -> our name; the enforced limit is "Current" (r530+) or "Enforced" (older), the requested one
# "Requested" or the bare "Power Limit" (older).
POWER_KEYS = {"Current Power Limit": "limit", "Enforced Power Limit": "limit", "Requested Power Limit": "requested",
              "Power Limit": "requested", "Default Power Limit": "default", "Min Power Limit": "min",
              "Max Power Limit": "max", "Power Draw": "draw"}
CLOCK_KEYS = {"Applications Clocks": "applications", "Default Applications Clocks": "default_applications",
              "Max Clocks": "max"}
_WATTS = re.compile(r"\A([0-9]{1,5}(?:\.[0-9]{1,3})?) W\Z")
_MHZ = re.compile(r"\A([0-9]{1,6}) MHz\Z")


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


def _number(pattern, value):
    """The number of "600.00 W" / "1980 MHz"; None for "N/A", "[N/A]", "Unknown Error" or anything else."""
    match = pattern.match(value)
    return float(match.group(1)) if match else None


def _new_gpu():
    return {"throttle": [], "events": [], "ecc_uncorrectable": {"volatile": 0, "aggregate": 0},
            "retired_double_bit": 0, "retired_pending": False, "remap_uncorrectable": 0, "remap_pending": False,
            "remap_failure": False, "replays": None, "power": {}, "clocks": {}, "addressing": None}


def parse_gpu_state(text):
    """{bus id: state} for the GPUs of an ``nvidia-smi -q`` output.  A state has ``events`` (every active clock event
    reason) and ``throttle`` (those that are not benign: not Idle, not a clock setting), ``power`` {limit, requested,
    default, min, max, draw: watts} and ``clocks`` {applications, default_applications, max: {graphics, memory: MHz}}
    with only the values the output gives as numbers, ``replays`` (PCIe replays since reset, or None), and the
    memory health: ``ecc_uncorrectable`` {volatile, aggregate}, ``retired_double_bit``, ``retired_pending``,
    ``remap_uncorrectable``, ``remap_pending``, ``remap_failure``."""
    out = {}
    for bus, path, key, value in _tree(text):
        gpu = out.setdefault(bus, _new_gpu())
        top = path[0] if path else None
        if top is None and key == "Addressing Mode":
            gpu["addressing"] = value           # HMM, ATS or None (r535 and later)
        elif top in CLOCK_BLOCKS and value == "Active":
            gpu["events"].append(key)
            if key not in BENIGN_REASONS:
                gpu["throttle"].append(key)
        elif top in POWER_BLOCKS and len(path) == 1 and key in POWER_KEYS:
            watts = _number(_WATTS, value)
            if watts is not None:
                gpu["power"].setdefault(POWER_KEYS[key], watts)
        elif top in CLOCK_KEYS and len(path) == 1 and key in ("Graphics", "Memory"):
            mhz = _number(_MHZ, value)
            if mhz is not None:
                gpu["clocks"].setdefault(CLOCK_KEYS[top], {})[key.lower()] = int(mhz)
        elif top == "PCI" and key == "Replays Since Reset":
            gpu["replays"] = _count(value) if re.match(r"\A[0-9]{1,18}\Z", value) else None
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
