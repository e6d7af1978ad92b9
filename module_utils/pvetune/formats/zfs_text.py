# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenZFS's text: the ARC kstat (/proc/spl/kstat/zfs/arcstats), ``zfs get`` and ``zpool list -v -H -P`` output, and
ZFS sizes ("128K", "1M", "1048576").  No policy here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

ARCSTATS = "/proc/spl/kstat/zfs/arcstats"
_KSTAT_ROW = re.compile(r"\A([a-z0-9_]+)\s+([0-9]{1,3})\s+(-?[0-9]{1,20})\Z")
_SIZE = re.compile(r"\A([0-9]+(?:\.[0-9]+)?)([BKMGTPE]?)\Z")
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
_PROPERTY = re.compile(r"\A[a-z][a-z0-9_.:]*\Z")
_DATASET = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.:/ -]*\Z")


def parse_arcstats(text, path=ARCSTATS):
    """``{name: int}`` of an SPL kstat file: a header line of numbers, ``name type data``, then one row per value.
    ValueError naming the file and line for anything else."""
    lines = (text or "").splitlines()
    if len(lines) < 3 or lines[1].split() != ["name", "type", "data"]:
        raise ValueError("%s: not an SPL kstat (no 'name type data' header on line 2)" % path)
    out = {}
    for no, line in enumerate(lines[2:], 3):
        if not line.strip():
            continue
        match = _KSTAT_ROW.match(line.strip())
        if not match:
            raise ValueError("%s:%d: not a '<name> <type> <value>' row: %r" % (path, no, line[:60]))
        out[match.group(1)] = int(match.group(3))
    return out


def parse_size(text):
    """Bytes of a ZFS size ("131072", "128K", "1M", "1.50G"); None for "-" or anything else."""
    match = _SIZE.match((text or "").strip().upper())
    if not match:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def parse_zfs_get(text, properties, path="zfs get"):
    """``{dataset: {property: value}}`` of ``zfs get -H -p -o name,property,value,source`` (tabs) or of the column
    form with its ``NAME PROPERTY VALUE SOURCE`` header; only ``properties`` are kept.  ValueError naming the line
    for a row of fewer than three fields."""
    out = {}
    for no, line in enumerate((text or "").splitlines(), 1):
        if not line.strip() or (no == 1 and line.split()[:3] == ["NAME", "PROPERTY", "VALUE"]):
            continue
        fields = line.split("\t") if "\t" in line else line.split(None, 3)
        if len(fields) < 4 or not _DATASET.match(fields[0]) or not _PROPERTY.match(fields[1]):
            raise ValueError("%s:%d: not a '<dataset> <property> <value> <source>' row: %r" % (path, no, line[:60]))
        if fields[1] in properties:
            out.setdefault(fields[0], {})[fields[1]] = fields[2].strip()
    return out


def parse_zpool_vdevs(text, path="zpool list"):
    """``{pool: [device path]}`` of ``zpool list -v -H -P``: a pool's row starts at the line's start, its vdevs'
    rows are indented; the leaf devices are the absolute paths (-P).  ValueError for a device before any pool."""
    out, pool = {}, None
    for no, line in enumerate((text or "").splitlines(), 1):
        if not line.strip():
            continue
        name = line.split()[0]
        if not line[0].isspace():
            pool = out.setdefault(name, [])
        elif name.startswith("/"):
            if pool is None:
                raise ValueError("%s:%d: a device before any pool: %r" % (path, no, line[:60]))
            pool.append(name)
    return out
