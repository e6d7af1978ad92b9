"""The PCI reader (module_utils/pvetune/concerns/pcie/checks.py list_functions, formats/pci_config.py).

Real data: tests/fixtures/realdata/lspci_xxx/*.txt (sources in tests/fixtures/realdata/SOURCES.md).
pciutils (lspci/setpci) are only ever run with ``-A linux-sysfs -O sysfs.path=<tmp tree>``;
``run_pciutils`` refuses anything else.
"""
import os
import re
import shutil
import struct
import subprocess

import pytest
from ansible.module_utils.pvetune.concerns.pcie.checks import list_functions
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.formats.pci_config import (
    PciConfigError,
    devctl_mrrs,
    mrrs_encoding,
    normalize_bdf,
    normalize_speed,
    parse_config,
    parse_setpci_word,
    setpci_mrrs_args,
    setpci_read_args,
    speed_code,
    sysfs_path_for_root,
    validate_bdf,
)
from pcibuild import build_config, is_nvidia_gpu, parse_lspci_hexdump

HERE = os.path.dirname(os.path.abspath(__file__))
REALDATA = os.path.join(os.path.dirname(HERE), "fixtures", "realdata", "lspci_xxx")
ELER = "eler_4x_gtx1080ti_plx_lspci_v_xxx.txt"
DUANEYA = "duaneya_4x_tu102_lspci_v_xxx.txt"
MARWANK = "marwank270_quadro_k2200_lspci_v_xxx.txt"

BLACKWELL = {"vendor_id": 0x10DE, "device_id": 0x2BB5, "class_code": 0x030200}


def real_dumps(name):
    with open(os.path.join(REALDATA, name), "r") as handle:
        return parse_lspci_hexdump(handle.read())


def all_real_functions():
    out = []
    for name in (ELER, DUANEYA, MARWANK):
        for bdf, data in real_dumps(name).items():
            out.append(pytest.param(name, bdf, data, id="%s-%s" % (name.split("_")[0], bdf)))
    return out


def u16(data, off):
    return struct.unpack_from("<H", data, off)[0]


def format_hexdump(bdf, data, title="3D controller: NVIDIA Corporation Device 2bb5 (rev a1)"):
    """lspci -xxx/-xxxx style text for a config space (offsets of 2 or 3 hex digits)."""
    lines = ["%s %s" % (bdf, title)]
    width = 3 if len(data) > 256 else 2
    for off in range(0, len(data), 16):
        lines.append("%0*x: %s" % (width, off, " ".join("%02x" % b for b in data[off:off + 16])))
    return "\n".join(lines) + "\n\n"


# -- sysfs trees ------------------------------------------------------------------
def add_function(root, bdf, config, parent="0000:40:01.1", vendor=None, device=None, class_code=None,
                 driver="nvidia", numa="0", link=("32.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16"),
                 symlink=True, skip=()):
    """Create a function like the kernel does: a directory under /sys/devices and a
    /sys/bus/pci/devices/<bdf> symlink to it.  Files: what pciutils' linux-sysfs backend
    needs (config, vendor, device, class, irq, resource) plus what list_functions reads."""
    cfg = parse_config(config) if len(config) > 64 else None
    vendor = vendor if vendor is not None else (cfg["vendor_id"] if cfg else struct.unpack_from("<H", config, 0)[0])
    device = device if device is not None else struct.unpack_from("<H", config, 2)[0]
    if class_code is None:
        class_code = (config[0x0B] << 16) | (config[0x0A] << 8) | config[0x09]
    domain, bus = bdf.split(":")[0:2]
    if parent:
        pdomain, pbus = parent.split(":")[0:2]
        rel = os.path.join("devices", "pci%s:%s" % (pdomain, pbus), parent, bdf)
    else:
        rel = os.path.join("devices", "pci%s:%s" % (domain, bus), bdf)
    devdir = os.path.join(str(root), "sys", rel)
    os.makedirs(devdir)
    files = {
        "vendor": "0x%04x\n" % vendor,
        "device": "0x%04x\n" % device,
        "class": "0x%06x\n" % class_code,
        "irq": "0\n",
        "resource": "",
        "numa_node": None if numa is None else numa + "\n",
        "current_link_speed": link[0] + "\n" if link else None,
        "current_link_width": link[1] + "\n" if link else None,
        "max_link_speed": link[2] + "\n" if link else None,
        "max_link_width": link[3] + "\n" if link else None,
    }
    for name, text in files.items():
        if text is not None and name not in skip:
            with open(os.path.join(devdir, name), "w") as handle:
                handle.write(text)
    if "config" not in skip:
        with open(os.path.join(devdir, "config"), "wb") as handle:
            handle.write(config)
    if driver:
        drvdir = os.path.join(str(root), "sys", "bus", "pci", "drivers", driver)
        if not os.path.isdir(drvdir):
            os.makedirs(drvdir)
        depth = rel.count(os.sep) + 1
        os.symlink("../" * depth + "bus/pci/drivers/" + driver, os.path.join(devdir, "driver"))
    busdir = os.path.join(str(root), "sys", "bus", "pci", "devices")
    if not os.path.isdir(busdir):
        os.makedirs(busdir)
    link_path = os.path.join(busdir, bdf)
    if symlink:
        os.symlink("../../../" + rel, link_path)
    else:
        os.rename(devdir, link_path)
    return os.path.join(busdir, bdf, "config")


def sysfs_path(root):
    return os.path.join(str(root), "sys", "bus", "pci")


# -- pciutils, confined to the tree ---------------------------------------------------
LSPCI = shutil.which("lspci")
SETPCI = shutil.which("setpci")


