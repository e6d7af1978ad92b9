"""The ACS fix (concerns/pcie/acs_fix.py, library/pvetune_pcie_acs.py): masked setpci writes on a scratch copy of
pve-gpu04 (8 GPUs behind 4 switches, ACS Control 001d on every downstream port), the boot re-application, rollback.

Every setpci runs on the tmp tree with ``-A linux-sysfs -O sysfs.path=<tree>/sys/bus/pci`` (guarded_run_fn refuses
anything else before a process starts).
"""
import json
import os

import pytest
from ansible.module_utils.pvetune.concerns.pcie import acs_fix as pcie_acs_fix
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.runner import Runner
from ansible.module_utils.pvetune.formats import pci_config, pci_ext
from modharness import run_module
from test_pcie_fix import config_bytes, config_file, forbid_commands, guard_module_commands, guarded_run_fn  # noqa
from test_pcie_fix import needs_setpci, scratch, snapshot

PORTS = ["0000:%s:%s" % (b, d) for b in ("02", "22", "82", "a2") for d in ("08.0", "10.0")]
OFFSET = 0xF24  # ACS of the switch model (PLX PEX 8747/8749)


def acs_ctrl(root, bdf):
    data = config_bytes(root, bdf)
    return pci_ext.parse_acs(data, pci_config.parse_config(data))["ctrl"]


def set_ctrl(root, bdf, value):
    """What the kernel does when it enumerates the port with an IOMMU on (bytes written directly)."""
    data = bytearray(config_bytes(root, bdf))
    data[OFFSET + 6:OFFSET + 8] = value.to_bytes(2, "little")
    with open(config_file(root, bdf), "wb") as handle:
        handle.write(bytes(data))


@pytest.fixture
def gpu04(tmp_path):
    return scratch(tmp_path, "pve-gpu04")


def test_check_mode_plans_every_port_and_runs_nothing(gpu04, forbid_commands):  # noqa: F811
    before = snapshot(gpu04)
    res = run_module("pvetune_pcie_acs", {"root": gpu04, "run_id": "c1"}, check_mode=True, diff=True)
    assert "failed" not in res, res.get("msg")
    assert res["changed"] is True
    assert [(p["bdf"], p["ctrl_before"], p["ctrl_after"], p["result"]) for p in res["ports"]] == [
        (b, "001d", "0011", "planned") for b in PORTS]
    assert res["boot_ports"] == PORTS and res["left"] == []
    diff = res["diff"][0] if isinstance(res["diff"], list) else res["diff"]
    text = diff["before"] + diff["after"]
    assert "pcie:0000:02:08.0 ACSCtl = 001d (SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+" in text
    assert "pcie:0000:02:08.0 ACSCtl = 0011 (SrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd+" in text
    assert snapshot(gpu04) == before


@needs_setpci
def test_apply_clears_only_the_redirect_bits_then_changes_nothing(gpu04, guard_module_commands):  # noqa: F811
    calls = guard_module_commands(gpu04)
    others = ["0000:03:00.0", "0000:01:00.0", "0000:00:01.1"]
    originals = {b: config_bytes(gpu04, b) for b in PORTS + others}
    res = run_module("pvetune_pcie_acs", {"root": gpu04, "run_id": "a1"})
    assert "failed" not in res, res.get("msg")
    assert res["changed"] is True and [p["result"] for p in res["ports"]] == ["done"] * 8
    for bdf in PORTS:
        old, new = originals[bdf], config_bytes(gpu04, bdf)
        assert [i for i in range(len(old)) if old[i] != new[i]] == [OFFSET + 6], bdf  # the low byte of ACS Control
        assert acs_ctrl(gpu04, bdf) == 0x0011
    assert all(config_bytes(gpu04, b) == originals[b] for b in others)
    writes = [c[-1] for c in calls if "=" in c[-1]]
    assert writes == ["ECAP_ACS+6.w=0000:002c"] * 8
    manifest = json.load(open(os.path.join(gpu04, "var/lib/pvetune/manifest.json")))
    assert manifest["runtime"]["pcie:0000:02:08.0:acsctl"]["original"] == "001d"
    del calls[:]
    again = run_module("pvetune_pcie_acs", {"root": gpu04, "run_id": "a2"})
    assert again["changed"] is False and calls == []
    assert [p["result"] for p in again["ports"]] == ["unchanged"] * 8 and again["boot_ports"] == PORTS
    # rollback: the redirect bits come back, with a masked write
    fs, run = FsRoot(gpu04), guarded_run_fn(gpu04)

    def recording(argv, **kw):
        calls.append(list(argv))
        return run(argv, **kw)

    rec = pcie_acs_fix.restore(fs, Runner(fs, recording), "0000:02:08.0", "001d", False)
    assert rec["result"] == "restored" and acs_ctrl(gpu04, "0000:02:08.0") == 0x001D
    assert config_bytes(gpu04, "0000:02:08.0") == originals["0000:02:08.0"]
    assert [c[-1] for c in calls if "=" in c[-1]] == ["ECAP_ACS+6.w=000c:002c"]
    assert pcie_acs_fix.restore(fs, Runner(fs, guarded_run_fn(gpu04)), "0000:02:08.0", "001d", False)[
        "result"] == "unchanged"


