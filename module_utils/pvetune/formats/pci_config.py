# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI functions: config-space parsing, sysfs scanning and setpci command lines.

Everything here is pure (no shell, no subprocess, stdlib only) and runs on
Python 3.8+.  Reads go through an FsRoot, so the same code audits the live
host, a collected snapshot and a test tree.

Config space layout (PCI Local Bus 3.0, PCI Express Base 6.0):

* standard header 0x00-0x3f; Status (0x06) bit 4 says whether a capability
  list exists; its pointer is at 0x34 (0x14 for CardBus bridges);
* capabilities 0x40-0xff, each ``id, next`` (next masked with 0xfc);
* the PCI Express capability (id 0x10): Device Capabilities at +0x04, Device
  Control at +0x08 (MPS bits 7:5, MRRS bits 14:12, *bit 15 is Initiate
  Function Level Reset on endpoints*), Link Capabilities at +0x0c, Link
  Status at +0x12;
* extended capabilities from 0x100 (only in 4096-byte config spaces).

Unprivileged reads of ``/sys/bus/pci/devices/*/config`` return only the first
64 bytes (128 for CardBus): the capability list is not in them, so
``parse_config`` refuses such data with a message that says to read as root.

The fix changes MRRS with a *masked* setpci write, ``CAP_EXP+8.w=5000:7000``,
which touches bits 14:12 only.  An unmasked write of Device Control could set
bit 15 and reset the GPU.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import struct

from ansible.module_utils.pvetune.core.fsroot import FsError

NVIDIA_VENDOR_ID = 0x10DE

CAP_ID_PM = 0x01
CAP_ID_MSI = 0x05
CAP_ID_HT = 0x08
CAP_ID_VENDOR = 0x09
CAP_ID_SSVID = 0x0D
CAP_ID_EXP = 0x10
CAP_ID_MSIX = 0x11

EXT_CAP_ID_AER = 0x0001
EXT_CAP_ID_VC = 0x0002
EXT_CAP_ID_PWR = 0x0004
EXT_CAP_ID_VNDR = 0x000B
EXT_CAP_ID_ACS = 0x000D
EXT_CAP_ID_REBAR = 0x0015
EXT_CAP_ID_LTR = 0x0018
EXT_CAP_ID_SECPCI = 0x0019
EXT_CAP_ID_DPC = 0x001D
EXT_CAP_ID_L1SS = 0x001E
EXT_CAP_ID_DLF = 0x0025
EXT_CAP_ID_PL_16GT = 0x0026
EXT_CAP_ID_LMR = 0x0027
EXT_CAP_ID_PL_32GT = 0x002A

# Offsets inside the PCI Express capability.
EXP_FLAGS = 0x02
EXP_DEVCAP = 0x04
EXP_DEVCTL = 0x08
EXP_DEVSTA = 0x0A
EXP_LNKCAP = 0x0C
EXP_LNKCTL = 0x10
EXP_LNKSTA = 0x12
EXP_SLTCAP = 0x14
EXP_SLTSTA = 0x1A
EXP_RTCTL = 0x1C
EXP_RTCAP = 0x1E
EXP_DEVCAP2 = 0x24
EXP_DEVCTL2 = 0x28
EXP_LNKCAP2 = 0x2C
EXP_LNKCTL2 = 0x30
EXP_LNKSTA2 = 0x32
EXP_V2_SIZE = 0x3C
# parse_config reads the capability through Link Status.
EXP_NEEDED = EXP_LNKSTA + 2

DEVCTL_MPS_MASK = 0x00E0
DEVCTL_MRRS_MASK = 0x7000
DEVCTL_FLR = 0x8000  # endpoints: Initiate Function Level Reset (bridges: config retry enable)

MIN_CONFIG_SIZE = 64
STD_CONFIG_SIZE = 256
EXT_CONFIG_SIZE = 4096
MAX_CAP_HOPS = 48  # (0x100 - 0x40) / 4, as the kernel's PCI_FIND_CAP_TTL
MAX_EXT_CAP_HOPS = (EXT_CONFIG_SIZE - STD_CONFIG_SIZE) // 8

SPEEDS = {
    1: "2.5GT/s",
    2: "5GT/s",
    3: "8GT/s",
    4: "16GT/s",
    5: "32GT/s",
    6: "64GT/s",
}
SPEED_CODES = {v: k for k, v in SPEEDS.items()}

PCIE_TYPES = {
    0x0: "Endpoint",
    0x1: "Legacy Endpoint",
    0x4: "Root Port",
    0x5: "Upstream Port",
    0x6: "Downstream Port",
    0x7: "PCI-Express to PCI/PCI-X Bridge",
    0x8: "PCI/PCI-X to PCI-Express Bridge",
    0x9: "Root Complex Integrated Endpoint",
    0xA: "Root Complex Event Collector",
}

PAYLOAD_SIZES = (128, 256, 512, 1024, 2048, 4096)

BDF_RE = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_BDF_LOOSE_RE = re.compile(r"(?:([0-9A-Fa-f]{4}):)?([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])")
MAX_BDF_LEN = 12


class PciConfigError(ValueError):
    """Config space data that cannot be parsed; the message says exactly why."""


# -- small helpers ------------------------------------------------------------
def _u8(data, off):
    return data[off]


def _u16(data, off):
    return struct.unpack_from("<H", data, off)[0]


def _u32(data, off):
    return struct.unpack_from("<I", data, off)[0]


def speed_name(code):
    """Link speed code (LnkCap/LnkSta bits 3:0) -> "16GT/s"; None for 0/reserved."""
    return SPEEDS.get(code)


def speed_code(name):
    """"16GT/s" (also "16 GT/s", "16.0 GT/s PCIe") -> 4; ValueError otherwise."""
    norm = normalize_speed(name)
    if norm is None:
        raise ValueError("unknown PCIe link speed: %r (expected one of %s)"
                         % (name, ", ".join(SPEEDS[k] for k in sorted(SPEEDS))))
    return SPEED_CODES[norm]


_SPEED_TEXT_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s(?:\s+PCIe)?\s*$")


def normalize_speed(text):
    """Normalise sysfs/lspci speed text ("8 GT/s", "16.0 GT/s PCIe", "5GT/s") to "16GT/s".

    Returns None for "Unknown", empty or unrecognised text.
    """
    if not isinstance(text, str):
        return None
    match = _SPEED_TEXT_RE.match(text)
    if not match:
        return None
    value = float(match.group(1))
    for name in SPEEDS.values():
        if abs(float(name[:-4]) - value) < 1e-6:
            return name
    return None


def _payload_size(code):
    """MPS/MRRS encoding -> bytes (128 << code); None for reserved codes 6 and 7."""
    return 128 << code if code <= 5 else None


def payload_code(size_bytes, what):
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int) or size_bytes not in PAYLOAD_SIZES:
        raise ValueError("%s must be one of %s bytes, not %r"
                         % (what, ", ".join(str(s) for s in PAYLOAD_SIZES), size_bytes))
    return PAYLOAD_SIZES.index(size_bytes)


# -- config space parser ------------------------------------------------------
def _short_message(size):
    if size == MIN_CONFIG_SIZE:
        return ("config space is 64 bytes: only the standard header, which is what an unprivileged "
                "read of sysfs 'config' returns; read it as root")
    return "config space is %d bytes" % size


def parse_config(data):
    """Parse a binary PCI config space (64, 256 or 4096 bytes; as sysfs 'config' returns it).

    Returns a dict: vendor_id, device_id, command, status, revision, class_code (24-bit),
    header_type (layout, bits 6:0), multifunction, subsystem_vendor_id / subsystem_id
    (None for bridges), size, capabilities [(id, offset)], ext_capabilities
    [(id, offset)] (None when the data has no extended space), ext_error (None or why the
    extended list was cut short) and the PCI Express fields, all None when the function has
    no PCI Express capability: cap_exp, pcie_version, pcie_type, pcie_type_name, devcap,
    devcap_mps, flr_capable, devctl, mps, mrrs, lnkcap, lnkcap_speed, lnkcap_width,
    lnksta, lnksta_speed, lnksta_width, lnkcap_aspm and lnkctl_aspm (ASPM states supported and enabled: "disabled",
    "L0s", "L1", "L0s L1").  Sizes are bytes, speeds "2.5GT/s" ... "64GT/s"
    (None for reserved or zero codes, e.g. a link that is down).

    Raises PciConfigError when the data is too short, the function did not answer (all
    ones), or the capability list is broken (loop, pointer into the header or beyond the
    data, PCI Express capability cut off).  Problems in the *extended* list do not raise:
    they are reported in ext_error, since nothing pvetune checks lives there.
    """
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("config space must be bytes, not %s" % type(data).__name__)
    data = bytes(data)
    size = len(data)
    if size < MIN_CONFIG_SIZE:
        raise PciConfigError("config space is %d bytes; the standard header alone needs 64" % size)
    vendor_id = _u16(data, 0x00)
    if vendor_id in (0xFFFF, 0x0000):
        raise PciConfigError("vendor id 0x%04x: the function did not answer (config space reads as all %s)"
                             % (vendor_id, "ones" if vendor_id else "zeros"))
    header_byte = _u8(data, 0x0E)
    header_type = header_byte & 0x7F
    status = _u16(data, 0x06)
    info = {
        "vendor_id": vendor_id,
        "device_id": _u16(data, 0x02),
        "command": _u16(data, 0x04),
        "status": status,
        "revision": _u8(data, 0x08),
        "class_code": (_u8(data, 0x0B) << 16) | (_u8(data, 0x0A) << 8) | _u8(data, 0x09),
        "header_type": header_type,
        "multifunction": bool(header_byte & 0x80),
        "subsystem_vendor_id": _u16(data, 0x2C) if header_type == 0 else None,
        "subsystem_id": _u16(data, 0x2E) if header_type == 0 else None,
        "size": size,
        "capabilities": [],
        "ext_capabilities": None,
        "ext_error": None,
        "cap_exp": None,
        "pcie_version": None,
        "pcie_type": None,
        "pcie_type_name": None,
        "devcap": None,
        "devcap_mps": None,
        "flr_capable": None,
        "devctl": None,
        "mps": None,
        "mrrs": None,
        "lnkcap": None,
        "lnkcap_speed": None,
        "lnkcap_width": None,
        "lnksta": None,
        "lnksta_speed": None,
        "lnksta_width": None,
        "lnkcap_aspm": None,
        "lnkctl_aspm": None,
    }
    if status & 0x0010:
        info["capabilities"] = _walk_capabilities(data, 0x14 if header_type == 2 else 0x34)
    for cap_id, offset in info["capabilities"]:
        if cap_id == CAP_ID_EXP:
            _parse_exp(data, offset, info)
            break
    if size > STD_CONFIG_SIZE:
        info["ext_capabilities"], info["ext_error"] = _walk_ext_capabilities(data)
    return info


def _walk_capabilities(data, pointer_at):
    size = len(data)
    ptr = _u8(data, pointer_at) & 0xFC
    where = pointer_at
    caps = []
    visited = set()
    while ptr:
        if ptr < 0x40:
            raise PciConfigError("capability pointer at 0x%02x is 0x%02x, inside the standard header"
                                 % (where, ptr))
        if ptr + 2 > size:
            if size == MIN_CONFIG_SIZE:
                raise PciConfigError("%s; the capability list starts at 0x%02x" % (_short_message(size), ptr))
            raise PciConfigError("capability pointer at 0x%02x is 0x%02x, outside the %d bytes of config space"
                                 % (where, ptr, size))
        if ptr in visited:
            raise PciConfigError("capability list loops at 0x%02x" % ptr)
        if len(visited) >= MAX_CAP_HOPS:
            raise PciConfigError("capability list has more than %d entries" % MAX_CAP_HOPS)
        visited.add(ptr)
        cap_id = _u8(data, ptr)
        if cap_id == CAP_ID_EXP and ptr + EXP_NEEDED > size:
            # Say what is missing rather than where a later pointer leads.
            raise PciConfigError("%s; the PCI Express capability at 0x%02x needs 0x%02x"
                                 % (_short_message(size), ptr, ptr + EXP_NEEDED))
        caps.append((cap_id, ptr))
        where = ptr + 1
        ptr = _u8(data, ptr + 1) & 0xFC
    return caps


def _parse_exp(data, cap, info):
    flags = _u16(data, cap + EXP_FLAGS)
    devcap = _u32(data, cap + EXP_DEVCAP)
    devctl = _u16(data, cap + EXP_DEVCTL)
    lnkcap = _u32(data, cap + EXP_LNKCAP)
    lnksta = _u16(data, cap + EXP_LNKSTA)
    lnkctl = _u16(data, cap + EXP_LNKCTL)
    pcie_type = (flags >> 4) & 0xF
    info.update({
        "cap_exp": cap,
        "pcie_version": flags & 0xF,
        "pcie_type": pcie_type,
        "pcie_type_name": PCIE_TYPES.get(pcie_type, "Unknown type %d" % pcie_type),
        "devcap": devcap,
        "devcap_mps": _payload_size(devcap & 0x7),
        "flr_capable": bool(devcap & (1 << 28)),
        "devctl": devctl,
        "mps": _payload_size((devctl >> 5) & 0x7),
        "mrrs": _payload_size((devctl >> 12) & 0x7),
        "lnkcap": lnkcap,
        "lnkcap_speed": speed_name(lnkcap & 0xF),
        "lnkcap_width": (lnkcap >> 4) & 0x3F,
        "lnksta": lnksta,
        "lnksta_speed": speed_name(lnksta & 0xF),
        "lnksta_width": (lnksta >> 4) & 0x3F,
        # ASPM: LnkCap bits 11:10 (supported), LnkCtl bits 1:0 (enabled); bit 0 L0s, bit 1 L1 (PCIe base spec).
        "lnkcap_aspm": aspm_name((lnkcap >> 10) & 0x3),
        "lnkctl_aspm": aspm_name(lnkctl & 0x3),
    })


def aspm_name(bits):
    """"disabled", "L0s", "L1" or "L0s L1" for the two ASPM bits of LnkCap/LnkCtl."""
    return " ".join(name for bit, name in ((1, "L0s"), (2, "L1")) if bits & bit) or "disabled"


def _walk_ext_capabilities(data):
    """Extended capabilities from 0x100: ([(id, offset)], error or None); never raises."""
    caps = []
    size = len(data)
    where = STD_CONFIG_SIZE
    visited = set()
    while True:
        if where + 4 > size:
            return caps, "extended capability pointer 0x%03x is outside the %d bytes of config space" % (where, size)
        header = _u32(data, where)
        if header == 0:
            # The end of the list, wherever it is: an empty list at 0x100, or a next pointer to an all-zero header
            # (the kernel's pci_find_next_ext_capability and lspci's show_ext_caps both stop there).
            return caps, None
        if header == 0xFFFFFFFF:
            # Nothing answers: the whole space at 0x100 (no extended capabilities), or further down a dead entry.
            if where == STD_CONFIG_SIZE:
                return caps, None
            return caps, "extended capability at 0x%03x reads 0x%08x" % (where, header)
        if where in visited:
            return caps, "extended capability list loops at 0x%03x" % where
        if len(visited) >= MAX_EXT_CAP_HOPS:
            return caps, "extended capability list has more than %d entries" % MAX_EXT_CAP_HOPS
        visited.add(where)
        caps.append((header & 0xFFFF, where))
        nxt = (header >> 20) & 0xFFC
        if not nxt:
            return caps, None
        if nxt < STD_CONFIG_SIZE:
            return caps, ("extended capability at 0x%03x points to 0x%03x, inside the first 256 bytes"
                          % (where, nxt))
        where = nxt


# -- addresses and setpci command lines ---------------------------------------
def validate_bdf(text):
    """Return ``text`` when it is a canonical "dddd:bb:dd.f" address (lower-case hex).

    The check is strict on purpose (whole-string match, no trailing newline, no upper
    case, at most 12 characters): addresses end up on setpci command lines.
    """
    if not isinstance(text, str):
        # ValueError on purpose: callers catch one exception type for any bad address.
        raise ValueError("PCI address must be a string, not %s" % type(text).__name__)
    if len(text) != MAX_BDF_LEN or not BDF_RE.fullmatch(text):
        raise ValueError("invalid PCI address %r (expected dddd:bb:dd.f, lower-case hex)" % (text[:40],))
    return text


def normalize_bdf(text):
    """Accept "01:00.0" / "0000:01:00.0" in any case; return the canonical lower-case form."""
    if not isinstance(text, str) or len(text) > MAX_BDF_LEN or not _BDF_LOOSE_RE.fullmatch(text):
        raise ValueError("invalid PCI address %r" % (text[:40] if isinstance(text, str) else text,))
    if len(text) == 7:
        text = "0000:" + text
    return validate_bdf(text.lower())


def mrrs_encoding(size_bytes):
    """Max Read Request Size in bytes -> Device Control bits 14:12 value (512 -> 2, 4096 -> 5)."""
    return payload_code(size_bytes, "max read request size")


def sysfs_args(sysfs_path):
    if sysfs_path is None:
        return []
    if not isinstance(sysfs_path, str) or not os.path.isabs(sysfs_path) \
            or any(c in sysfs_path for c in "\x00\r\n"):
        raise ValueError("sysfs_path must be an absolute path without NUL or newlines: %r" % (sysfs_path,))
    return ["-A", "linux-sysfs", "-O", "sysfs.path=%s" % sysfs_path]


def sysfs_path_for_root(root):
    """The ``sysfs.path`` for setpci/lspci under ``root``; None for the live host ("/")."""
    if root in (None, "/"):
        return None
    return os.path.join(root, "sys/bus/pci")


def setpci_mrrs_args(bdf, size_bytes, sysfs_path=None):
    """setpci argv (without the program) setting MRRS with a masked write.

    ``CAP_EXP+8.w=5000:7000`` writes bits 14:12 only; bit 15 (Initiate Function Level
    Reset) and every other Device Control bit keep their current values.  With
    ``sysfs_path`` (a tree's ``.../sys/bus/pci``) setpci works on that tree only.
    """
    validate_bdf(bdf)
    value = mrrs_encoding(size_bytes) << 12
    return sysfs_args(sysfs_path) + ["-s", bdf, "CAP_EXP+8.w=%04x:%04x" % (value, DEVCTL_MRRS_MASK)]


def setpci_read_args(bdf, sysfs_path=None):
    """setpci argv reading Device Control (``CAP_EXP+8.w``); parse with parse_setpci_word()."""
    validate_bdf(bdf)
    return sysfs_args(sysfs_path) + ["-s", bdf, "CAP_EXP+8.w"]


def parse_setpci_word(text):
    """setpci's answer to a ``.w`` read ("2930\\n") -> int; ValueError otherwise."""
    value = (text or "").strip()
    if not re.fullmatch(r"[0-9a-fA-F]{4}", value):
        raise ValueError("unexpected setpci output %r" % (value[:80],))
    return int(value, 16)


def devctl_mrrs(devctl):
    """Device Control word -> MRRS bytes (None for reserved codes)."""
    return _payload_size((devctl >> 12) & 0x7)


def read_function(fsroot, bdf, vendor, prefix, keep_bytes=False):
    base = "%s/%s" % (SYSFS_PCI_DEVICES, bdf)
    errors = []
    fn = {
        "bdf": bdf,
        "path": base,
        "parent": None,
        "vendor_id": None,
        "device_id": None,
        "class_code": None,
        "numa_node": None,
        "current_link_speed": None,
        "current_link_speed_raw": None,
        "max_link_speed": None,
        "max_link_speed_raw": None,
        "current_link_width": None,
        "max_link_width": None,
        "driver": None,
        "config": None,
        "error": None,
    }
    try:
        target = fsroot.readlink(base)
        fn["path"] = os.path.normpath(os.path.join(SYSFS_PCI_DEVICES, target))
        parent = os.path.basename(os.path.dirname(fn["path"]))
        fn["parent"] = parent if BDF_RE.fullmatch(parent) else None
    except FsError:
        pass  # not a symlink (flat test tree): keep the bus path
    for key, fname in (("vendor_id", "vendor"), ("device_id", "device"), ("class_code", "class")):
        path = "%s/%s" % (base, fname)
        try:
            text = fsroot.read_value(path)
        except FsError as exc:
            errors.append(str(exc))
            continue
        value = _parse_int(text)
        if value is None:
            errors.append("%s: not a hex number: %r" % (path, text[:40]))
        fn[key] = value
    if vendor is not None and fn["vendor_id"] is not None and fn["vendor_id"] != vendor:
        return None
    if prefix is not None and fn["class_code"] is not None and not ("%06x" % fn["class_code"]).startswith(prefix):
        return None

    numa = fsroot.try_value(base + "/numa_node")
    fn["numa_node"] = _parse_int(numa, 10) if numa is not None else None
    for key in ("current_link_speed", "max_link_speed"):
        raw = fsroot.try_value("%s/%s" % (base, key))
        fn[key + "_raw"] = raw
        fn[key] = normalize_speed(raw)
    for key in ("current_link_width", "max_link_width"):
        raw = fsroot.try_value("%s/%s" % (base, key))
        fn[key] = _parse_int(raw, 10) if raw is not None else None
    try:
        fn["driver"] = os.path.basename(fsroot.readlink(base + "/driver").rstrip("/")) or None
    except FsError:
        fn["driver"] = None

    config_path = base + "/config"
    try:
        data = fsroot.read_bytes(config_path, limit=EXT_CONFIG_SIZE)
        if keep_bytes:
            fn["raw"] = data
        fn["config"] = parse_config(data)
    except FsError as exc:
        errors.append(str(exc))
    except PciConfigError as exc:
        errors.append("%s: %s" % (config_path, exc))
    if fn["config"] is not None:
        cfg = fn["config"]
        for key in ("vendor_id", "device_id"):
            sysfs_value = fn[key]
            if sysfs_value is not None and cfg[key] != sysfs_value:
                errors.append("%s: %s 0x%04x differs from sysfs %s 0x%04x"
                              % (config_path, key, int(cfg[key] or 0), key.split("_", maxsplit=1)[0], int(sysfs_value)))
    fn["error"] = "; ".join(errors) if errors else None
    return fn


SYSFS_PCI_DEVICES = "/sys/bus/pci/devices"


# -- sysfs scan -----------------------------------------------------------------
def _parse_int(text, base=16):
    try:
        return int(text, base)
    except (TypeError, ValueError):
        return None


def parse_prefix(value):
    """class_prefix "03" / "0x0302" / "030200" -> lower-case hex digits."""
    text = re.sub(r"^0x", "", value.lower())
    if not re.fullmatch(r"[0-9a-f]{1,6}", text):
        raise ValueError("class_prefix must be hex digits of the 24-bit class, e.g. '03' or '0302': %r" % (value,))
    return text
