# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI Express extended capabilities pvetune judges (ACS, Resizable BAR), the sysfs ``resource`` table, and the
masked setpci write of ACS Control.

Layouts (PCI Express Base 6.0; names as lspci prints them, pciutils ls-ecaps.c):

* Access Control Services (0x000D): ACS Capability at +4 (16 bits), ACS Control at +6 (16 bits); bit 0 Source
  Validation (SrcValid), 1 Translation Blocking (TransBlk), 2 P2P Request Redirect (ReqRedir), 3 P2P Completion
  Redirect (CmpltRedir), 4 Upstream Forwarding (UpstreamFwd), 5 P2P Egress Control (EgressCtrl), 6 Direct
  Translated P2P (DirectTrans).  Request Redirect, Completion Redirect and Egress Control send peer-to-peer
  traffic up to the root complex instead of across the switch; Source Validation only checks requester ids.
* Resizable BAR (0x0015): per resizable BAR i, a capability dword at +4+8i (bits 31:4: size 2^(n-4) MB supported)
  and a control dword at +8+8i (bits 2:0 the BAR index, 7:5 the number of resizable BARs in the first entry,
  13:8 the current size as 2^n MB, 31:16 the supported sizes from 256 TB up).
* sysfs ``resource``: one line per resource, "0x<start> 0x<end> 0x<flags>": BARs 0-5, the expansion ROM, then
  bridge windows or SR-IOV BARs; an unassigned resource is all zeros.  A 64-bit BAR uses two BAR registers: the
  line of its upper half is zeros.

Everything here is pure and never raises for bad data except through PciConfigError / ValueError with the reason.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import struct

from ansible.module_utils.pvetune.formats.pci_config import (
    EXT_CAP_ID_ACS,
    EXT_CAP_ID_REBAR,
    PciConfigError,
    validate_bdf,
    sysfs_args,
)

ACS_BITS = (("SrcValid", 0x01), ("TransBlk", 0x02), ("ReqRedir", 0x04), ("CmpltRedir", 0x08),
            ("UpstreamFwd", 0x10), ("EgressCtrl", 0x20), ("DirectTrans", 0x40))
# The bits that route peer traffic through the root complex; the fix clears these and only these.
ACS_REDIRECT_MASK = 0x04 | 0x08 | 0x20
ACS_CTRL = 0x06
REBAR_MAX_BARS = 6
MB = 1 << 20


def find_ext(info, cap_id):
    """Offset of the first extended capability ``cap_id`` in a parse_config() result, or None."""
    for cid, off in info.get("ext_capabilities") or ():
        if cid == cap_id:
            return off
    return None


def _need(data, off, length, what):
    if off + length > len(data):
        raise PciConfigError("%s at 0x%03x needs 0x%03x bytes; config space has %d"
                             % (what, off, off + length, len(data)))


def acs_flags(word):
    """ACS Capability/Control word -> "SrcValid+ TransBlk- ..." (lspci's notation)."""
    return " ".join("%s%s" % (name, "+" if word & bit else "-") for name, bit in ACS_BITS)


def parse_acs(data, info):
    """{"offset", "cap", "ctrl", "redirect" (the set redirect bits of ctrl), "cap_text", "ctrl_text"} of the ACS
    capability, or None when the function has none.  PciConfigError when it is cut off."""
    off = find_ext(info, EXT_CAP_ID_ACS)
    if off is None:
        return None
    _need(data, off, 8, "ACS capability")
    cap, ctrl = struct.unpack_from("<HH", data, off + 4)
    return {"offset": off, "cap": cap, "ctrl": ctrl, "redirect": ctrl & ACS_REDIRECT_MASK,
            "cap_text": acs_flags(cap), "ctrl_text": acs_flags(ctrl)}


def size_text(size_bytes):
    """Bytes -> "256MB" / "32GB" (lspci's units); None stays None."""
    if size_bytes is None:
        return None
    for unit, shift in (("TB", 40), ("GB", 30), ("MB", 20), ("KB", 10)):
        if size_bytes >= (1 << shift) and size_bytes % (1 << shift) == 0:
            return "%d%s" % (size_bytes >> shift, unit)
    return "%dB" % size_bytes