def _bind_vfio(root, bdf, switch_path):
    gdir = os.path.realpath(os.path.join(root, "sys/bus/pci/devices", bdf))
    vdir = os.path.join(root, "sys/bus/pci/drivers/vfio-pci")
    os.makedirs(vdir, exist_ok=True)
    os.unlink(os.path.join(gdir, "driver"))
    os.symlink(os.path.relpath(vdir, gdir), os.path.join(gdir, "driver"))
    os.symlink("../../../../devices/%s/%s" % (switch_path, bdf), os.path.join(vdir, bdf))


@needs_setpci
def test_ports_of_a_switch_with_a_vfio_device_are_never_written(gpu04, guard_module_commands):  # noqa: F811
    calls = guard_module_commands(gpu04)
    _bind_vfio(gpu04, "0000:a4:00.0", "pci0000:a0/0000:a0:01.1/0000:a1:00.0/0000:a2:10.0")
    res = run_module("pvetune_pcie_acs", {"root": gpu04, "run_id": "v1"})
    assert "failed" not in res, res.get("msg")
    assert [p["bdf"] for p in res["ports"]] == PORTS[:6]
    assert [item["bdf"] for item in res["left"]] == PORTS[6:]
    assert "vfio-pci in its switch: 0000:a4:00.0" in res["left"][0]["reason"]
    assert any("left as it is" in str(w) for w in res.get("warnings", []))
    assert acs_ctrl(gpu04, "0000:a2:08.0") == acs_ctrl(gpu04, "0000:a2:10.0") == 0x001D
    assert not any("0000:a2:" in " ".join(c) for c in calls)
    # the boot unit checks again: the port stays as it is
    fs = FsRoot(gpu04)
    ok, messages = pcie_acs_fix.boot_apply(fs, Runner(fs, guarded_run_fn(gpu04)), ["0000:a2:08.0"])
    assert ok and messages == ["0000:a2:08.0: left as it is, vfio-pci in its switch (0000:a4:00.0)"]


@needs_setpci
def test_boot_unit_clears_the_ports_again_after_a_reboot(gpu04):
    fs = FsRoot(gpu04)
    config = {"mrrs": 4096, "vendor": "0x10de", "class_prefix": "0x03", "bdfs": None, "acs_ports": PORTS}
    assert pcie_acs_fix.validate_boot_config(config)["acs_ports"] == PORTS
    ok, messages = pcie_acs_fix.boot_apply_pcie(fs, Runner(fs, guarded_run_fn(gpu04)), config)
    assert ok, messages
    assert all(acs_ctrl(gpu04, b) == 0x0011 for b in PORTS)
    assert "ACS 0000:02:08.0: ACS Control 001d -> 0011" in messages
    for bdf in PORTS:  # the kernel's enumeration at the next boot
        set_ctrl(gpu04, bdf, 0x001D)
    ok, messages = pcie_acs_fix.boot_apply_pcie(fs, Runner(fs, guarded_run_fn(gpu04)), config)
    assert ok and sum("001d -> 0011" in m for m in messages) == 8
    ok, messages = pcie_acs_fix.boot_apply_pcie(fs, Runner(fs, guarded_run_fn(gpu04)), config)
    assert ok and sum("already clear" in m for m in messages) == 8


@pytest.mark.parametrize("ports", [["$(id)"], "0000:02:08.0", ["0000:02:08.0; reboot"], ["02:08.0"], [1]])
def test_bad_acs_ports_are_refused_by_name(gpu04, ports):
    with pytest.raises(pcie_acs_fix.AcsError, match="acs_ports"):
        pcie_acs_fix.validate_boot_config({"acs_ports": ports})
    fs = FsRoot(gpu04)
    ok, messages = pcie_acs_fix.boot_apply_pcie(fs, Runner(fs, lambda *a, **k: (1, "", "must not run")),
                                                {"acs_ports": ports})
    assert not ok and "acs_ports" in messages[0]


def test_unreadable_port_fails_before_any_write(gpu04, forbid_commands):  # noqa: F811
    path = config_file(gpu04, "0000:22:10.0")
    data = bytearray(open(path, "rb").read())
    data[0x100:0x104] = (0x0003 | (1 << 16) | (0x100 << 20)).to_bytes(4, "little")  # the first entry loops
    with open(path, "wb") as handle:
        handle.write(bytes(data))
    res = run_module("pvetune_pcie_acs", {"root": gpu04, "run_id": "e1"})
    assert res["failed"] is True
    assert "ACS not changed: cannot read 0000:22:10.0" in res["msg"] and "loops" in res["msg"]


def test_hosts_without_switches_have_nothing_to_do(tmp_path, forbid_commands):  # noqa: F811
    root = scratch(tmp_path, "pve-gpu01")
    res = run_module("pvetune_pcie_acs", {"root": root, "run_id": "n1"})
    assert "failed" not in res and res["changed"] is False and res["ports"] == [] and res["boot_ports"] == []