def _has_sysfs_method(binary):
    if not binary:
        return False
    proc = subprocess.run([binary, "-A", "help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)
    return "linux-sysfs" in proc.stdout


needs_lspci = pytest.mark.skipif(not _has_sysfs_method(LSPCI),
                                 reason="lspci (pciutils) with the linux-sysfs method is not installed")
needs_setpci = pytest.mark.skipif(not _has_sysfs_method(SETPCI),
                                  reason="setpci (pciutils) with the linux-sysfs method is not installed")


def run_pciutils(binary, args, tree):
    """Run lspci/setpci on the test tree only; refuse any argv that could reach /sys."""
    tree = os.path.realpath(str(tree))
    assert args[:3] == ["-A", "linux-sysfs", "-O"], args
    assert args[3].startswith("sysfs.path=")
    target = os.path.realpath(args[3][len("sysfs.path="):])
    assert target.startswith(tree + os.sep) and os.path.isdir(target), target
    assert "-A" not in args[4:] and not any(a.startswith("sysfs.path") for a in args[4:])
    env = dict(os.environ, LC_ALL="C")
    return subprocess.run([binary, *args], capture_output=True, text=True, env=env, check=False, timeout=30)


def lspci_decode(tree, bdf):
    proc = run_pciutils(LSPCI, ["-A", "linux-sysfs", "-O", "sysfs.path=" + sysfs_path(tree), "-vv", "-s", bdf],
                        tree)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out, proc.stderr
    dec = {"caps": [int(x, 16) for x in re.findall(r"Capabilities: \[([0-9a-f]{2})\]", out)],
           "ext_caps": [int(x, 16) for x in re.findall(r"Capabilities: \[([0-9a-f]{3}) v\d+\]", out)]}
    m = re.search(r"DevCap:\s+MaxPayload (\d+) bytes", out)
    dec["devcap_mps"] = int(m.group(1)) if m else None
    m = re.search(r"^\s+MaxPayload (\d+) bytes, MaxReadReq (\d+) bytes$", out, re.MULTILINE)
    dec["mps"], dec["mrrs"] = (int(m.group(1)), int(m.group(2))) if m else (None, None)
    m = re.search(r"LnkCap:\s+Port #\d+, Speed ([0-9.]+GT/s), Width x(\d+)", out)
    dec["lnkcap"] = (m.group(1), int(m.group(2))) if m else None
    m = re.search(r"LnkSta:\s+Speed ([0-9.]+GT/s)(?: \((?:ok|downgraded|overdriven)\))?, Width x(\d+)", out)
    dec["lnksta"] = (m.group(1), int(m.group(2))) if m else None
    m = re.search(r"Express \(v(\d)\) ([A-Za-z /-]+?)(?: \(Slot[+-]\))?, MSI", out)
    dec["pcie"] = (int(m.group(1)), m.group(2)) if m else None
    return dec


def assert_lspci_agrees(tree, bdf, data):
    cfg = parse_config(data)
    dec = lspci_decode(tree, bdf)
    assert dec["caps"] == [off for _, off in cfg["capabilities"]]
    if cfg["ext_capabilities"] is not None:
        assert dec["ext_caps"] == [off for _, off in cfg["ext_capabilities"]]
    else:
        assert dec["ext_caps"] == []
    assert dec["pcie"] == (cfg["pcie_version"], cfg["pcie_type_name"])
    assert dec["devcap_mps"] == cfg["devcap_mps"]
    assert (dec["mps"], dec["mrrs"]) == (cfg["mps"], cfg["mrrs"])
    assert dec["lnkcap"] == (cfg["lnkcap_speed"], cfg["lnkcap_width"])
    assert dec["lnksta"] == (cfg["lnksta_speed"], cfg["lnksta_width"])
    return cfg, dec


# =============================================================================
# parse_config on built configs
# =============================================================================
def test_blackwell_default_config_layout():
    data = build_config(**BLACKWELL)
    assert len(data) == 4096
    cfg = parse_config(data)
    assert (cfg["vendor_id"], cfg["device_id"], cfg["class_code"]) == (0x10DE, 0x2BB5, 0x030200)
    assert cfg["header_type"] == 0 and cfg["multifunction"] is False
    assert cfg["status"] & 0x10
    assert cfg["capabilities"] == [(0x01, 0x60), (0x05, 0x68), (0x10, 0x78), (0x09, 0xB4)]
    assert cfg["ext_capabilities"] == [
        (0x0002, 0x100), (0x0018, 0x250), (0x001E, 0x258), (0x0004, 0x128), (0x0001, 0x420),
        (0x000B, 0x600), (0x0019, 0x900), (0x0015, 0xBB0), (0x0026, 0xC1C), (0x0027, 0xD00),
        (0x0025, 0xE00), (0x002A, 0xE10)]
    assert cfg["ext_error"] is None
    assert cfg["cap_exp"] == 0x78
    assert (cfg["pcie_version"], cfg["pcie_type"], cfg["pcie_type_name"]) == (2, 0, "Endpoint")
    assert (cfg["devcap_mps"], cfg["mps"], cfg["mrrs"]) == (512, 256, 512)
    assert cfg["flr_capable"] is True
    # CorrErr+ NonFatalErr+ FatalErr+ RlxdOrd+ ExtTag+, MPS 256 (1<<5), MRRS 512 (2<<12), bit 15 clear
    assert cfg["devctl"] == 0x2137
    assert (cfg["lnkcap_speed"], cfg["lnkcap_width"], cfg["lnksta_speed"], cfg["lnksta_width"]) == \
        ("32GT/s", 16, "32GT/s", 16)
    assert is_nvidia_gpu(cfg)


@pytest.mark.parametrize("mrrs", [128, 256, 512, 1024, 2048, 4096])
@pytest.mark.parametrize("mps", [128, 256])
def test_builder_round_trips_payload_sizes(mrrs, mps):
    cfg = parse_config(build_config(mrrs=mrrs, mps=mps, devcap_mps=256, **BLACKWELL))
    assert (cfg["mrrs"], cfg["mps"], cfg["devcap_mps"]) == (mrrs, mps, 256)
    assert cfg["devctl"] & 0x8000 == 0
    assert cfg["devctl"] & ~0x70E0 == 0x0117


@pytest.mark.parametrize("cap,sta", [
    (("2.5GT/s", 1), ("2.5GT/s", 1)),
    (("8GT/s", 16), ("2.5GT/s", 16)),
    (("16GT/s", 16), ("8GT/s", 8)),
    (("32GT/s", 16), ("2.5GT/s", 16)),
    (("64GT/s", 16), ("64GT/s", 16)),
])
def test_builder_round_trips_link(cap, sta):
    cfg = parse_config(build_config(lnkcap=cap, lnksta=sta, **BLACKWELL))
    assert (cfg["lnkcap_speed"], cfg["lnkcap_width"]) == cap
    assert (cfg["lnksta_speed"], cfg["lnksta_width"]) == sta


def test_builder_link_down_and_slower_gens_drop_gen4_capabilities():
    cfg = parse_config(build_config(lnkcap=("8GT/s", 16), lnksta=(None, 0), **BLACKWELL))
    assert (cfg["lnksta_speed"], cfg["lnksta_width"]) == (None, 0)
    ids = [cid for cid, _ in cfg["ext_capabilities"]]
    assert 0x26 not in ids and 0x2A not in ids and ids[-1] == 0x15


def test_builder_vga_gpu_is_legacy_endpoint_and_multifunction():
    cfg = parse_config(build_config(0x10DE, 0x2684, 0x030000, lnkcap=("16GT/s", 16), lnksta=("16GT/s", 16)))
    assert cfg["pcie_type_name"] == "Legacy Endpoint"
    assert cfg["multifunction"] is True
    assert is_nvidia_gpu(cfg)


def test_builder_audio_function():
    cfg = parse_config(build_config(0x10DE, 0x22E8, 0x040300, mps=256, devcap_mps=256))
    assert cfg["capabilities"] == [(0x01, 0x60), (0x05, 0x68), (0x10, 0x78)]
    assert cfg["ext_capabilities"] == [(0x0001, 0x100)]
    assert cfg["pcie_type_name"] == "Endpoint" and cfg["multifunction"] is True
    assert cfg["flr_capable"] is False
    assert not is_nvidia_gpu(cfg)


def test_builder_bridge_root_port():
    cfg = parse_config(build_config(0x1022, 0x1483, 0x060400, header_type=1, mrrs=512, mps=256,
                                    lnkcap=("16GT/s", 16), lnksta=("2.5GT/s", 16), buses=(0x40, 0x41, 0x41)))
    assert cfg["header_type"] == 1 and cfg["class_code"] == 0x060400
    assert cfg["subsystem_vendor_id"] is None
    assert cfg["capabilities"] == [(0x01, 0x50), (0x10, 0x58), (0x05, 0xA0), (0x0D, 0xC0), (0x08, 0xC8)]
    assert cfg["pcie_type_name"] == "Root Port"
    assert (cfg["mrrs"], cfg["mps"], cfg["devcap_mps"]) == (512, 256, 512)
    assert [cid for cid, _ in cfg["ext_capabilities"]] == [0x0B, 0x01, 0x19, 0x0D, 0x1E, 0x1D, 0x25, 0x26, 0x27]
    data = build_config(0x1022, 0x1483, 0x060400, header_type=1, buses=(0x40, 0x41, 0x41))
    assert data[0x18:0x1B] == b"\x40\x41\x41"
    switch = parse_config(build_config(0x1000, 0xC030, 0x060400, header_type=1, pcie_type=5))
    assert switch["pcie_type_name"] == "Upstream Port"


def test_builder_sizes_and_extra():
    assert len(build_config(size=256, **BLACKWELL)) == 256
    assert parse_config(build_config(size=256, **BLACKWELL))["ext_capabilities"] is None
    data = build_config(extra={0x2C: b"\x3c\x10", 0x2E: 0x99}, **BLACKWELL)
    assert data[0x2C:0x2F] == b"\x3c\x10\x99"
    full = build_config(**BLACKWELL)
    assert build_config(size=64, **BLACKWELL) == full[:64]


@pytest.mark.parametrize("kwargs,match", [
    ({"mrrs": 8192}, "mrrs"),
    ({"mrrs": 500}, "mrrs"),
    ({"mps": 512, "devcap_mps": 256}, "exceeds"),
    ({"lnkcap": ("20GT/s", 16)}, "unknown PCIe link speed"),
    ({"lnkcap": ("16GT/s", 33)}, "width"),
    ({"size": 32}, "size"),
    ({"size": 5000}, "size"),
    ({"header_type": 2}, "header_type"),
    ({"devctl_flags": 0x8000}, "bit 15"),
    ({"extra": {4095: b"\x00\x00"}}, "outside"),
])
def test_builder_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        build_config(**dict(BLACKWELL, **kwargs))


# =============================================================================
# parse_config on real dumps
# =============================================================================
# Independent expectations: tests/fixtures/realdata/SOURCES.md (INDEX.md) and the dumps' own -v text.
REAL_GPUS = {
    (ELER, "0000:04:00.0"): (0x1B06, 0x2930, 256, 512, ("8GT/s", 16), ("8GT/s", 16)),
    (ELER, "0000:05:00.0"): (0x1B06, 0x2930, 256, 512, ("8GT/s", 16), ("5GT/s", 16)),
    (ELER, "0000:08:00.0"): (0x1B06, 0x2930, 256, 512, ("8GT/s", 16), ("2.5GT/s", 16)),
    (ELER, "0000:09:00.0"): (0x1B06, 0x2930, 256, 512, ("8GT/s", 16), ("2.5GT/s", 16)),
    (DUANEYA, "0000:02:00.0"): (0x1E07, 0x2910, 128, 512, ("8GT/s", 16), ("8GT/s", 16)),
    (DUANEYA, "0000:03:00.0"): (0x1E07, 0x2910, 128, 512, ("8GT/s", 16), ("2.5GT/s", 16)),
    (DUANEYA, "0000:83:00.0"): (0x1E07, 0x2910, 128, 512, ("8GT/s", 16), ("8GT/s", 16)),
    (DUANEYA, "0000:84:00.0"): (0x1E07, 0x2910, 128, 512, ("8GT/s", 16), ("8GT/s", 16)),
    (MARWANK, "0000:01:00.0"): (0x13BA, 0x2130, 256, 512, ("5GT/s", 16), ("2.5GT/s", 16)),
}


@pytest.mark.parametrize("name,bdf", sorted(REAL_GPUS), ids=lambda v: v.split("_")[0])
def test_real_gpu_dumps(name, bdf):
    device, devctl, mps, mrrs, lnkcap, lnksta = REAL_GPUS[(name, bdf)]
    data = real_dumps(name)[bdf]
    assert len(data) == 256
    cfg = parse_config(data)
    assert (cfg["vendor_id"], cfg["device_id"], cfg["class_code"]) == (0x10DE, device, 0x030000)
    # On these pre-Ampere chips the vendor-specific capability at 0xb4 is present but not linked.
    assert cfg["capabilities"] == [(0x01, 0x60), (0x05, 0x68), (0x10, 0x78)]
    assert cfg["ext_capabilities"] is None
    assert cfg["pcie_type_name"] == "Legacy Endpoint" and cfg["pcie_version"] == 2
    assert (cfg["devctl"], cfg["mps"], cfg["mrrs"]) == (devctl, mps, mrrs)
    assert cfg["devcap_mps"] == 256
    assert (cfg["lnkcap_speed"], cfg["lnkcap_width"]) == lnkcap
    assert (cfg["lnksta_speed"], cfg["lnksta_width"]) == lnksta
    assert is_nvidia_gpu(cfg)


def test_real_dump_function_sets():
    assert sorted(real_dumps(ELER)) == ["0000:04:00.0", "0000:04:00.1", "0000:05:00.0", "0000:05:00.1",
                                        "0000:08:00.0", "0000:08:00.1", "0000:09:00.0", "0000:09:00.1"]
    duaneya = real_dumps(DUANEYA)
    assert len(duaneya) == 16
    usb = parse_config(duaneya["0000:02:00.2"])
    # USB/UCSI functions: PM sits after the PCIe capability, at 0xb4
    assert usb["capabilities"] == [(0x05, 0x68), (0x10, 0x78), (0x01, 0xB4)]
    assert usb["class_code"] == 0x0C0330 and not is_nvidia_gpu(usb)
    audio = parse_config(real_dumps(MARWANK)["0000:01:00.1"])
    assert (audio["class_code"], audio["devctl"], audio["mps"], audio["mrrs"]) == (0x040300, 0x2920, 256, 512)
    assert not is_nvidia_gpu(audio)


# =============================================================================
# parse_config errors
# =============================================================================
def _with_caps(base, patches):
    data = bytearray(base)
    for off, value in patches.items():
        data[off] = value
    return bytes(data)


def test_short_config_below_64_bytes():
    with pytest.raises(PciConfigError, match=r"^config space is 63 bytes; the standard header alone needs 64$"):
        parse_config(build_config(**BLACKWELL)[:63])
    with pytest.raises(PciConfigError, match="is 0 bytes"):
        parse_config(b"")


def test_64_byte_config_says_read_as_root():
    with pytest.raises(PciConfigError) as err:
        parse_config(build_config(size=64, **BLACKWELL))
    msg = str(err.value)
    assert "config space is 64 bytes" in msg and "unprivileged" in msg and "as root" in msg
    assert "capability list starts at 0x60" in msg


def test_64_bytes_without_capability_list_parses():
    data = _with_caps(build_config(size=64, **BLACKWELL), {0x06: 0x00})
    cfg = parse_config(data)
    assert cfg["capabilities"] == [] and cfg["cap_exp"] is None and cfg["mrrs"] is None


def test_200_bytes_cuts_the_pcie_capability():
    # Move the PCI Express capability to 0xc0 (MSI -> 0xc0); 200 bytes end at 0xc8 < 0xc0 + 0x14.
    full = bytearray(build_config(**BLACKWELL))
    full[0xC0:0xC0 + 0x3C] = full[0x78:0x78 + 0x3C]
    full[0x69] = 0xC0
    full[0xC1] = 0x00
    assert parse_config(bytes(full))["cap_exp"] == 0xC0
    with pytest.raises(PciConfigError, match=r"^config space is 200 bytes; the PCI Express capability at 0xc0 needs "
                                             r"0xd4$"):
        parse_config(bytes(full[:200]))


def test_cap_pointer_beyond_short_data():
    data = build_config(size=128, **BLACKWELL)  # the chain reaches 0x78, which needs 0x8c
    with pytest.raises(PciConfigError, match=r"^config space is 128 bytes; the PCI Express capability at 0x78 "
                                             r"needs 0x8c$"):
        parse_config(data)
    data = build_config(size=100, **BLACKWELL)
    with pytest.raises(PciConfigError, match=r"^capability pointer at 0x61 is 0x68, outside the 100 bytes of "
                                             r"config space$"):
        parse_config(data)
    data = build_config(size=0x78 + 1, **BLACKWELL)
    with pytest.raises(PciConfigError, match=r"capability pointer at 0x69 is 0x78, outside the 121 bytes"):
        parse_config(data)


def test_capability_list_loop():
    data = _with_caps(build_config(**BLACKWELL), {0xB5: 0x68})
    with pytest.raises(PciConfigError, match=r"^capability list loops at 0x68$"):
        parse_config(data)
    self_loop = _with_caps(build_config(**BLACKWELL), {0x61: 0x60})
    with pytest.raises(PciConfigError, match="loops at 0x60"):
        parse_config(self_loop)


def test_capability_pointer_low_bits_are_masked():
    data = _with_caps(build_config(**BLACKWELL), {0x34: 0x63, 0x61: 0x6B})
    assert [off for _, off in parse_config(data)["capabilities"]] == [0x60, 0x68, 0x78, 0xB4]


def test_capability_pointer_into_header():
    data = _with_caps(build_config(**BLACKWELL), {0x69: 0x20})
    with pytest.raises(PciConfigError, match=r"pointer at 0x69 is 0x20, inside the standard header"):
        parse_config(data)


def test_no_pcie_capability():
    # status says no list
    cfg = parse_config(_with_caps(build_config(**BLACKWELL), {0x06: 0x00}))
    assert cfg["capabilities"] == [] and cfg["cap_exp"] is None
    # list without id 0x10 (MSI -> end)
    cfg = parse_config(_with_caps(build_config(**BLACKWELL), {0x69: 0x00}))
    assert cfg["capabilities"] == [(0x01, 0x60), (0x05, 0x68)]
    for key in ("cap_exp", "devctl", "mps", "mrrs", "devcap_mps", "lnkcap_speed", "lnksta_width"):
        assert cfg[key] is None


def test_non_nvidia_function():
    cfg = parse_config(build_config(0x1002, 0x74A1, 0x038000, lnkcap=("32GT/s", 16)))
    assert cfg["vendor_id"] == 0x1002 and cfg["mrrs"] == 512
    assert not is_nvidia_gpu(cfg)
    assert not is_nvidia_gpu({"vendor_id": 0x10DE, "class_code": None})
    assert not is_nvidia_gpu({})


@pytest.mark.parametrize("fill", [b"\xff", b"\x00"])
def test_function_that_does_not_answer(fill):
    with pytest.raises(PciConfigError, match="did not answer"):
        parse_config(fill * 4096)


def test_reserved_payload_codes_are_none():
    data = bytearray(build_config(**BLACKWELL))
    struct.pack_into("<H", data, 0x78 + 8, 0x70E0)  # MRRS code 7, MPS code 7
    cfg = parse_config(bytes(data))
    assert cfg["mrrs"] is None and cfg["mps"] is None and cfg["devctl"] == 0x70E0


def test_parse_rejects_non_bytes():
    with pytest.raises(TypeError):
        parse_config("00 11 22")
    assert parse_config(bytearray(build_config(**BLACKWELL)))["mrrs"] == 512


def test_extended_list_problems_do_not_raise():
    data = bytearray(build_config(**BLACKWELL))
    struct.pack_into("<I", data, 0xE10, 0x1000002A)  # PL32 -> 0x100: back to the first entry
    cfg = parse_config(bytes(data))
    assert cfg["ext_error"] == "extended capability list loops at 0x100" and cfg["mrrs"] == 512
    struct.pack_into("<I", data, 0xE10, 0x0C00002A)  # -> 0x0c0
    assert "points to 0x0c0, inside the first 256 bytes" in parse_config(bytes(data))["ext_error"]
    empty = bytearray(build_config(**BLACKWELL))
    empty[0x100:0x104] = b"\x00\x00\x00\x00"
    cfg = parse_config(bytes(empty))
    assert cfg["ext_capabilities"] == [] and cfg["ext_error"] is None
    struct.pack_into("<I", data, 0xE10, 0xFFC1002A)  # -> 0xffc, which reads all ones: a dead entry
    struct.pack_into("<I", data, 0xFFC, 0xFFFFFFFF)
    assert parse_config(bytes(data))["ext_error"] == "extended capability at 0xffc reads 0xffffffff"


def test_a_next_pointer_to_an_all_zero_header_ends_the_list():
    """As the kernel (pci_find_next_ext_capability) and lspci (show_ext_caps) read it: the end, not an error, so
    the capabilities before it (Resizable BAR among them) are still judged."""
    whole = parse_config(build_config(**BLACKWELL))
    data = bytearray(build_config(**BLACKWELL))
    assert data[0xF00:0xF04] == b"\x00\x00\x00\x00"
    struct.pack_into("<I", data, 0xE10, 0xF001002A)  # the last entry (PL32) points to 0xf00, all zero
    cfg = parse_config(bytes(data))
    assert cfg["ext_error"] is None
    assert cfg["ext_capabilities"] == whole["ext_capabilities"]
    assert 0x15 in [cid for cid, _ in cfg["ext_capabilities"]]  # Resizable BAR


# =============================================================================
# lspci hexdump text
# =============================================================================
def test_hexdump_round_trip_4096_and_domain():
    data = build_config(**BLACKWELL)
    text = "# source: generated\n" + format_hexdump("0000:41:00.0", data)
    assert "ff0: " in text and "100: " in text
    assert parse_lspci_hexdump(text) == {"0000:41:00.0": data}


def test_hexdump_crlf_comments_and_verbose_lines():
    with open(os.path.join(REALDATA, MARWANK), "r") as handle:
        text = handle.read()
    crlf = "# NOTE: converted to CRLF\r\n" + text.replace("\n", "\r\n")
    assert parse_lspci_hexdump(crlf) == parse_lspci_hexdump(text)
    assert sorted(parse_lspci_hexdump(text)) == ["0000:01:00.0", "0000:01:00.1"]
    assert parse_lspci_hexdump(text.encode("ascii")) == parse_lspci_hexdump(text)


def test_hexdump_short_dump_and_uppercase_header():
    text = "41:00.0 3D controller: NVIDIA\n" + "\n".join(format_hexdump("x", bytes(range(64))).splitlines()[1:])
    assert parse_lspci_hexdump(text) == {"0000:41:00.0": bytes(range(64))}
    text = "0000:C1:00.0 VGA\n00: " + " ".join(["00"] * 16)
    assert list(parse_lspci_hexdump(text)) == ["0000:c1:00.0"]


@pytest.mark.parametrize("text,match", [
    ("00: " + " ".join(["de"] * 16) + "\n", "before any device line"),
    ("01:00.0 VGA\n00: " + " ".join(["00"] * 16) + "\n20: " + " ".join(["00"] * 16),
     "jumps to offset 0x20, expected 0x10"),
    ("01:00.0 VGA\n\n0000:01:00.0 VGA\n", "0000:01:00.0 appears twice"),
])
def test_hexdump_errors(text, match):
    with pytest.raises(PciConfigError, match=match):
        parse_lspci_hexdump(text)


def test_hexdump_ignores_non_dump_lines():
    text = ("/usr/bin/lspci -d \"10de:*\" -v -xxx\n\n____________\n01:00.0 VGA compatible controller: X\n"
            "\tCapabilities: [60] Power Management version 3\n"
            "00: de 10 06 1b 07 00 10 00 a1 00 00 03 00 00 80 00\n")
    assert parse_lspci_hexdump(text)["0000:01:00.0"][:2] == b"\xde\x10"


# =============================================================================
# addresses, setpci argv
# =============================================================================
@pytest.mark.parametrize("bdf", ["0000:41:00.0", "0000:00:00.0", "ffff:ff:1f.7", "0001:c1:00.1"])
def test_validate_bdf_accepts(bdf):
    assert validate_bdf(bdf) == bdf


@pytest.mark.parametrize("bad", [
    "41:00.0", "0000:41:00.0\n", "\n0000:41:00.0", "0000:41:00.0 ", " 0000:41:00.0", "0000:41:00.8",
    "0000:41:0.0", "0000:41:00.00", "0000:41:00.0;reboot", "0000:41:00.0 && rm -rf /", "$(reboot)",
    "`reboot`", "0000:41:00.0|sh", "--foo", "-s", "0000:41:00.0\x00", "0000:4G:00.0", "0000:C1:00.0",
    "0000:41:00.0" * 100, "", "0000:41:00.0,CAP_EXP+8.w=ffff", "０000:41:00.0", "0000:41:00.0\r",
    "0000:41:00.0\t", "0000 41 00 0", "0000:41:00:0",
])
def test_validate_bdf_rejects_injection(bad):
    with pytest.raises(ValueError):
        validate_bdf(bad)
    with pytest.raises(ValueError):
        setpci_mrrs_args(bad, 4096)
    with pytest.raises(ValueError):
        setpci_read_args(bad)


@pytest.mark.parametrize("bad", [None, 0x4100, b"0000:41:00.0", ["0000:41:00.0"]])
def test_validate_bdf_rejects_non_strings(bad):
    with pytest.raises(ValueError):
        validate_bdf(bad)


def test_normalize_bdf():
    assert normalize_bdf("41:00.0") == "0000:41:00.0"
    assert normalize_bdf("0000:C1:00.1") == "0000:c1:00.1"
    for bad in ("41:00.0\n", "41:00.0;x", "1:00.0", "000:41:00.0", "41:00.9"):
        with pytest.raises(ValueError):
            normalize_bdf(bad)


@pytest.mark.parametrize("size,code", [(128, 0), (256, 1), (512, 2), (1024, 3), (2048, 4), (4096, 5)])
def test_mrrs_encoding(size, code):
    assert mrrs_encoding(size) == code
    assert devctl_mrrs(code << 12) == size


@pytest.mark.parametrize("bad", [0, 64, 100, 500, 513, 3000, 8192, -512, True, "512", 512.0, None])
def test_mrrs_encoding_rejects(bad):
    with pytest.raises(ValueError):
        mrrs_encoding(bad)


def test_setpci_args():
    assert setpci_mrrs_args("0000:41:00.0", 4096) == ["-s", "0000:41:00.0", "CAP_EXP+8.w=5000:7000"]
    assert setpci_mrrs_args("0000:41:00.0", 512) == ["-s", "0000:41:00.0", "CAP_EXP+8.w=2000:7000"]
    assert setpci_mrrs_args("0000:41:00.0", 4096, "/srv/snap/sys/bus/pci") == [
        "-A", "linux-sysfs", "-O", "sysfs.path=/srv/snap/sys/bus/pci", "-s", "0000:41:00.0", "CAP_EXP+8.w=5000:7000"]
    assert setpci_read_args("0000:41:00.0") == ["-s", "0000:41:00.0", "CAP_EXP+8.w"]
    assert setpci_read_args("0000:41:00.0", "/t/sys/bus/pci")[:4] == [
        "-A", "linux-sysfs", "-O", "sysfs.path=/t/sys/bus/pci"]
    for args in (setpci_mrrs_args("0000:41:00.0", 4096), setpci_mrrs_args("0000:41:00.0", 128)):
        value, mask = args[-1].split("=")[1].split(":")
        assert int(mask, 16) == 0x7000 and int(value, 16) & ~0x7000 == 0


@pytest.mark.parametrize("bad", ["relative/sys/bus/pci", "/t\n-A", "/t\x00", "", 5])
def test_setpci_args_reject_bad_sysfs_path(bad):
    with pytest.raises(ValueError):
        setpci_mrrs_args("0000:41:00.0", 4096, bad)


def test_sysfs_path_for_root_and_parse_setpci_word():
    assert sysfs_path_for_root("/") is None
    assert sysfs_path_for_root("/srv/snap") == "/srv/snap/sys/bus/pci"
    assert parse_setpci_word("2930\n") == 0x2930
    for bad in ("", "29300", "zz", "setpci: Warning"):
        with pytest.raises(ValueError):
            parse_setpci_word(bad)


def test_speed_helpers():
    assert normalize_speed("16.0 GT/s PCIe") == "16GT/s"
    assert normalize_speed("8 GT/s") == "8GT/s"
    assert normalize_speed("2.5 GT/s PCIe") == "2.5GT/s"
    assert normalize_speed("5.0 GT/s") == "5GT/s"
    assert normalize_speed("Unknown") is None
    assert normalize_speed("Unknown speed") is None
    assert normalize_speed(None) is None
    assert speed_code("32GT/s") == 5
    with pytest.raises(ValueError):
        speed_code("3GT/s")


# =============================================================================
# list_functions on a sysfs tree
# =============================================================================
@pytest.fixture
def fleet_tree(tmp_path):
    add_function(tmp_path, "0000:40:01.1", build_config(0x1022, 0x1483, 0x060400, header_type=1,
                                                        lnkcap=("32GT/s", 16)), parent=None, driver="pcieport")
    for bus in ("41", "c1"):
        add_function(tmp_path, "0000:%s:00.0" % bus, build_config(**BLACKWELL),
                     parent="0000:40:01.1" if bus == "41" else "0000:c0:01.1", numa="0" if bus == "41" else "1")
    add_function(tmp_path, "0000:42:00.0", build_config(0x8086, 0x1592, 0x020000, lnkcap=("16GT/s", 16)),
                 parent="0000:40:03.1", driver="ice", link=("8.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16"))
    return tmp_path


def test_list_functions_reads_symlinked_tree(fleet_tree):
    fns = list_functions(FsRoot(str(fleet_tree)))
    assert [f["bdf"] for f in fns] == ["0000:40:01.1", "0000:41:00.0", "0000:42:00.0", "0000:c1:00.0"]
    gpu = fns[1]
    assert gpu["path"] == "/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0"
    assert gpu["parent"] == "0000:40:01.1"
    assert (gpu["vendor_id"], gpu["device_id"], gpu["class_code"]) == (0x10DE, 0x2BB5, 0x030200)
    assert gpu["numa_node"] == 0 and gpu["driver"] == "nvidia"
    assert (gpu["current_link_speed"], gpu["current_link_width"]) == ("32GT/s", 16)
    assert gpu["current_link_speed_raw"] == "32.0 GT/s PCIe"
    assert gpu["error"] is None and gpu["config"]["mrrs"] == 512
    assert is_nvidia_gpu(gpu)
    assert fns[0]["parent"] is None and fns[0]["driver"] == "pcieport"
    assert fns[0]["config"]["pcie_type_name"] == "Root Port"
    assert fns[3]["numa_node"] == 1 and fns[3]["parent"] == "0000:c0:01.1"


def test_list_functions_filters(fleet_tree):
    root = FsRoot(str(fleet_tree))
    assert [f["bdf"] for f in list_functions(root, vendor=0x10DE)] == ["0000:41:00.0", "0000:c1:00.0"]
    assert [f["bdf"] for f in list_functions(root, vendor="0x10de", class_prefix="03")] == \
        ["0000:41:00.0", "0000:c1:00.0"]
    assert [f["bdf"] for f in list_functions(root, class_prefix="0x0604")] == ["0000:40:01.1"]
    assert [f["bdf"] for f in list_functions(root, class_prefix="0300")] == []
    assert [f["bdf"] for f in list_functions(root, bdfs=["40:01.1", "0000:C1:00.0"])] == \
        ["0000:40:01.1", "0000:c1:00.0"]
    with pytest.raises(ValueError):
        list_functions(root, class_prefix="03;x")
    with pytest.raises(ValueError):
        list_functions(root, bdfs=["41:00.0\n"])


def test_list_functions_reads_config_only_for_matches(fleet_tree):
    class Recording(FsRoot):
        def __init__(self, root):
            FsRoot.__init__(self, root)
            self.read = []

        def read_bytes(self, host_path, limit=None):
            self.read.append(host_path)
            return FsRoot.read_bytes(self, host_path, limit)

    root = Recording(str(fleet_tree))
    list_functions(root, vendor=0x10DE)
    configs = sorted(p for p in root.read if p.endswith("/config"))
    assert configs == ["/sys/bus/pci/devices/0000:41:00.0/config", "/sys/bus/pci/devices/0000:c1:00.0/config"]


def test_list_functions_records_errors(tmp_path):
    add_function(tmp_path, "0000:41:00.0", build_config(size=64, **BLACKWELL))
    add_function(tmp_path, "0000:42:00.0", build_config(**BLACKWELL), skip=("config",), parent="0000:40:03.1")
    add_function(tmp_path, "0000:43:00.0", build_config(**BLACKWELL), skip=("vendor",), parent="0000:40:03.2",
                 driver=None, numa=None, link=None)
    add_function(tmp_path, "0000:44:00.0", build_config(**BLACKWELL), device=0x2BB1, parent="0000:40:03.3")
    os.makedirs(os.path.join(str(tmp_path), "sys", "bus", "pci", "devices", "not-a-bdf"))
    fns = {f["bdf"]: f for f in list_functions(FsRoot(str(tmp_path)), vendor=0x10DE)}
    assert sorted(fns) == ["0000:41:00.0", "0000:42:00.0", "0000:43:00.0", "0000:44:00.0"]
    err = fns["0000:41:00.0"]["error"]
    assert err.startswith("/sys/bus/pci/devices/0000:41:00.0/config: config space is 64 bytes")
    assert "read it as root" in err and fns["0000:41:00.0"]["config"] is None
    assert fns["0000:42:00.0"]["error"] == "/sys/bus/pci/devices/0000:42:00.0/config: No such file or directory"
    missing_vendor = fns["0000:43:00.0"]
    assert missing_vendor["error"] == "/sys/bus/pci/devices/0000:43:00.0/vendor: No such file or directory"
    assert missing_vendor["vendor_id"] is None and missing_vendor["config"]["vendor_id"] == 0x10DE
    assert missing_vendor["driver"] is None and missing_vendor["numa_node"] is None
    assert missing_vendor["current_link_speed"] is None and missing_vendor["max_link_width"] is None
    assert "device_id 0x2bb5 differs from sysfs device 0x2bb1" in fns["0000:44:00.0"]["error"]


def test_list_functions_flat_tree_and_bad_values(tmp_path):
    add_function(tmp_path, "0000:41:00.0", build_config(**BLACKWELL), symlink=False, numa="-1",
                 link=("Unknown", "0", "16 GT/s", "16"))
    with open(os.path.join(str(tmp_path), "sys/bus/pci/devices/0000:41:00.0/class"), "w") as handle:
        handle.write("garbage\n")
    (fn,) = list_functions(FsRoot(str(tmp_path)))
    assert fn["path"] == "/sys/bus/pci/devices/0000:41:00.0" and fn["parent"] is None
    assert fn["numa_node"] == -1
    assert fn["current_link_speed"] is None and fn["current_link_speed_raw"] == "Unknown"
    assert fn["max_link_speed"] == "16GT/s"
    assert fn["class_code"] is None and "class: not a hex number: 'garbage'" in fn["error"]
    (tmp_path / "empty").mkdir()
    assert list_functions(FsRoot(str(tmp_path / "empty"))) == []
    with pytest.raises(ValueError, match="is not a directory"):
        FsRoot(str(tmp_path / "nothing-here"))


def test_list_functions_absolute_symlinks_stay_in_root(tmp_path):
    add_function(tmp_path, "0000:41:00.0", build_config(**BLACKWELL))
    link = os.path.join(str(tmp_path), "sys/bus/pci/devices/0000:41:00.0")
    os.unlink(link)
    os.symlink("/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0", link)
    (fn,) = list_functions(FsRoot(str(tmp_path)))
    assert fn["error"] is None and fn["parent"] == "0000:40:01.1" and fn["config"]["mrrs"] == 512


# =============================================================================
# cross-checks with the real lspci / setpci (tmp trees only)
# =============================================================================
BUILT = [
    pytest.param(dict(BLACKWELL), id="blackwell-default"),
    pytest.param(dict(BLACKWELL, mrrs=4096, mps=128, devcap_mps=256, lnksta=("2.5GT/s", 16)), id="blackwell-4096"),
    pytest.param({"vendor_id": 0x10DE, "device_id": 0x2204, "class_code": 0x030000, "lnkcap": ("16GT/s", 16),
                  "lnksta": ("8GT/s", 8), "mrrs": 128, "mps": 256, "devcap_mps": 256}, id="vga-gen4-x8"),
    pytest.param({"vendor_id": 0x10DE, "device_id": 0x22E8, "class_code": 0x040300, "lnkcap": ("8GT/s", 16),
                  "lnksta": ("8GT/s", 16)}, id="audio"),
    pytest.param({"vendor_id": 0x1022, "device_id": 0x1483, "class_code": 0x060400, "header_type": 1,
                  "lnkcap": ("16GT/s", 16), "lnksta": ("2.5GT/s", 16), "mrrs": 512, "mps": 256}, id="root-port"),
    pytest.param(dict(BLACKWELL, size=256, lnkcap=("64GT/s", 16), lnksta=("64GT/s", 16), mrrs=2048), id="256-gen6"),
]


@needs_lspci
@pytest.mark.parametrize("kwargs", BUILT)
def test_lspci_agrees_with_parser_on_built_configs(tmp_path, kwargs):
    data = build_config(**kwargs)
    add_function(tmp_path, "0000:41:00.0", data)
    _cfg, dec = assert_lspci_agrees(tmp_path, "0000:41:00.0", data)
    assert dec["mrrs"] == kwargs.get("mrrs", 512)


@needs_lspci
@pytest.mark.parametrize("name,bdf,data", all_real_functions())
def test_lspci_agrees_with_parser_on_real_dumps(tmp_path, name, bdf, data):
    add_function(tmp_path, bdf, data)
    assert_lspci_agrees(tmp_path, bdf, data)


@needs_lspci
def test_lspci_sees_a_multi_function_tree(fleet_tree):
    proc = run_pciutils(LSPCI, ["-A", "linux-sysfs", "-O", "sysfs.path=" + sysfs_path(fleet_tree), "-n"], fleet_tree)
    assert proc.returncode == 0, proc.stderr
    assert re.findall(r"^(\S+) (\w{4}): (\w{4}:\w{4})", proc.stdout, re.MULTILINE) == [
        ("40:01.1", "0604", "1022:1483"), ("41:00.0", "0302", "10de:2bb5"),
        ("42:00.0", "0200", "8086:1592"), ("c1:00.0", "0302", "10de:2bb5")]


def _setpci_cases():
    cases = [pytest.param("0000:41:00.0", build_config(**BLACKWELL), id="built-blackwell")]
    for name, bdf in sorted(REAL_GPUS):
        cases.append(pytest.param(bdf, real_dumps(name)[bdf], id="%s-%s" % (name.split("_")[0], bdf)))
    return cases


@needs_setpci
@pytest.mark.parametrize("bdf,before", _setpci_cases())
def test_setpci_masked_write_changes_only_mrrs(tmp_path, bdf, before):
    config = add_function(tmp_path, bdf, before)
    cfg = parse_config(before)
    devctl_at = cfg["cap_exp"] + 8
    args = setpci_mrrs_args(bdf, 4096, sysfs_path(tmp_path))
    proc = run_pciutils(SETPCI, args, tmp_path)
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, "", "")
    with open(config, "rb") as handle:
        after = handle.read()
    new = parse_config(after)
    assert new["mrrs"] == 4096
    assert new["devctl"] & ~0x7000 == cfg["devctl"] & ~0x7000
    assert new["devctl"] & 0x8000 == 0
    assert (new["mps"], new["lnksta_speed"]) == (cfg["mps"], cfg["lnksta_speed"])
    assert len(after) == len(before)
    assert after[:devctl_at] == before[:devctl_at] and after[devctl_at + 2:] == before[devctl_at + 2:]
    assert after[devctl_at] == before[devctl_at]  # low byte: error reporting, RlxdOrd, MPS bits 7:5
    read = run_pciutils(SETPCI, setpci_read_args(bdf, sysfs_path(tmp_path)), tmp_path)
    assert read.returncode == 0 and parse_setpci_word(read.stdout) == new["devctl"]
    back = run_pciutils(SETPCI, setpci_mrrs_args(bdf, cfg["mrrs"], sysfs_path(tmp_path)), tmp_path)
    assert back.returncode == 0
    with open(config, "rb") as handle:
        assert handle.read() == before


@needs_setpci
def test_setpci_mask_leaves_every_other_bit_alone(tmp_path):
    # Device Control with every bit but MRRS set (a file, not hardware: bit 15 would read 0 on a GPU).
    data = bytearray(build_config(**BLACKWELL))
    struct.pack_into("<H", data, 0x78 + 8, 0x8FFF)
    config = add_function(tmp_path, "0000:41:00.0", bytes(data))
    proc = run_pciutils(SETPCI, setpci_mrrs_args("0000:41:00.0", 4096, sysfs_path(tmp_path)), tmp_path)
    assert proc.returncode == 0, proc.stderr
    with open(config, "rb") as handle:
        assert u16(handle.read(), 0x78 + 8) == 0xDFFF


@needs_setpci
def test_setpci_quirks_callers_must_handle(tmp_path):
    """setpci needs only 'config' in the tree; a missing address exits 0 with a warning;
    a 64-byte (unprivileged) config looks like a function without a PCIe capability."""
    devdir = os.path.join(str(tmp_path), "sys", "bus", "pci", "devices", "0000:41:00.0")
    os.makedirs(devdir)
    with open(os.path.join(devdir, "config"), "wb") as handle:
        handle.write(build_config(**BLACKWELL))
    ok = run_pciutils(SETPCI, setpci_read_args("0000:41:00.0", sysfs_path(tmp_path)), tmp_path)
    assert ok.returncode == 0 and parse_setpci_word(ok.stdout) == 0x2137
    missing = run_pciutils(SETPCI, setpci_mrrs_args("0000:42:00.0", 4096, sysfs_path(tmp_path)), tmp_path)
    assert missing.returncode == 0 and "No devices selected" in missing.stderr
    with open(os.path.join(devdir, "config"), "wb") as handle:
        handle.write(build_config(size=64, **BLACKWELL))
    short = run_pciutils(SETPCI, setpci_mrrs_args("0000:41:00.0", 4096, sysfs_path(tmp_path)), tmp_path)
    assert short.returncode != 0 and "Capability 0010 not found" in short.stderr
    with open(os.path.join(devdir, "config"), "rb") as handle:
        assert handle.read() == build_config(size=64, **BLACKWELL)
