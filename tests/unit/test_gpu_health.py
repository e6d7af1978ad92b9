"""pvetune_gpu_health (module_utils/pvetune/gpu_health.py) against the pct and nvidia-smi stand-ins.

pve-gpu01 after boot: CT 101 (onboot) runs with its stale allow line for major 511 while
nvidia-uvm is 509.  nvidia-smi in the CT still lists the 8 GPUs (NVML never opens /dev/nvidia-uvm);
opening /dev/nvidia-uvm, what CUDA does first, is denied: the health check must fail it.
"""
import os

import pytest
from ansible.module_utils.pvetune.gpu_health import parse_smi_list
from modharness import run_module
from test_lxcfix import (
    BAD_CTIDS,
    CONF_101,
    calls,
    fix,
    pct,
    pct_state,
    read,
    reset_calls,
    scratch,
    set_pct_state,
    tree_bytes,
    write,
)


def health(tree, check_mode=False, **args):
    params = {"root": str(tree)}
    params.update(args)
    return run_module("pvetune_gpu_health", params, check_mode=check_mode)


def target(res, name):
    return [t for t in res["targets"] if t["target"] == name][0]


def check(tgt, name):
    return [c for c in tgt["checks"] if c["name"] == name][0]


def test_stale_uvm_major_fails_the_ct_although_nvidia_smi_works(tmp_path):
    tree = scratch(tmp_path)
    res = health(tree)
    assert res["failed"] is True and res["failed_targets"] == ["ct:101"]
    assert "ct:101" in res["msg"] and "/dev/nvidia-uvm" in res["msg"]
    host = target(res, "host")
    assert host["status"] == "ok" and host["expected_gpus"] == 8 and len(host["gpus"]) == 8
    assert host["gpus"][0]["name"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    ct = target(res, "ct:101")
    assert ct["status"] == "fail" and ct["expected_gpus"] == 8
    assert check(ct, "nvidia-smi")["status"] == "ok" and len(ct["gpus"]) == 8
    uvm = check(ct, "nvidia-uvm")
    assert uvm["status"] == "fail" and "Operation not permitted" in uvm["output"]
    assert "Operation not permitted" in ct["output"]
    assert [t["target"] for t in res["targets"]] == ["host", "ct:101"]      # 102 has no GPU
    assert calls(tree) == [
        ["nvidia-smi", "-L"],
        ["pct", "status", "101"],
        ["pct", "exec", "101", "--", "nvidia-smi", "-L"],
        ["pct", "exec", "101", "--", "dd", "if=/dev/nvidia-uvm", "of=/dev/null", "bs=1", "count=0"],
    ]
    assert res["summary"] == {"ok": 1, "skip": 0, "fail": 1, "pending": 0, "broken-before": 0}


def test_fixed_but_not_restarted_ct_is_pending_not_failed(tmp_path):
    tree = scratch(tmp_path)
    res = fix(tree)
    assert res["restart_required"] == [101]
    res = health(tree, pending_restart=[101])
    assert not res.get("failed"), res.get("msg")
    ct = target(res, "ct:101")
    assert ct["status"] == "pending" and "needs a restart" in ct["message"]
    assert check(ct, "nvidia-uvm")["status"] == "fail"      # what fails now is still shown
    assert res["summary"] == {"ok": 1, "skip": 0, "fail": 0, "pending": 1, "broken-before": 0}
    before = len(calls(tree))
    res = health(tree, pending_restart=["101; reboot"])
    assert res["failed"] is True and len(calls(tree)) == before   # rejected before any command


def test_after_the_fix_and_a_restart_everything_is_ok(tmp_path):
    tree = scratch(tmp_path)
    assert fix(tree, restart=True)["restarted"] == [101]
    res = health(tree)
    assert not res.get("failed"), res.get("msg")
    assert res["summary"] == {"ok": 2, "skip": 0, "fail": 0, "pending": 0, "broken-before": 0}
    assert res["changed"] is False
    assert check(target(res, "ct:101"), "nvidia-uvm")["status"] == "ok"


def test_fixed_config_without_restart_still_fails(tmp_path):
    tree = scratch(tmp_path)
    fix(tree)
    res = health(tree)
    assert res["failed"] is True and res["failed_targets"] == ["ct:101"]


def test_ct_without_nvidia_smi_is_skipped(tmp_path):
    tree = scratch(tmp_path)
    fix(tree, restart=True)
    state = pct_state(tree)
    state["cts"]["101"]["nvidia_smi"] = False
    set_pct_state(tree, state)
    res = health(tree)
    assert not res.get("failed")
    ct = target(res, "ct:101")
    assert ct["status"] == "skip" and "no nvidia-smi" in ct["message"]
    assert check(ct, "nvidia-smi")["rc"] == 127 and check(ct, "nvidia-uvm")["status"] == "ok"


def test_ct_without_nvidia_smi_still_fails_on_the_uvm_probe(tmp_path):
    tree = scratch(tmp_path)
    state = pct_state(tree)
    state["cts"]["101"]["nvidia_smi"] = False
    set_pct_state(tree, state)
    res = health(tree)
    assert res["failed"] is True and target(res, "ct:101")["status"] == "fail"


def test_stopped_ct_is_skipped(tmp_path):
    tree = scratch(tmp_path)
    assert pct(tree, "stop", "101").returncode == 0
    res = health(tree)
    assert not res.get("failed")
    ct = target(res, "ct:101")
    assert ct["status"] == "skip" and "stopped" in ct["message"]


def test_check_mode_runs_the_same_read_only_commands(tmp_path):
    tree = scratch(tmp_path)
    before = tree_bytes(tree)
    res = health(tree, check_mode=True)
    assert res["failed"] is True and res["failed_targets"] == ["ct:101"]
    assert len(calls(tree)) == 4
    assert tree_bytes(tree) == before


def test_host_without_driver_is_skipped_and_gpu_cts_fail(tmp_path):
    tree = scratch(tmp_path)
    os.unlink(os.path.join(tree, "proc/driver/nvidia/version"))
    res = health(tree)
    host = target(res, "host")
    assert host["status"] == "skip" and "no NVIDIA driver" in host["message"]
    assert "couldn't communicate with the NVIDIA driver" in host["output"]
    ct = target(res, "ct:101")
    assert ct["status"] == "fail" and "cannot reach the NVIDIA driver" in ct["message"]


def test_host_without_nvidia_smi_is_skipped(tmp_path):
    tree = scratch(tmp_path)
    os.unlink(os.path.join(tree, ".pvetune/bin/nvidia-smi"))
    res = health(tree, cts=False)
    assert not res.get("failed")
    host = target(res, "host")
    assert host["status"] == "skip" and "no stand-in" in host["message"]
    assert res["skipped_commands"][0]["command"] == "nvidia-smi -L"


def test_gpu_fallen_off_the_bus_fails_host_and_ct(tmp_path):
    tree = scratch(tmp_path)
    fix(tree, restart=True)
    os.unlink(os.path.join(tree, "sys/bus/pci/devices/0000:e1:00.0"))
    res = health(tree)
    assert res["failed_targets"] == ["host", "ct:101"]
    assert "lists 7 GPU(s), expected 8" in target(res, "host")["message"]
    assert "lists 7 GPU(s), expected 8" in target(res, "ct:101")["message"]


def test_ct_without_the_195_allow_line_gets_nvml_unknown_error(tmp_path):
    tree = scratch(tmp_path)
    conf = read(tree, CONF_101).replace(b"lxc.cgroup2.devices.allow: c 195:* rwm\n", b"", 1)
    write(tree, CONF_101, conf.replace(b"c 511:* rwm", b"c 509:* rwm", 1))
    assert pct(tree, "reboot", "101").returncode == 0
    res = health(tree)
    ct = target(res, "ct:101")
    smi = check(ct, "nvidia-smi")
    assert smi["status"] == "fail" and smi["rc"] == 255
    assert "Failed to initialize NVML: Unknown Error" in smi["output"]


def test_devn_ct_expects_its_one_gpu(tmp_path):
    tree = scratch(tmp_path, "pve-gpu02")
    assert pct(tree, "start", "103").returncode == 0
    reset_calls(tree)
    res = health(tree, ctids=[103])
    assert not res.get("failed"), res.get("msg")
    ct = target(res, "ct:103")
    assert ct["status"] == "ok" and ct["expected_gpus"] == 1 and len(ct["gpus"]) == 1


def test_injected_nvidia_smi_failure_fails_the_host(tmp_path):
    tree = scratch(tmp_path)
    write(tree, ".pvetune/fail/nvidia-smi", "")
    res = health(tree, cts=False)
    host = target(res, "host")
    assert res["failed"] is True and host["status"] == "fail"
    assert "Driver/library version mismatch" in host["output"]


def test_unknown_ct_fails_cleanly(tmp_path):
    tree = scratch(tmp_path)
    res = health(tree, ctids=[105])
    assert res["failed"] is True and "CT 105" in res["msg"]


@pytest.mark.parametrize("bad", BAD_CTIDS)
def test_injection_in_ctids_is_rejected_before_anything_runs(tmp_path, bad):
    tree = scratch(tmp_path)
    res = health(tree, ctids=[bad])
    assert res["failed"] is True and "ctids" in res["msg"]
    assert calls(tree) == []


def test_parse_smi_list():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1c0cf2c4-5b6a-3e3f-8c2c-96c0f2a1b2c3)\n"
            "  MIG 1g.10gb     Device  0: (UUID: MIG-0f9a1c2e-7d3b-5a4c-9e8f-1a2b3c4d5e6f)\n"
            "GPU 1: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-77c8b86c-9f47-5b20-9639-86245e0fb4e8)\n"
            "No devices were found\n")
    assert parse_smi_list(text) == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1c0cf2c4-5b6a-3e3f-8c2c-96c0f2a1b2c3"},
        {"index": 1, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
         "uuid": "GPU-77c8b86c-9f47-5b20-9639-86245e0fb4e8"}]
    assert parse_smi_list("") == []


