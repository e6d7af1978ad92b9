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

SYSFS_PCI_DEVICES = "/sys/bus/pci/devices"
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


def _payload_code(size_bytes, what):
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
    lnksta, lnksta_speed, lnksta_width.  Sizes are bytes, speeds "2.5GT/s" ... "64GT/s"
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
    })


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
        if header in (0, 0xFFFFFFFF):
            # An empty list (0 at 0x100) or, further down, a dead entry.
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


def is_nvidia_gpu(fn):
    """True for an NVIDIA display controller (vendor 0x10de, class 0x03xxxx).

    Works on list_functions() entries and parse_config() results (same key names).
    """
    vendor = fn.get("vendor_id")
    klass = fn.get("class_code")
    return vendor == NVIDIA_VENDOR_ID and isinstance(klass, int) and (klass >> 16) == 0x03


# -- config space builder (fixtures, demo fleet) ------------------------------
def build_config(vendor_id, device_id, class_code, mrrs=512, mps=256, devcap_mps=512,
                 lnkcap=("32GT/s", 16), lnksta=("32GT/s", 16), size=4096, header_type=0,
                 extra=None, subsystem=None, revision=0xA1, multifunction=None, pcie_type=None,
                 devctl_flags=None, buses=(0x40, 0x41, 0x41)):
    """Build a realistic binary config space for test trees and the demo fleet.

    The layout is modelled on real dumps (tests/fixtures/realdata/SOURCES.md):

    * ``header_type=0``, display class 0x03xxxx: an NVIDIA GPU as in the GA102 (Ampere)
      ``lspci -vv`` of linuxhw AS-4124GS-TNR and the 256-byte hexdumps of GTX 1080 Ti /
      TU102 / K2200: PM 0x01 at 0x60 -> MSI 0x05 at 0x68 -> PCI Express 0x10 at 0x78 ->
      vendor-specific 0x09 at 0xb4 (the 0xb4 entry is linked on GA102; on older chips it is
      present but unlinked).  PCI Express v2, Legacy Endpoint for VGA (0x0300) and Endpoint
      for 3D controllers (0x0302, as A100/P100), DevCap with FLR, Device Control
      CorrErr+ NonFatalErr+ FatalErr+ RlxdOrd+ ExtTag+ (GA102/A100/TU104) unless
      ``devctl_flags`` is given.  Extended capabilities: Virtual Channel 0x100 -> LTR 0x250
      -> L1 PM Substates 0x258 -> Power Budgeting 0x128 -> AER 0x420 -> vendor-specific
      0x600 -> Secondary PCIe 0x900 -> Resizable BAR 0xbb0, then, for 16GT/s and faster
      links, Physical Layer 16GT/s 0xc1c -> Lane Margining 0xd00 -> Data Link Feature
      0xe00, and for 32GT/s and faster Physical Layer 32GT/s 0xe10.  The Blackwell
      specifics (a 32GT/s capability at 0xe10) are an extrapolation, not a captured dump.
    * ``header_type=0``, class 0x04xxxx: the GPU's HD-audio function as in the eler,
      duaneya and marwank270 dumps: PM 0x60 -> MSI 0x68 -> PCI Express Endpoint 0x78,
      AER at 0x100.  Consumer and workstation GPUs (GTX/RTX/Quadro) expose it at .1;
      datacenter GPUs (A100, P100 above) do not, and whether the RTX PRO 6000 Blackwell
      *Server Edition* does (its display outputs are off by default) is not documented
      in any dump we have, so the demo fleet should not invent one.
    * ``header_type=1``: a PCI Express bridge (class 0x060400), modelled on the AMD
      Starship/Matisse GPP root port 40:01.1 of the same linuxhw dump: PM 0x50 ->
      PCI Express (Root Port, slot) 0x58 -> MSI 0xa0 -> subsystem 0x0d at 0xc0 ->
      HyperTransport MSI mapping 0xc8; extended: vendor-specific 0x100 -> AER 0x150 ->
      Secondary PCIe 0x270 -> ACS 0x2a0 -> L1 PM Substates 0x370 -> DPC 0x380, then Data
      Link Feature 0x400 -> Physical Layer 16GT/s 0x410 -> Lane Margining 0x440 (16GT/s+)
      and Physical Layer 32GT/s 0x470 (32GT/s+).  ``pcie_type`` 5/6 give switch ports.
      ``buses`` = (primary, secondary, subordinate).

    ``mrrs``/``mps``/``devcap_mps`` are bytes (128..4096); ``lnkcap``/``lnksta`` are
    (speed, width); a ``lnksta`` speed of None gives a link that is down (speed 0,
    width 0).  ``size`` truncates the image (64 = what an unprivileged sysfs read returns;
    256 = conventional space only).  ``extra`` maps offsets to bytes (or a single int
    byte) written last, to inject faults.  Returns bytes.
    """
    if header_type not in (0, 1):
        raise ValueError("header_type must be 0 (endpoint) or 1 (bridge), not %r" % (header_type,))
    if not isinstance(size, int) or isinstance(size, bool) or not MIN_CONFIG_SIZE <= size <= EXT_CONFIG_SIZE:
        raise ValueError("size must be 64..4096 bytes, not %r" % (size,))
    mrrs_code = _payload_code(mrrs, "mrrs")
    mps_code = _payload_code(mps, "mps")
    devcap_code = _payload_code(devcap_mps, "devcap_mps")
    if mps_code > devcap_code:
        raise ValueError("mps %d exceeds devcap_mps %d" % (mps, devcap_mps))
    cap_speed = speed_code(lnkcap[0])
    cap_width = int(lnkcap[1])
    if lnksta[0] is None:
        sta_speed, sta_width = 0, 0
    else:
        sta_speed, sta_width = speed_code(lnksta[0]), int(lnksta[1])
    for width in (cap_width, sta_width):
        if not 0 <= width <= 32:
            raise ValueError("link width must be 0..32, not %r" % (width,))
    for name, value in (("vendor_id", vendor_id), ("device_id", device_id)):
        if not 0 <= value <= 0xFFFF:
            raise ValueError("%s must be 16 bits, not %r" % (name, value))
    if not 0 <= class_code <= 0xFFFFFF:
        raise ValueError("class_code must be 24 bits, not %r" % (class_code,))

    buf = bytearray(EXT_CONFIG_SIZE)

    def w8(off, val):
        struct.pack_into("<B", buf, off, val)

    def w16(off, val):
        struct.pack_into("<H", buf, off, val)

    def w32(off, val):
        struct.pack_into("<I", buf, off, val)

    def ext(off, cap_id, version, nxt):
        w32(off, cap_id | (version << 16) | (nxt << 20))

    w16(0x00, vendor_id)
    w16(0x02, device_id)
    w16(0x04, 0x0407)  # I/O+ Mem+ BusMaster+ DisINTx+
    w16(0x06, 0x0010)  # Cap+
    w8(0x08, revision)
    w8(0x09, class_code & 0xFF)
    w8(0x0A, (class_code >> 8) & 0xFF)
    w8(0x0B, (class_code >> 16) & 0xFF)
    audio = header_type == 0 and (class_code >> 16) == 0x04
    if multifunction is None:
        # NVIDIA VGA functions share the device with their HD-audio function (.1).
        multifunction = header_type == 0 and vendor_id == NVIDIA_VENDOR_ID and (class_code >> 8) in (0x0300, 0x0403)
    w8(0x0E, header_type | (0x80 if multifunction else 0))

    if pcie_type is None:
        if header_type == 1:
            pcie_type = 0x4
        elif (class_code >> 8) == 0x0300:
            pcie_type = 0x1
        else:
            pcie_type = 0x0
    bridge = header_type == 1

    if not bridge:
        if subsystem is None:
            subsystem = (vendor_id, 0x0000)
        if audio:
            w32(0x10, 0xF3080000)  # 16K 32-bit memory
            w16(0x04, 0x0006)  # Mem+ BusMaster+ (INTx used until the driver loads MSI)
            w8(0x0C, 0x10)
        else:
            w32(0x10, 0xF2000000)  # BAR0: 32-bit non-prefetchable
            w32(0x14, 0x0000000C)  # BAR1: 64-bit prefetchable ...
            w32(0x18, 0x00000200)  # ... at 0x200_0000_0000
            w32(0x1C, 0xE000000C)  # BAR3: 64-bit prefetchable
            w32(0x20, 0x000001FF)
            w32(0x24, 0x00002001)  # BAR5: I/O
        w16(0x2C, subsystem[0])
        w16(0x2E, subsystem[1])
        w8(0x34, 0x60)
        w8(0x3C, 0xFF)
        w8(0x3D, 0x02 if audio else 0x01)
        if vendor_id == NVIDIA_VENDOR_ID:
            w16(0x40, subsystem[0])  # NVIDIA mirrors the subsystem ids at 0x40
            w16(0x42, subsystem[1])
            w32(0x58, 0x0023D6CE)
            if not audio:
                w32(0x50, 0x00000001)
                w32(0x54, 0x00000001)
        # PM at 0x60: version 3, D0, NoSoftRst+
        w8(0x60, CAP_ID_PM)
        w8(0x61, 0x68)
        w16(0x62, 0x0003)
        w16(0x64, 0x0008)
        # MSI at 0x68: 64-bit, enabled
        w8(0x68, CAP_ID_MSI)
        w8(0x69, 0x78)
        w16(0x6A, 0x0080 if audio else 0x0081)
        if not audio:
            w32(0x6C, 0xFEE00000)
            w16(0x74, 0x4036)
        exp = 0x78
        w8(exp, CAP_ID_EXP)
        w8(exp + 1, 0x00 if audio else 0xB4)
        if not audio:
            # vendor-specific capability (NVIDIA, length 0x14)
            w8(0xB4, CAP_ID_VENDOR)
            w8(0xB5, 0x00)
            w8(0xB6, 0x14)
            w8(0xB7, 0x01)
    else:
        w8(0x0C, 0x10)  # cache line 64 bytes
        w8(0x18, buses[0])
        w8(0x19, buses[1])
        w8(0x1A, buses[2])
        w8(0x1C, 0x21)  # I/O base 0x2000 (32-bit I/O)
        w8(0x1D, 0x21)  # I/O limit 0x2fff
        w16(0x20, 0xF200)  # memory behind bridge f2000000-f30fffff
        w16(0x22, 0xF300)
        w16(0x24, 0x0001)  # 64-bit prefetchable window 0x200_0000_0000 - 0x201_ffff_ffff
        w16(0x26, 0xFFF1)
        w32(0x28, 0x00000200)
        w32(0x2C, 0x00000201)
        w8(0x34, 0x50)
        w8(0x3C, 0xFF)
        w16(0x3E, 0x0012)  # SERR+ VGA16+
        w8(0x50, CAP_ID_PM)
        w8(0x51, 0x58)
        w16(0x52, 0xC803)  # version 3, PME from D0/D3hot/D3cold
        exp = 0x58
        w8(exp, CAP_ID_EXP)
        w8(exp + 1, 0xA0)
        w8(0xA0, CAP_ID_MSI)
        w8(0xA1, 0xC0)
        w16(0xA2, 0x0081)
        w32(0xA4, 0xFEE07000)
        w16(0xAC, 0x4021)
        w8(0xC0, CAP_ID_SSVID)
        w8(0xC1, 0xC8)
        w16(0xC4, subsystem[0] if subsystem else vendor_id)
        w16(0xC6, subsystem[1] if subsystem else device_id)
        w8(0xC8, CAP_ID_HT)
        w8(0xC9, 0x00)
        w16(0xCA, 0xA803)  # HyperTransport MSI mapping, Enable+ Fixed+

    # -- PCI Express capability ------------------------------------------------
    port = pcie_type in (0x4, 0x6)
    slot = port
    w16(exp + EXP_FLAGS, 0x0002 | (pcie_type << 4) | (0x0100 if slot else 0))
    if bridge:
        devcap = devcap_code | (1 << 5) | (1 << 15)
    else:
        # ExtTag+, L0s unlimited, L1 <64us, RBE+, FLReset+ (audio functions: no FLR)
        devcap = devcap_code | (1 << 5) | (7 << 6) | (6 << 9) | (1 << 15) | (0 if audio else 1 << 28)
    w32(exp + EXP_DEVCAP, devcap)
    if devctl_flags is None:
        # CorrErr+ NonFatalErr+ FatalErr+ UnsupReq- RlxdOrd+ ExtTag+ (+NoSnoop on ports and audio)
        devctl_flags = 0x0007 | 0x0010 | 0x0100 | (0x0800 if bridge or audio else 0)
    if devctl_flags & (DEVCTL_MPS_MASK | DEVCTL_MRRS_MASK | DEVCTL_FLR):
        raise ValueError("devctl_flags must not contain MPS, MRRS or bit 15: 0x%04x" % devctl_flags)
    w16(exp + EXP_DEVCTL, devctl_flags | (mps_code << 5) | (mrrs_code << 12))
    if bridge:
        # ASPM L1, L1 exit <64us, LLActRep+ BwNot+ ASPMOptComp+
        lnkcap_val = cap_speed | (cap_width << 4) | (2 << 10) | (6 << 15) | (1 << 20) | (1 << 21) | (1 << 22)
        lnkctl = 0x0042  # ASPM L1, CommClk+
        lnksta_val = sta_speed | (sta_width << 4) | (1 << 12) | ((1 << 13) if sta_speed else 0)
    else:
        # ASPM L0s L1, L0s exit <512ns, L1 exit <16us, ClockPM+, ASPMOptComp+
        lnkcap_val = cap_speed | (cap_width << 4) | (3 << 10) | (3 << 12) | (4 << 15) | (1 << 18) | (1 << 22)
        lnkctl = 0x0142  # ASPM L1, CommClk+, ClockPM+
        lnksta_val = sta_speed | (sta_width << 4) | (1 << 12)
    w32(exp + EXP_LNKCAP, lnkcap_val)
    w16(exp + EXP_LNKCTL, lnkctl)
    w16(exp + EXP_LNKSTA, lnksta_val)
    if slot:
        w32(exp + EXP_SLTCAP, (75 << 7) | (1 << 18))  # PowerLimit 75W, NoCompl+
        w16(exp + EXP_SLTSTA, 0x0040)  # PresDet+
    if pcie_type == 0x4:
        w16(exp + EXP_RTCTL, 0x0010)  # CRSVisible+
        w16(exp + EXP_RTCAP, 0x0001)
    if bridge:
        devcap2 = 0xF | (1 << 4) | (1 << 5) | (1 << 11) | (1 << 16) | (1 << 17)  # ABCD, TimeoutDis+, ARIFwd+, LTR+
        devctl2 = 0x0006 | (1 << 10)
    else:
        devcap2 = 0x3 | (1 << 4) | ((1 << 11) | (1 << 16) | (1 << 17) | (1 << 18) if not audio else 0)
        devctl2 = 0 if audio else (1 << 10)
    w32(exp + EXP_DEVCAP2, devcap2)
    w16(exp + EXP_DEVCTL2, devctl2)
    w32(exp + EXP_LNKCAP2, ((1 << cap_speed) - 1) << 1)
    w16(exp + EXP_LNKCTL2, cap_speed)
    w16(exp + EXP_LNKSTA2, 0x001F if cap_speed >= 3 else 0x0001)

    # -- extended capabilities -------------------------------------------------
    if audio:
        ext(0x100, EXT_CAP_ID_AER, 2, 0)
        w32(0x100 + 0x0C, 0x00462030)
    elif not bridge:
        chain = [(0x100, EXT_CAP_ID_VC, 1), (0x250, EXT_CAP_ID_LTR, 1), (0x258, EXT_CAP_ID_L1SS, 1),
                 (0x128, EXT_CAP_ID_PWR, 1), (0x420, EXT_CAP_ID_AER, 2), (0x600, EXT_CAP_ID_VNDR, 1),
                 (0x900, EXT_CAP_ID_SECPCI, 1), (0xBB0, EXT_CAP_ID_REBAR, 1)]
        if cap_speed >= 4:
            chain += [(0xC1C, EXT_CAP_ID_PL_16GT, 1), (0xD00, EXT_CAP_ID_LMR, 1), (0xE00, EXT_CAP_ID_DLF, 1)]
        if cap_speed >= 5:
            chain += [(0xE10, EXT_CAP_ID_PL_32GT, 1)]
        w32(0x100 + 0x14, 0x800000FF)  # VC0 enabled, TC/VC map 0xff
        w32(0x258 + 0x04, 0x0009FF1F)  # L1 PM substates supported, PortTPowerOnTime 10us
        w32(0x258 + 0x0C, 0x00000009)
        w32(0x420 + 0x08, 0x00100000)  # UEMsk: UnsupReq+
        w32(0x420 + 0x0C, 0x00076030)
        w32(0x600 + 0x04, 0x02410001)  # VSEC ID=0001 Rev=1 Len=024
        w32(0xBB0 + 0x04, 0x003FFFF0)  # Resizable BAR: sizes 1MB..128GB
        w32(0xBB0 + 0x08, 0x00001121)  # BAR 1, one resizable BAR, current size 128GB
        _write_chain(ext, chain)
    else:
        chain = [(0x100, EXT_CAP_ID_VNDR, 1), (0x150, EXT_CAP_ID_AER, 2), (0x270, EXT_CAP_ID_SECPCI, 1),
                 (0x2A0, EXT_CAP_ID_ACS, 1), (0x370, EXT_CAP_ID_L1SS, 1), (0x380, EXT_CAP_ID_DPC, 1)]
        if cap_speed >= 4:
            chain += [(0x400, EXT_CAP_ID_DLF, 1), (0x410, EXT_CAP_ID_PL_16GT, 1), (0x440, EXT_CAP_ID_LMR, 1)]
        if cap_speed >= 5:
            chain += [(0x470, EXT_CAP_ID_PL_32GT, 1)]
        w32(0x100 + 0x04, 0x01010001)  # VSEC ID=0001 Rev=1 Len=010
        w32(0x150 + 0x0C, 0x00462030)
        w32(0x2A0 + 0x04, 0x005F)  # ACS capabilities; control: SrcValid+
        w16(0x2A0 + 0x06, 0x0001)
        w32(0x370 + 0x04, 0x0000000A)
        _write_chain(ext, chain)

    for off, value in sorted((extra or {}).items()):
        chunk = bytes([value]) if isinstance(value, int) else bytes(value)
        if off < 0 or off + len(chunk) > size:
            raise ValueError("extra bytes at 0x%x (%d bytes) are outside the %d-byte image" % (off, len(chunk), size))
        buf[off:off + len(chunk)] = chunk
    return bytes(buf[:size])


