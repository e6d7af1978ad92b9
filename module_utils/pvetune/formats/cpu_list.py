# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU lists as the kernel writes them (``0-3,8,10-11`` in cpulist files and cpufreq's related_cpus)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


# -- small helpers -------------------------------------------------------
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
            lo, hi = int(lo), int(hi)
            if hi < lo or hi - lo > 65536:
                raise ValueError("bad CPU range %r" % part)
            out.extend(range(lo, hi + 1))
        else:
            out.append(int(part))
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
