"""Test-only builders of PCI configuration spaces (shipped in no module payload and onto no host).

``build_config`` writes the binary config space of a PCIe function with a chosen capability chain (the demo fleet,
the hardening corpus and the unit tests use it); ``parse_lspci_hexdump`` reads ``lspci -xxxx`` dumps of real devices
(tests/fixtures/realdata) into bytes; ``is_nvidia_gpu`` classifies a listed function.
"""
import re
import struct

from ansible.module_utils.pvetune.formats.pci_config import (
    CAP_ID_EXP,
    CAP_ID_HT,
    CAP_ID_MSI,
    CAP_ID_PM,
    CAP_ID_SSVID,
    CAP_ID_VENDOR,
    DEVCTL_FLR,
    DEVCTL_MPS_MASK,
    DEVCTL_MRRS_MASK,
    EXP_DEVCAP,
    EXP_DEVCAP2,
    EXP_DEVCTL,
    EXP_DEVCTL2,
    EXP_FLAGS,
    EXP_LNKCAP,
    EXP_LNKCAP2,
    EXP_LNKCTL,
    EXP_LNKCTL2,
    EXP_LNKSTA,
    EXP_LNKSTA2,
    EXP_RTCAP,
    EXP_RTCTL,
    EXP_SLTCAP,
    EXP_SLTSTA,
    EXT_CAP_ID_ACS,
    EXT_CAP_ID_AER,
    EXT_CAP_ID_DLF,
    EXT_CAP_ID_DPC,
    EXT_CAP_ID_L1SS,
    EXT_CAP_ID_LMR,
    EXT_CAP_ID_LTR,
    EXT_CAP_ID_PL_16GT,
    EXT_CAP_ID_PL_32GT,
    EXT_CAP_ID_PWR,
    EXT_CAP_ID_REBAR,
    EXT_CAP_ID_SECPCI,
    EXT_CAP_ID_VC,
    EXT_CAP_ID_VNDR,
    EXT_CONFIG_SIZE,
    MIN_CONFIG_SIZE,
    NVIDIA_VENDOR_ID,
    PciConfigError,
    payload_code,
    normalize_bdf,
    speed_code,
)


def is_nvidia_gpu(fn):
    """True for an NVIDIA display controller (vendor 0x10de, class 0x03xxxx).

    Works on list_functions() entries and parse_config() results (same key names).
    """
    vendor = fn.get("vendor_id")
    klass = fn.get("class_code")
    return vendor == NVIDIA_VENDOR_ID and isinstance(klass, int) and (klass >> 16) == 0x03


# -- config space builder (fixtures, demo fleet) ------------------------------
ASPM_BITS = {"disabled": 0, "L0s": 1, "L1": 2, "L0s L1": 3}