def _write_chain(ext, chain):
    for index, (off, cap_id, version) in enumerate(chain):
        nxt = chain[index + 1][0] if index + 1 < len(chain) else 0
        ext(off, cap_id, version, nxt)


# -- lspci -xxx text ----------------------------------------------------------
_DUMP_LINE_RE = re.compile(r"^([0-9a-f]{2,3}):((?: [0-9a-f]{2}){16})\s*$")
_HEADER_LINE_RE = re.compile(r"^((?:[0-9A-Fa-f]{4}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+\S")


def parse_lspci_hexdump(text):
    """``lspci -x/-xxx/-xxxx`` (optionally with -v/-vv) output -> {bdf: bytes}.

    Device header lines start in column 0 (``01:00.0 VGA compatible controller: ...``);
    indented verbose lines, blank lines, ``#`` comment lines (``# source:``, ``# NOTE:``),
    command lines and separators are skipped; CRLF is accepted.  Domain-less addresses
    become ``0000:01:00.0``.  Dump lines must be contiguous from offset 0x00; a dump line
    outside a device block, a gap, or a duplicate address raises PciConfigError.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    dumps = {}
    order = []
    current = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        header = _HEADER_LINE_RE.match(line)
        if header:
            current = normalize_bdf(header.group(1))
            if current in dumps:
                raise PciConfigError("line %d: %s appears twice" % (lineno, current))
            dumps[current] = bytearray()
            order.append(current)
            continue
        dump = _DUMP_LINE_RE.match(line.strip())
        if not dump:
            continue
        if current is None:
            raise PciConfigError("line %d: hex dump line before any device line" % lineno)
        offset = int(dump.group(1), 16)
        expected = len(dumps[current])
        if offset != expected:
            raise PciConfigError("line %d: %s dump jumps to offset 0x%02x, expected 0x%02x"
                                 % (lineno, current, offset, expected))
        dumps[current].extend(int(b, 16) for b in dump.group(2).split())
    return {bdf: bytes(dumps[bdf]) for bdf in order}


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
    return _payload_code(size_bytes, "max read request size")


def _sysfs_args(sysfs_path):
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
    return _sysfs_args(sysfs_path) + ["-s", bdf, "CAP_EXP+8.w=%04x:%04x" % (value, DEVCTL_MRRS_MASK)]


def setpci_read_args(bdf, sysfs_path=None):
    """setpci argv reading Device Control (``CAP_EXP+8.w``); parse with parse_setpci_word()."""
    validate_bdf(bdf)
    return _sysfs_args(sysfs_path) + ["-s", bdf, "CAP_EXP+8.w"]


def parse_setpci_word(text):
    """setpci's answer to a ``.w`` read ("2930\\n") -> int; ValueError otherwise."""
    value = (text or "").strip()
    if not re.fullmatch(r"[0-9a-fA-F]{4}", value):
        raise ValueError("unexpected setpci output %r" % (value[:80],))
    return int(value, 16)


