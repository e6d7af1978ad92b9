# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TODO docstring."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import re

from ansible.module_utils.pvetune.formats.kernel_cmdline import BootConfigError

MAX_KERNEL_VERSION_LEN = 64

# --------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------
_KVER_RE = re.compile(r"^[0-9][A-Za-z0-9._+~-]*\Z")


def validate_kernel_version(text):
    """Return ``text`` if it is a safe kernel release string (``6.14.8-2-pve``); else raise BootConfigError."""
    if not isinstance(text, str):
        raise BootConfigError("kernel version must be a string")
    shown = text if len(text) <= 80 else text[:77] + "..."
    if len(text) > MAX_KERNEL_VERSION_LEN:
        raise BootConfigError("kernel version %r is longer than %d characters" % (shown, MAX_KERNEL_VERSION_LEN))
    if not _KVER_RE.match(text) or ".." in text:
        raise BootConfigError("%r is not a kernel version (digits first, then [A-Za-z0-9._+~-])" % shown)
    return text


def _isdigit(ch):
    return "0" <= ch <= "9"


def _order(ch):
    if ch == "~":
        return -1
    if ch.isalpha() and ch.isascii():
        return ord(ch)
    return ord(ch) + 256


def version_compare(a, b):
    """Compare like GNU ``sort -V`` (Debian version ordering of digit/non-digit runs); -1, 0 or 1."""
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not _isdigit(a[i])) or (j < len(b) and not _isdigit(b[j])):
            ac = _order(a[i]) if i < len(a) and not _isdigit(a[i]) else 0
            bc = _order(b[j]) if j < len(b) and not _isdigit(b[j]) else 0
            if ac != bc:
                return -1 if ac < bc else 1
            i += 1
            j += 1
        si = i
        while i < len(a) and _isdigit(a[i]):
            i += 1
        sj = j
        while j < len(b) and _isdigit(b[j]):
            j += 1
        na = int(a[si:i]) if i > si else 0
        nb = int(b[sj:j]) if j > sj else 0
        if na != nb:
            return -1 if na < nb else 1
    return (a > b) - (a < b)


def kernel_sort_key(version):
    """Sort key ordering kernel versions like ``sort -V``."""
    return _VersionKey(version)


_SERIES_PREFIX = re.compile(r"^(\d+(?:\.\d+)*)")


def in_series(version, series):
    """True when the leading numeric part of ``version`` starts with the components of ``series``, compared as
    text: "6.14" matches 6.14.8-2-pve, 6.14~rc1 and 6.14+x, not 6.140.1 nor 06.14.1 (the kernel writes no
    leading zeros). The one definition the audit and the fix share."""
    match = _SERIES_PREFIX.match(version or "")
    if not match:
        return False
    want = str(series).split(".")
    return match.group(1).split(".")[:len(want)] == want


_VersionKey = functools.cmp_to_key(version_compare)