def test_a_ct_broken_before_the_run_is_reported_not_blamed_on_it(tmp_path):
    """Issue 33 (5): fix.yml --tags cmdline failed the host because CT 101's stale uvm line (older than the run,
    untouched by it) made the CT fail the gate. With the health before the first change as the baseline, the CT is
    broken-before: warned of, not a failed gate."""
    tree = scratch(tmp_path)
    before = health(tree)
    assert before["failed_targets"] == ["ct:101"]
    res = health(tree, baseline=before["targets"])
    assert not res.get("failed"), res.get("msg")
    assert res["failed_targets"] == [] and res["broken_before"] == ["ct:101"]
    ct = target(res, "ct:101")
    assert ct["status"] == "broken-before" and ct["message"].startswith("already failing before this run's first")
    assert "/dev/nvidia-uvm" in ct["message"]
    assert res["summary"] == {"ok": 1, "skip": 0, "fail": 0, "pending": 0, "broken-before": 1}
    assert any("ct:101: already failing before" in str(w) for w in res.get("warnings", []))


def test_what_got_worse_still_fails_the_gate(tmp_path):
    """A target that was fine (the host), or a check that passed before (the CT's nvidia-smi), failing now is the
    run's: the gate fails."""
    tree = scratch(tmp_path)
    before = health(tree)                                   # ct:101 fails only its uvm probe
    os.unlink(os.path.join(tree, "sys/bus/pci/devices/0000:e1:00.0"))   # a GPU falls off the bus
    res = health(tree, baseline=before["targets"])
    assert res["failed"] is True and res["failed_targets"] == ["host", "ct:101"]
    assert check(target(res, "ct:101"), "nvidia-smi")["status"] == "fail"


@pytest.mark.parametrize("bad", [[{"checks": []}], ["host"], [{"target": "host", "checks": "x"}]])
def test_a_baseline_that_is_no_targets_list_is_refused_by_name(tmp_path, bad):
    res = health(scratch(tmp_path), baseline=bad)
    assert res["failed"] is True and "baseline" in res["msg"], res["msg"]
