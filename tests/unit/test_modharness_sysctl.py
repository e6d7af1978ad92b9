"""pvetune_sysctl through the in-process module harness (also a model for other module tests)."""
import os
import shutil

import pytest
from modharness import run_module

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(TOP, "demo", "snapshots")


@pytest.fixture
def gpu01(tmp_path):
    root = tmp_path / "pve-gpu01"
    shutil.copytree(os.path.join(DEMO, "pve-gpu01"), root, symlinks=True)
    return root


def snapshot(root):
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                with open(path, "rb") as handle:
                    out[os.path.relpath(path, root)] = handle.read()
    return out


def test_check_mode_writes_nothing_and_reports_the_diff(gpu01):
    before = snapshot(gpu01)
    res = run_module("pvetune_sysctl", {"root": str(gpu01), "settings": {"kernel.numa_balancing": 0}},
                     check_mode=True, diff=True)
    assert res["changed"] is True
    assert res["runtime"]["kernel.numa_balancing"] == {"before": "1", "after": "0"}
    headers = [d["after_header"] for d in res["diff"]]
    assert "/etc/sysctl.d/90-pvetune.conf" in headers
    assert "kernel.numa_balancing = 0" in res["diff"][0]["after"]
    assert snapshot(gpu01) == before


def test_apply_then_idempotent_and_recorded_for_rollback(gpu01):
    res = run_module("pvetune_sysctl", {"root": str(gpu01), "settings": {"kernel.numa_balancing": 0},
                                        "run_id": "t1"})
    assert res["changed"] is True
    assert (gpu01 / "proc/sys/kernel/numa_balancing").read_text() == "0\n"
    assert "kernel.numa_balancing = 0" in (gpu01 / "etc/sysctl.d/90-pvetune.conf").read_text()
    manifest = (gpu01 / "var/lib/pvetune/manifest.json").read_text()
    assert '"original": "1"' in manifest
    again = run_module("pvetune_sysctl", {"root": str(gpu01), "settings": {"kernel.numa_balancing": 0},
                                          "run_id": "t2"})
    assert again["changed"] is False


def test_later_file_overriding_the_dropin_is_refused(gpu01):
    (gpu01 / "etc/sysctl.d/99-zz-local.conf").write_text("kernel.numa_balancing=1\n")
    res = run_module("pvetune_sysctl", {"root": str(gpu01), "settings": {"kernel.numa_balancing": 0}})
    assert res["failed"] is True
    assert "99-zz-local.conf" in res["msg"]
    assert not (gpu01 / "etc/sysctl.d/90-pvetune.conf").exists()


@pytest.mark.parametrize("settings", [
    {"kernel.numa_balancing": "0; reboot"},
    {"kernel.numa_balancing": "0\nkernel.panic = 1"},
    {"kernel/../../etc": "1"},
    {"kernel.numa_balancing": "$(id)"},
])
def test_injection_is_rejected_before_anything_is_written(gpu01, settings):
    before = snapshot(gpu01)
    res = run_module("pvetune_sysctl", {"root": str(gpu01), "settings": settings})
    assert res["failed"] is True
    assert snapshot(gpu01) == before
