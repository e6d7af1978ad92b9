# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cgroup interface files as the kernel writes them, and the PVE CT config values that set them.

cgroup v2 (Documentation/admin-guide/cgroup-v2.rst): ``cpu.max`` is "$MAX $PERIOD" with $MAX "max" for no quota;
``memory.max`` / ``memory.swap.max`` are a byte count or "max".  cgroup v1: ``cpu.cfs_quota_us`` is -1 for no quota;
``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes`` show "no limit" as the largest page-aligned value
(PAGE_COUNTER_MAX pages, 9223372036854771712 with 4 KiB pages).  Every parser raises ValueError on other text.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# v1's "no limit" is LONG_MAX rounded down to the page size; anything at or above 2**62 is no real limit.
V1_UNLIMITED = 1 << 62
_INT = re.compile(r"\A[0-9]{1,20}\Z")


def parse_cpu_max(text):
    """``"max 100000"`` -> ``(None, 100000)``; ``"800000 100000"`` -> ``(800000, 100000)``."""
    parts = (text or "").split()
    if len(parts) == 1:
        parts.append("100000")   # the kernel accepts "$MAX" alone and keeps the period
    if len(parts) != 2 or not _INT.match(parts[1]) or not (parts[0] == "max" or _INT.match(parts[0])):
        raise ValueError("%r is not '$MAX $PERIOD'" % (text or "")[:60])
    period = int(parts[1])
    if period <= 0:
        raise ValueError("period %d is not positive" % period)
    return (None if parts[0] == "max" else int(parts[0])), period


def parse_bytes_limit(text):
    """A v2 ``memory.max``-style value: bytes, or None for "max"."""
    text = (text or "").strip()
    if text == "max":
        return None
    if not _INT.match(text):
        raise ValueError("%r is not a byte count or 'max'" % text[:60])
    return int(text)


def parse_v1_limit(text):
    """A v1 ``memory.limit_in_bytes``-style value: bytes, or None for no limit."""
    text = (text or "").strip()
    if not _INT.match(text):
        raise ValueError("%r is not a byte count" % text[:60])
    value = int(text)
    return None if value >= V1_UNLIMITED else value


def parse_v1_quota(quota, period):
    """v1 ``cpu.cfs_quota_us`` and ``cpu.cfs_period_us`` -> ``(quota or None, period)``."""
    quota, period = (quota or "").strip(), (period or "").strip()
    if not (re.match(r"\A-?[0-9]{1,20}\Z", quota) and _INT.match(period)) or int(period) <= 0:
        raise ValueError("%r / %r is not a quota and a period" % (quota[:30], period[:30]))
    return (None if int(quota) < 0 else int(quota)), int(period)


def cpu_quota_cpus(quota, period):
    """The CPUs a quota allows (800000/100000 -> 8.0), None without a quota."""
    return None if quota is None else quota / float(period)


def pve_number(value, kind=float):
    """A CT config number (``cores: 16``, ``cpulimit: 1.5``, ``memory: 65536``) or ValueError."""
    text = (value or "").strip()
    if not re.match(r"\A[0-9]{1,12}(\.[0-9]{1,6})?\Z", text) or (kind is int and "." in text):
        raise ValueError("%r is not a %s" % (text[:40], "whole number" if kind is int else "number"))
    return kind(text)