def build_config(vendor_id, device_id, class_code, mrrs=512, mps=256, devcap_mps=512,
                 lnkcap=("32GT/s", 16), lnksta=("32GT/s", 16), size=4096, header_type=0,
                 extra=None, subsystem=None, revision=0xA1, multifunction=None, pcie_type=None,
                 devctl_flags=None, buses=(0x40, 0x41, 0x41), bar1=(128 << 30, 128 << 30), acs_ctrl=0x0001,
                 switch=False, aspm="L1"):
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
      0x600 -> Secondary PCIe 0x900 -> Resizable BAR 0xbb0 (three entries as lspci -vvv shows them on RTX A6000
      and RTX 6000 Ada, tests/fixtures/realdata/lspci: BAR 0 16MB, BAR 1 from 64MB up, BAR 3 32MB; ``bar1`` =
      (current, largest supported) in bytes), then, for 16GT/s and faster
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
      ``buses`` = (primary, secondary, subordinate); ``acs_ctrl`` is the ACS Control word.
    * ``switch=True`` (with header_type=1, pcie_type 5 or 6): a PCIe switch port with the chain of the PLX PEX
      8747/8749 ports of tests/fixtures/realdata/lspci (linuxhw X11DPG-OT, N1SDP): PM 0x40 -> MSI 0x48 -> PCI
      Express 0x68 -> subsystem 0xa4; extended: serial number 0x100 -> AER 0xfb4 -> Power Budgeting 0x138 ->
      Secondary PCIe 0x10c -> VC 0x148 -> Multicast 0xe00 -> then ACS 0xf24 (downstream ports only; ACSCap all
      seven bits, as lspci shows there) or LTR 0xb00 (upstream ports) -> vendor-specific 0xb70.

    ``mrrs``/``mps``/``devcap_mps`` are bytes (128..4096); ``lnkcap``/``lnksta`` are
    (speed, width); a ``lnksta`` speed of None gives a link that is down (speed 0,
    width 0).  ``size`` truncates the image (64 = what an unprivileged sysfs read returns;
    256 = conventional space only).  ``extra`` maps offsets to bytes (or a single int
    byte) written last, to inject faults.  ``aspm`` is what LnkCtl enables: "L1" as the modelled dumps
    (the linuxhw GA102 and its root port), "disabled", "L0s" or "L0s L1".  Returns bytes.
    """
    if header_type not in (0, 1):
        raise ValueError("header_type must be 0 (endpoint) or 1 (bridge), not %r" % (header_type,))
    if not isinstance(size, int) or isinstance(size, bool) or not MIN_CONFIG_SIZE <= size <= EXT_CONFIG_SIZE:
        raise ValueError("size must be 64..4096 bytes, not %r" % (size,))
    mrrs_code = payload_code(mrrs, "mrrs")
    mps_code = payload_code(mps, "mps")
    devcap_code = payload_code(devcap_mps, "devcap_mps")
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
        w8(0x3C, 0xFF)
        w16(0x3E, 0x0012)  # SERR+ VGA16+
    if bridge and switch:
        w8(0x34, 0x40)
        w8(0x40, CAP_ID_PM)
        w8(0x41, 0x48)
        w16(0x42, 0x0003)
        w8(0x48, CAP_ID_MSI)
        w8(0x49, 0x68)
        w16(0x4A, 0x0180)
        exp = 0x68
        w8(exp, CAP_ID_EXP)
        w8(exp + 1, 0xA4)
        w8(0xA4, CAP_ID_SSVID)
        w8(0xA5, 0x00)
        w16(0xA8, subsystem[0] if subsystem else vendor_id)
        w16(0xAA, subsystem[1] if subsystem else device_id)
    elif bridge:
        w8(0x34, 0x50)
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
        lnkctl = 0x0040 | ASPM_BITS[aspm]  # ASPM L1 (as modelled), CommClk+
        lnksta_val = sta_speed | (sta_width << 4) | (1 << 12) | ((1 << 13) if sta_speed else 0)
    else:
        # ASPM L0s L1, L0s exit <512ns, L1 exit <16us, ClockPM+, ASPMOptComp+
        lnkcap_val = cap_speed | (cap_width << 4) | (3 << 10) | (3 << 12) | (4 << 15) | (1 << 18) | (1 << 22)
        lnkctl = 0x0140 | ASPM_BITS[aspm]  # ASPM L1 (as modelled), CommClk+, ClockPM+
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
        # Resizable BAR: BAR 0 16MB only (and three resizable BARs), BAR 1 64MB up to bar1[1], BAR 3 32MB only.
        cur_code, max_code = (_mb_code(b, "bar1") for b in bar1)
        w32(0xBB0 + 0x04, 1 << (4 + 4))
        w32(0xBB0 + 0x08, 0x0000 | (3 << 5) | (4 << 8))
        w32(0xBB0 + 0x0C, sum(1 << (4 + c) for c in range(6, max_code + 1)))
        w32(0xBB0 + 0x10, 0x0001 | (cur_code << 8))
        w32(0xBB0 + 0x14, 1 << (4 + 5))
        w32(0xBB0 + 0x18, 0x0003 | (5 << 8))
        _write_chain(ext, chain)
    elif switch:
        if pcie_type not in (5, 6):
            raise ValueError("a switch port is pcie_type 5 (upstream) or 6 (downstream), not %r" % (pcie_type,))
        tail = [(0xF24, EXT_CAP_ID_ACS, 1)] if pcie_type == 6 else [(0xB00, EXT_CAP_ID_LTR, 1)]
        chain = [(0x100, 0x0003, 1), (0xFB4, EXT_CAP_ID_AER, 1), (0x138, EXT_CAP_ID_PWR, 1),
                 (0x10C, EXT_CAP_ID_SECPCI, 1), (0x148, EXT_CAP_ID_VC, 1), (0xE00, 0x0012, 1)] + tail + [
                     (0xB70, EXT_CAP_ID_VNDR, 1)]
        w32(0xFB4 + 0x0C, 0x00462030)
        if pcie_type == 6:
            w16(0xF24 + 0x04, 0x007F)
            w16(0xF24 + 0x06, acs_ctrl)
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
        w16(0x2A0 + 0x04, 0x005F)  # ACS capabilities; control (default SrcValid+)
        w16(0x2A0 + 0x06, acs_ctrl)
        w32(0x370 + 0x04, 0x0000000A)
        _write_chain(ext, chain)

    for off, value in sorted((extra or {}).items()):
        chunk = bytes([value]) if isinstance(value, int) else bytes(value)
        if off < 0 or off + len(chunk) > size:
            raise ValueError("extra bytes at 0x%x (%d bytes) are outside the %d-byte image" % (off, len(chunk), size))
        buf[off:off + len(chunk)] = chunk
    return bytes(buf[:size])


def _mb_code(size_bytes, what):
    """Bytes -> n with size = 2^n MB (the Resizable BAR encoding)."""
    mb = size_bytes >> 20
    if mb < 1 or mb & (mb - 1) or size_bytes & ((1 << 20) - 1):
        raise ValueError("%s sizes must be powers of two of at least 1MB, not %r" % (what, size_bytes))
    return mb.bit_length() - 1


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
