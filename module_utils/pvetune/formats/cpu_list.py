# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU lists as the kernel writes them (``0-3,8,10-11`` in cpulist files and cpufreq's related_cpus)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


# The kernel writes CPU numbers in ASCII decimal; int() would also take "+3", "1_5" and other scripts' digits.
_CPU = re.compile(r"\A[0-9]{1,6}\Z")
MAX_CPUS = 65536   # a bound on the list, not only on each range: "0-65535," repeated fills 64 KiB


# -- small helpers -------------------------------------------------------
def _cpu(text):
    text = text.strip()
    if not _CPU.match(text):
        raise ValueError("bad CPU number %r" % text[:20])
    return int(text)


def parse_cpu_list(text):
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]; ValueError on garbage."""
    text = (text or "").strip()
    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            lo, hi = _cpu(lo), _cpu(hi)
            if hi < lo or hi - lo > 65536:
                raise ValueError("bad CPU range %r" % part)
            out.extend(range(lo, hi + 1))
        else:
            out.append(_cpu(part))
        if len(out) > MAX_CPUS:
            raise ValueError("more than %d CPUs" % MAX_CPUS)
    return out


def format_cpu_list(cpus):
    """[0, 1, 2, 5] -> '0-2,5'."""
    ranges = []
    for cpu in sorted(set(cpus)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join("%d-%d" % (lo, hi) if hi != lo else "%d" % lo for lo, hi in ranges)
