"""The PCIe side of the audit: ACS and Resizable BAR decoded from real config spaces (checked against lspci's own text
of the same bytes), GPU identity from pci.ids, the GPU-to-GPU topology, pcie.acs / pcie.bar1 / pcie.sriov /
pcie.topology and iommu.mode on the demo fleet and on trees built for each case.
"""
import os
import re
import shutil

import pcibuild
import pytest
from checkcases import audit_tree
from ansible.module_utils.pvetune.concerns.pcie import topology as pcie_topology
from ansible.module_utils.pvetune.core import cpuprofile
from ansible.module_utils.pvetune.core.policy import merge_policy
from ansible.module_utils.pvetune.formats import pci_config, pci_ext, pci_ids

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(TOP, "tests", "fixtures", "realdata")
DEMO = os.path.join(TOP, "demo", "snapshots")
DUMPS = sorted(os.listdir(os.path.join(REAL, "lspci_xxxx")))


def read(*parts):
    with open(os.path.join(REAL, *parts)) as handle:
        return handle.read()


def blocks(text):
    """{bdf: the lspci -vvv text of that device} (the lines from its header to the next header)."""
    out, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^((?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) ", line)
        if m:
            current = pci_config.normalize_bdf(m.group(1))
            out[current] = []
        elif current:
            out[current].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def rebar_lines(rebar):
    """Our decode in lspci's words: "BAR 1: current size: 256MB, supported: 64MB 128MB ..."."""
    return ["BAR %d: current size: %s, supported: %s" % (i, pci_ext.size_text(b["current"]), " ".join(
        pci_ext.size_text(s) for s in b["supported"])) for i, b in sorted(rebar["bars"].items())]


# -- decode against lspci's text of the same bytes -----------------------------------------------------------
@pytest.mark.parametrize("name", DUMPS)
def test_acs_and_rebar_decode_agree_with_lspci_on_the_same_bytes(name):
    text = read("lspci_xxxx", name)
    dumps, texts = pcibuild.parse_lspci_hexdump(text), blocks(text)
    checked = 0
    for bdf, data in dumps.items():
        info = pci_config.parse_config(data)
        acs = pci_ext.parse_acs(data, info) if len(data) > 256 else None
        rebar = pci_ext.parse_rebar(data, info) if len(data) > 256 else None
        body = texts.get(bdf, "")
        ctl = re.search(r"ACSCtl:\s*(.+)", body)
        if ctl and len(data) > 256:
            assert acs is not None and acs["ctrl_text"] == ctl.group(1).strip(), (name, bdf)
            assert acs["cap_text"] == re.search(r"ACSCap:\s*(.+)", body).group(1).strip()
            checked += 1
        bars = re.findall(r"(BAR \d+: current size: .+)", body)
        if bars and len(data) > 256:
            assert rebar_lines(rebar) == [b.strip() for b in bars], (name, bdf)
            checked += 1
        if "Access Control Services" not in body and body and len(data) > 256:
            assert acs is None
    if name.startswith(("pciutils_cap-aer-root", "pciutils_cap-exp-lnkcap2", "pciutils_cap-dvsec")):
        assert checked, "the -vvv text of %s carries ACS or Resizable BAR lines" % name


def test_the_haswell_root_port_redirects_and_the_plx_ports_have_no_acs():
    dumps = pcibuild.parse_lspci_hexdump(read("lspci_xxxx",
                                              "pciutils_cap-aer-root_haswell-e_rootport_acs_redir_cx3.txt"))
    data = dumps["0000:00:02.0"]
    acs = pci_ext.parse_acs(data, pci_config.parse_config(data))
    assert (acs["offset"], acs["cap"], acs["ctrl"], acs["redirect"]) == (0x110, 0x1F, 0x1F, 0x0C)
    for name in ("pciutils_cap-multicast_pex8796_upstream_port.txt", "pciutils_cap-vc-pat_pex8532_downstream_port.txt"):
        data = list(pcibuild.parse_lspci_hexdump(read("lspci_xxxx", name)).values())[0]
        assert len(data) == 4096 and pci_ext.parse_acs(data, pci_config.parse_config(data)) is None


def test_fiji_rebar_from_bytes_only():
    data = list(pcibuild.parse_lspci_hexdump(read("lspci_xxxx", "pciutils_cap-rebar_amd_fiji_rebar.txt")).values())[0]
    rebar = pci_ext.parse_rebar(data, pci_config.parse_config(data))
    assert rebar_lines(rebar) == ["BAR 0: current size: 256MB, supported: 256MB 512MB 1GB 2GB 4GB"]


@pytest.mark.parametrize("name,bar1", [
    ("neuropoly_romane_rtx_a6000_rebar_256m_of_64g.txt", 256 << 20),
    ("stelline_puget_wrx90_rtx6000ada_rebar_64g.txt", 64 << 30),
])
def test_the_gpu_model_reproduces_real_nvidia_rebar_text(name, bar1):
    """pcibuild's GPU (the demo fleet's) carries the Resizable BAR entries lspci -vvv shows on real NVIDIA GPUs."""
    want = [b.strip() for b in re.findall(r"(BAR \d+: current size: .+)", read("lspci", name))]
    assert re.search(r"\[bb0 v1\] Physical Resizable BAR", read("lspci", name))
    data = pcibuild.build_config(0x10DE, 0x26B1, 0x030200, bar1=(bar1, 64 << 30))
    info = pci_config.parse_config(data)
    assert (pci_config.EXT_CAP_ID_REBAR, 0xBB0) in info["ext_capabilities"]
    assert rebar_lines(pci_ext.parse_rebar(data, info)) == want


def test_the_switch_port_model_reproduces_real_plx_acs_text():
    text = read("lspci", "n1sdp_lkml_plx8749_up_down_acs_on_vvxxx.txt")
    body = blocks(text)["0000:02:08.0"]
    offsets = [int(o, 16) for o in re.findall(r"Capabilities: \[([0-9a-f]{3}) v\d\]", body)]
    data = pcibuild.build_config(0x10B5, 0x8749, 0x060400, header_type=1, pcie_type=6, switch=True, acs_ctrl=0x1D)
    info = pci_config.parse_config(data)
    assert [off for _, off in info["ext_capabilities"]] == offsets
    assert [off for _, off in info["capabilities"]] == [int(o, 16) for o in re.findall(
        r"Capabilities: \[([0-9a-f]{2})\]", body)]
    acs = pci_ext.parse_acs(data, info)
    assert acs["ctrl_text"] == re.search(r"ACSCtl:\s*(.+)", body).group(1).strip()
    assert acs["cap_text"] == re.search(r"ACSCap:\s*(.+)", body).group(1).strip()


# -- malformed capabilities: errors with the reason, never a traceback ---------------------------------------
def test_broken_rebar_and_acs_say_why():
    gpu = bytearray(pcibuild.build_config(0x10DE, 0x2BB5, 0x030200))
    gpu[0xBB0 + 8] = 0x01  # first control word: zero resizable BARs
    with pytest.raises(pci_config.PciConfigError, match="0 resizable BARs"):
        pci_ext.parse_rebar(bytes(gpu), pci_config.parse_config(bytes(gpu)))
    gpu[0xBB0 + 8] = 0x61  # three BARs ...
    gpu[0xBB0 + 0x10] = 0x01  # ... and the second names BAR 1, the third BAR 1 too
    gpu[0xBB0 + 0x18] = 0x01
    with pytest.raises(pci_config.PciConfigError, match="names BAR 1 again"):
        pci_ext.parse_rebar(bytes(gpu), pci_config.parse_config(bytes(gpu)))
    port = bytearray(pcibuild.build_config(0x10B5, 0x8749, 0x060400, header_type=1, pcie_type=6, switch=True))
    info = pci_config.parse_config(bytes(port))
    info["ext_capabilities"] = [(pci_config.EXT_CAP_ID_ACS, 0xFFC)]
    with pytest.raises(pci_config.PciConfigError, match="ACS capability at 0xffc needs"):
        pci_ext.parse_acs(bytes(port), info)


@pytest.mark.parametrize("text,message", [
    ("0x0 0x1\n", "line 1 is not"),
    ("0x0000000000001000 0x0000000000000fff 0x0000000000000200\n", "ends (0xfff) before it starts"),
    ("garbage\n", "line 1 is not"),
])
def test_resource_parse_errors(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        pci_ext.parse_resource(text)


def test_setpci_acs_args_are_masked_and_validated():
    assert pci_ext.setpci_acs_args("0000:02:08.0") == ["-s", "0000:02:08.0", "ECAP_ACS+6.w=0000:002c"]
    assert pci_ext.setpci_acs_restore_args("0000:02:08.0", 0x1D, 0x2C, "/t/sys/bus/pci") == [
        "-A", "linux-sysfs", "-O", "sysfs.path=/t/sys/bus/pci", "-s", "0000:02:08.0", "ECAP_ACS+6.w=000c:002c"]
    for bad in ("0000:02:08.0; reboot", "02:08.0", "$(id)"):
        with pytest.raises(ValueError):
            pci_ext.setpci_acs_args(bad)
    for mask in (0, 0x80, True, "0x2c"):
        with pytest.raises(ValueError):
            pci_ext.setpci_acs_args("0000:02:08.0", mask)


# -- pci.ids ---------------------------------------------------------------------------------------------------
def test_pci_ids_names_from_the_real_database_excerpt():
    text = read("pci_ids", "pci.ids.excerpt")
    names = pci_ids.lookup(text, {(0x10DE, 0x2BB5), (0x10B5, 0x8747), (0x10DE, 0xFFFF), (0x1234, 0x0001)})
    assert names[(0x10DE, 0x2BB5)] == "NVIDIA Corporation GB202GL [RTX PRO 6000 Blackwell Server Edition]"
    assert names[(0x10B5, 0x8747)].startswith("PLX Technology, Inc. PEX 8747")
    assert (0x10DE, 0xFFFF) not in names and (0x1234, 0x0001) not in names
    assert pci_ids.model_name(names, 0x10DE, 0xFFFF) == "Device [10de:ffff]"


# -- topology ----------------------------------------------------------------------------------------------------
def gpu(bdf, path, node=0, socket=0, driver="nvidia"):
    host, chain = pcie_topology.chain("/sys/devices/%s/%s" % (path, bdf))
    return {"bdf": bdf, "host": host, "chain": chain, "numa_node": node, "socket": socket, "driver": driver}


SW = "pci0000:40/0000:40:01.1/0000:41:00.0"
GPUS = [gpu("0000:43:00.0", SW + "/0000:42:08.0"), gpu("0000:44:00.0", SW + "/0000:42:10.0"),
        gpu("0000:47:00.0", SW + "/0000:42:18.0/0000:45:00.0/0000:46:00.0"),
        gpu("0000:51:00.0", "pci0000:40/0000:40:03.1"), gpu("0000:61:00.0", "pci0000:60/0000:60:01.1", node=1),
        gpu("0000:81:00.0", "pci0000:80/0000:80:01.1", node=2, socket=1)]


@pytest.mark.parametrize("a,b,level", [(0, 1, "PIX"), (0, 2, "PXB"), (0, 3, "PHB"), (3, 4, "NODE"), (0, 5, "SYS"),
                                       (4, 5, "SYS")])
def test_levels_follow_nvidia_smi_topo(a, b, level):
    assert pcie_topology.path_between(GPUS[a], GPUS[b])["level"] == level


def test_ports_between_are_below_the_shared_bridge():
    assert pcie_topology.path_between(GPUS[0], GPUS[1]) == {"level": "PIX", "shared": "0000:41:00.0",
                                                            "ports": ["0000:42:08.0", "0000:42:10.0"]}
    assert pcie_topology.path_between(GPUS[0], GPUS[2])["ports"] == ["0000:42:08.0", "0000:42:18.0", "0000:45:00.0",
                                                                      "0000:46:00.0"]


def test_node_without_socket_falls_back_to_the_numa_node():
    a, b = dict(GPUS[3], socket=None), dict(GPUS[4], socket=None)
    assert pcie_topology.path_between(a, b)["level"] == "SYS"
    assert pcie_topology.path_between(a, dict(b, numa_node=0))["level"] == "NODE"


def test_matrix_is_symmetric_and_unknown_paths_are_marked():
    flat = {"bdf": "0000:99:00.0", "host": None, "chain": None, "numa_node": 0, "socket": 0}
    mat = pcie_topology.matrix(GPUS + [flat])
    n = len(mat["gpus"])
    assert all(mat["rows"][i][j] == mat["rows"][j][i] for i in range(n) for j in range(n))
    assert [mat["rows"][i][i] for i in range(n)] == ["X"] * n
    assert mat["rows"][0][-1] == "?"
    assert pcie_topology.chain("/sys/bus/pci/devices/0000:99:00.0") == (None, None)
    assert pcie_topology.chain("/sys/devices/pci0000:00/0000:00:01.1/../x") == (None, None)


def _bridge(bdf, ctrl, error=None):
    return {"bdf": bdf, "acs": {"ctrl": ctrl, "redirect": ctrl & pci_ext.ACS_REDIRECT_MASK,
                                "ctrl_text": pci_ext.acs_flags(ctrl)} if ctrl is not None else None,
            "acs_error": error, "error": None}


def test_acs_ports_vfio_in_the_switch_keeps_both_ports():
    pci = {"bridges": {"0000:42:08.0": _bridge("0000:42:08.0", 0x1D), "0000:42:10.0": _bridge("0000:42:10.0", 0x1D)},
           "vfio": []}
    recs = pcie_topology.acs_ports(pci, GPUS[:2])
    assert [(r["bdf"], r["status"]) for r in recs] == [("0000:42:08.0", "fail"), ("0000:42:10.0", "fail")]
    vfio = [dict(GPUS[0]), dict(GPUS[1], driver="vfio-pci")]
    recs = pcie_topology.acs_ports(pci, vfio)
    assert [(r["status"], r["vfio"]) for r in recs] == [("skip", ["0000:44:00.0"])] * 2
    pci["vfio"] = [{"bdf": "0000:42:18.1", "chain": ["0000:40:01.1", "0000:41:00.0", "0000:42:18.1"]}]
    assert {r["status"] for r in pcie_topology.acs_ports(pci, GPUS[:2])} == {"skip"}


def test_acs_ports_errors_and_clear_ports():
    pci = {"bridges": {"0000:42:08.0": _bridge("0000:42:08.0", 0x11),
                       "0000:42:10.0": _bridge("0000:42:10.0", None, "/sys/.../config: loops")}}
    recs = pcie_topology.acs_ports(pci, GPUS[:2])
    assert [r["status"] for r in recs] == ["pass", "error"]
    assert pcie_topology.acs_ports({"bridges": {}}, GPUS[:2])[0]["status"] == "error"


# -- the demo fleet --------------------------------------------------------------------------------------------------
def audit(root, **policy):
    return audit_tree(root, merge_policy(dict({"kernel_series": "6.14", "pcie_mrrs": 4096, "numa_balancing": 0},
                                              **policy)))


@pytest.fixture(scope="module")
def gpu04():
    return audit(os.path.join(DEMO, "pve-gpu04"))


def test_gpu04_acs_fails_naming_ports_and_pairs(gpu04):
    facts, res = gpu04
    assert facts["errors"] == []
    acs = res["pcie.acs"]
    assert acs["status"] == "fail" and acs["severity"] == "high" and acs["reboot_required"] is False
    ports = ["0000:%s:%s" % (b, d) for b in ("02", "22", "82", "a2") for d in ("08.0", "10.0")]
    assert acs["message"].startswith("ACS redirects GPU peer traffic to the root complex on " + ", ".join(ports))
    assert "affected GPU pairs: 03:00.0-04:00.0, 23:00.0-24:00.0, 83:00.0-84:00.0, a3:00.0-a4:00.0" in acs["message"]
    assert "pcie_acs_fix: true" in acs["message"]
    assert [i["name"].split()[0] for i in acs["items"]] == ports
    assert all("Downstream Port" in i["name"] and "PEX890xx" in i["name"] for i in acs["items"])
    assert {i["current"] for i in acs["items"]} == {
        "ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"}


def test_gpu04_bar1_warns_the_small_one_with_firmware_advice(gpu04):
    _, res = gpu04
    bar = res["pcie.bar1"]
    assert bar["status"] == "warn" and "0000:84:00.0" in bar["message"]
    warn = [i for i in bar["items"] if i["status"] == "warn"]
    assert len(warn) == 1 and warn[0]["name"].startswith("0000:84:00.0 NVIDIA Corporation GB202GL [RTX PRO 6000")
    assert "(NUMA node 1, GPU 5)" in warn[0]["name"]
    assert warn[0]["message"].startswith("BAR1 is 256MB of up to 128GB")
    assert "mapped below 4 GB" in warn[0]["message"]
    assert warn[0]["current"] == "BAR1 256MB (nvidia-smi: BAR1 256 MiB, FB 97887 MiB)"
    assert "Above 4G Decoding" in bar["remediation"] and "Resizable BAR" in bar["remediation"]


def test_gpu04_iommu_fails_and_cmdline_requires_iommu_pt(gpu04):
    facts, res = gpu04
    io = res["iommu.mode"]
    assert io["status"] == "fail" and io["reboot_required"] is True
    assert io["message"].startswith("8 host-owned GPUs in a translated IOMMU domain (DMA)")
    assert [i["current"] for i in io["items"]][:2] == ["group 32, DMA", "group 33, DMA"]
    assert "iommu=pt: not configured" in res["boot.cmdline"]["message"]
    _, relaxed = audit(os.path.join(DEMO, "pve-gpu04"), iommu_passthrough=False)
    assert relaxed["iommu.mode"]["status"] == "pass" and relaxed["boot.cmdline"]["status"] == "pass"


def test_gpu04_topology_matrix(gpu04):
    _, res = gpu04
    topo = res["pcie.topology"]
    assert topo["status"] == "pass" and topo["current"] == "PIX 4, NODE 8, SYS 16 of 28 GPU pairs"
    rows = topo["matrix"]["rows"]
    assert rows[0] == ["X", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    assert topo["matrix"]["gpus"][0].endswith("(NUMA node 0, GPU 0)")
    assert "GPU0 X    PIX  NODE NODE SYS  SYS  SYS  SYS" in topo["evidence"]


def test_gpu_p2p_ignore_skips(gpu04):
    _, res = audit(os.path.join(DEMO, "pve-gpu04"), gpu_p2p="ignore")
    assert res["pcie.acs"]["status"] == "skip" and "gpu_p2p is ignore" in res["pcie.acs"]["message"]


def test_gpu01_is_quiet_on_the_pcie_side():
    _, res = audit(os.path.join(DEMO, "pve-gpu01"))
    assert res["pcie.acs"]["status"] == "skip" and "no two GPUs share a PCIe switch" in res["pcie.acs"]["message"]
    assert res["pcie.bar1"]["status"] == "pass"
    assert res["pcie.topology"]["matrix"]["rows"][0] == ["X", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    assert res["pcie.sriov"]["status"] == "skip"
    assert all(i["name"].startswith("0000:") and "RTX PRO 6000" in i["name"] for i in res["pcie.mrrs"]["items"])


# -- trees with broken inputs ----------------------------------------------------------------------------------------
@pytest.fixture
def gpu04_copy(tmp_path):
    dest = str(tmp_path / "pve-gpu04")
    shutil.copytree(os.path.join(DEMO, "pve-gpu04"), dest, symlinks=True)
    return dest


def sysfs_dir(root, bdf):
    return os.path.realpath(os.path.join(root, "sys/bus/pci/devices", bdf))


def test_missing_resource_is_an_error_naming_the_file(gpu04_copy):
    os.unlink(os.path.join(sysfs_dir(gpu04_copy, "0000:23:00.0"), "resource"))
    _, res = audit(gpu04_copy)
    bar = res["pcie.bar1"]
    assert bar["status"] == "warn"  # the small BAR1 stays reported
    err = [i for i in bar["items"] if i["status"] == "error"]
    assert len(err) == 1 and "0000:23:00.0/resource" in err[0]["message"]
    assert "could not read" in bar["message"]


def test_looping_extended_list_on_a_port_is_an_error_naming_the_config(gpu04_copy):
    path = os.path.join(sysfs_dir(gpu04_copy, "0000:22:08.0"), "config")
    data = bytearray(open(path, "rb").read())
    header = int.from_bytes(data[0x100:0x104], "little")
    data[0x100:0x104] = ((header & 0xFFFFF) | (0x100 << 20)).to_bytes(4, "little")  # DSN points to itself
    with open(path, "wb") as handle:
        handle.write(bytes(data))
    _, res = audit(gpu04_copy)
    acs = res["pcie.acs"]
    assert acs["status"] == "fail"
    item = [i for i in acs["items"] if i["name"].startswith("0000:22:08.0")][0]
    assert item["status"] == "error" and "0000:22:08.0/config" in item["message"] and "loops" in item["message"]


def test_vfio_gpu_in_a_switch_skips_its_ports(gpu04_copy):
    gdir = sysfs_dir(gpu04_copy, "0000:a4:00.0")
    os.unlink(os.path.join(gdir, "driver"))
    os.makedirs(os.path.join(gpu04_copy, "sys/bus/pci/drivers/vfio-pci"))
    os.symlink(os.path.relpath(os.path.join(gpu04_copy, "sys/bus/pci/drivers/vfio-pci"), gdir),
               os.path.join(gdir, "driver"))
    os.symlink("../../../../devices/pci0000:a0/0000:a0:01.1/0000:a1:00.0/0000:a2:10.0/0000:a4:00.0",
               os.path.join(gpu04_copy, "sys/bus/pci/drivers/vfio-pci/0000:a4:00.0"))
    facts, res = audit(gpu04_copy)
    acs = {i["name"].split()[0]: i for i in res["pcie.acs"]["items"]}
    assert acs["0000:a2:08.0"]["status"] == acs["0000:a2:10.0"]["status"] == "skip"
    assert "0000:a4:00.0 in this switch is bound to vfio-pci" in acs["0000:a2:08.0"]["message"]
    assert acs["0000:02:08.0"]["status"] == "fail"
    io = {i["name"].split()[0]: i for i in res["iommu.mode"]["items"]}
    assert io["0000:a4:00.0"]["status"] == "skip" and "vfio-pci" in io["0000:a4:00.0"]["message"]


def test_sriov_is_information_where_a_gpu_offers_it(gpu04_copy):
    gdir = sysfs_dir(gpu04_copy, "0000:03:00.0")
    with open(os.path.join(gdir, "sriov_totalvfs"), "w") as handle:
        handle.write("16\n")
    with open(os.path.join(gdir, "sriov_numvfs"), "w") as handle:
        handle.write("0\n")
    _, res = audit(gpu04_copy)
    assert res["pcie.sriov"]["status"] == "pass" and res["pcie.sriov"]["items"][0]["current"] == "0 of 16 VFs enabled"


def test_no_pci_ids_gives_the_device_id(gpu04_copy):
    os.unlink(os.path.join(gpu04_copy, "usr/share/misc/pci.ids"))
    _, res = audit(gpu04_copy)
    assert res["pcie.mrrs"]["items"][0]["name"].startswith("0000:03:00.0 Device [10de:2bb5]")


def test_passthrough_is_added_to_the_required_args_only_where_needed():
    pol = merge_policy(None)
    facts = {"iommu": {"group_types": {"32": "DMA-FQ"}}, "pci": {"functions": [{"bdf": "x", "iommu_group": "32"}]}}
    assert cpuprofile.needs_passthrough(facts, pol)
    facts["iommu"]["group_types"]["32"] = "identity"
    assert not cpuprofile.needs_passthrough(facts, pol)
    facts["pci"]["functions"][0]["driver"] = "vfio-pci"
    facts["iommu"]["group_types"]["32"] = "DMA"
    assert not cpuprofile.needs_passthrough(facts, pol)