def devctl_mrrs(devctl):
    """Device Control word -> MRRS bytes (None for reserved codes)."""
    return _payload_size((devctl >> 12) & 0x7)


# -- sysfs scan -----------------------------------------------------------------
def _parse_int(text, base=16):
    try:
        return int(text, base)
    except (TypeError, ValueError):
        return None


def _parse_prefix(value):
    """class_prefix "03" / "0x0302" / "030200" -> lower-case hex digits."""
    text = re.sub(r"^0x", "", value.lower())
    if not re.fullmatch(r"[0-9a-f]{1,6}", text):
        raise ValueError("class_prefix must be hex digits of the 24-bit class, e.g. '03' or '0302': %r" % (value,))
    return text


def list_functions(fsroot, vendor=None, class_prefix=None, bdfs=None):
    """Scan ``/sys/bus/pci/devices/*`` under ``fsroot``; return matching functions, sorted.

    Filters: ``vendor`` (int or "0x10de"), ``class_prefix`` (hex digits of the 24-bit
    class, e.g. "03" for display controllers, "0604" for bridges), ``bdfs`` (addresses,
    domain optional).  Each entry: bdf, path (host path of the device directory the
    symlink points to), parent (the upstream bridge's address, or None at a root bus),
    vendor_id, device_id, class_code (ints from the sysfs text files), numa_node,
    current_link_speed / max_link_speed ("16GT/s" or None) with the raw text in
    *_raw, current_link_width / max_link_width (int or None), driver (basename of the
    driver link or None), config (parse_config() result, or None) and error (None, or a
    string naming the host path and the problem).  Only matching functions have their
    binary ``config`` read.  A function whose ids cannot be read is kept (with error)
    rather than silently filtered out.  Never raises for a single function's problem;
    FsError only when the devices directory itself is unreadable.
    """
    if isinstance(vendor, str):
        vendor = int(vendor, 16)
    prefix = _parse_prefix(class_prefix) if class_prefix is not None else None
    wanted = None
    if bdfs is not None:
        wanted = {normalize_bdf(b) for b in bdfs}
    result = []
    for name in fsroot.listdir(SYSFS_PCI_DEVICES):
        if not BDF_RE.fullmatch(name):
            continue
        if wanted is not None and name not in wanted:
            continue
        fn = _read_function(fsroot, name, vendor, prefix)
        if fn is not None:
            result.append(fn)
    return result


def _read_function(fsroot, bdf, vendor, prefix):
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