def parse_rebar(data, info):
    """{"offset", "bars": {index: {"current", "supported" [bytes, ascending], "max"}}} of the Resizable BAR
    capability, or None when the function has none.  PciConfigError when it is cut off or names an impossible
    number of BARs or a BAR index twice."""
    off = find_ext(info, EXT_CAP_ID_REBAR)
    if off is None:
        return None
    _need(data, off, 12, "Resizable BAR capability")
    count = (struct.unpack_from("<I", data, off + 8)[0] >> 5) & 0x7
    if not 1 <= count <= REBAR_MAX_BARS:
        raise PciConfigError("Resizable BAR capability at 0x%03x says %d resizable BARs (1-%d are possible)"
                             % (off, count, REBAR_MAX_BARS))
    _need(data, off, 4 + 8 * count, "Resizable BAR capability with %d BARs" % count)
    bars = {}
    for i in range(count):
        cap, ctrl = struct.unpack_from("<II", data, off + 4 + 8 * i)
        index = ctrl & 0x7
        if index in bars or index > 5:
            raise PciConfigError("Resizable BAR capability at 0x%03x: entry %d names BAR %d%s"
                                 % (off, i, index, " again" if index in bars else ", which does not exist"))
        supported = [MB << (bit - 4) for bit in range(4, 32) if cap & (1 << bit)]
        supported += [MB << (bit - 16 + 28) for bit in range(16, 32) if ctrl & (1 << bit)]
        bars[index] = {"current": MB << ((ctrl >> 8) & 0x3F), "supported": supported,
                       "max": max(supported) if supported else None}
    return {"offset": off, "bars": bars}


_RESOURCE_LINE = re.compile(r"0x([0-9a-fA-F]{1,16}) 0x([0-9a-fA-F]{1,16}) 0x([0-9a-fA-F]{1,16})\Z")


def parse_resource(text):
    """sysfs ``resource`` -> [{"start", "end", "flags", "size"}] (size 0 for an unassigned line).  ValueError
    naming the line when one is not three hex numbers, or ends before it starts."""
    out = []
    for num, line in enumerate((text or "").splitlines(), 1):
        match = _RESOURCE_LINE.match(line.strip())
        if not match:
            raise ValueError("line %d is not '0x<start> 0x<end> 0x<flags>': %r" % (num, line[:60]))
        start, end, flags = (int(g, 16) for g in match.groups())
        if end < start and (start or end):
            raise ValueError("line %d ends (0x%x) before it starts (0x%x)" % (num, end, start))
        out.append({"start": start, "end": end, "flags": flags, "size": end - start + 1 if end else 0})
    return out


def setpci_acs_args(bdf, clear_mask=ACS_REDIRECT_MASK, sysfs_path=None):
    """setpci argv (without the program) clearing ``clear_mask`` in ACS Control with a masked write
    (``ECAP_ACS+6.w=0000:<mask>``): no other ACS Control bit changes."""
    validate_bdf(bdf)
    if not isinstance(clear_mask, int) or isinstance(clear_mask, bool) or clear_mask & ~0x7F or not clear_mask:
        raise ValueError("ACS Control mask must be a non-zero value within 0x007f, not %r" % (clear_mask,))
    return sysfs_args(sysfs_path) + ["-s", bdf, "ECAP_ACS+%x.w=0000:%04x" % (ACS_CTRL, clear_mask)]


def setpci_acs_restore_args(bdf, value, mask, sysfs_path=None):
    """setpci argv writing ``value`` into the ``mask`` bits of ACS Control (rollback and the boot unit)."""
    validate_bdf(bdf)
    for what, word in (("value", value), ("mask", mask)):
        if not isinstance(word, int) or isinstance(word, bool) or word & ~0x7F:
            raise ValueError("ACS Control %s must be within 0x007f, not %r" % (what, word))
    return sysfs_args(sysfs_path) + ["-s", bdf, "ECAP_ACS+%x.w=%04x:%04x" % (ACS_CTRL, value & mask, mask)]


def setpci_acs_read_args(bdf, sysfs_path=None):
    """setpci argv reading ACS Control (``ECAP_ACS+6.w``)."""
    validate_bdf(bdf)
    return sysfs_args(sysfs_path) + ["-s", bdf, "ECAP_ACS+%x.w" % ACS_CTRL]
