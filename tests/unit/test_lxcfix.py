"""pvetune_lxc_gpu, lxcgpu_boot.boot_apply, the pct/nvidia-modprobe stand-ins and pvetune-boot lxc-gpu.

Every test works on a scratch copy of a demo host (scripts/scratch_host.make_scratch) with the
stand-ins from tests/standins/ in <tree>/.pvetune/bin.  pve-gpu01: CT 101 (onboot, 8 GPUs) names
the stale nvidia-uvm major 511 on line 14 while the host's is 509; its snapshot section
[before-driver-580] has a 236 line that must stay; CT 102 has no GPU.  pve-gpu02: CT 103 passes
GPU 7 with devN entries.
"""
import atexit
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from ansible.module_utils.pvetune.boot import units as bootunits
from ansible.module_utils.pvetune.concerns.lxcgpu import boot as lxcgpu_boot
from ansible.module_utils.pvetune.concerns.lxcgpu import fix as lxcgpu_fix
from ansible.module_utils.pvetune.concerns.lxcgpu import pct as lxcgpu_pct
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.runner import Runner
from modharness import run_module
from runtimeutil import run_helper

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))
from scratch_host import make_scratch  # noqa: E402

STANDINS = os.path.join(TOP, "tests", "standins")
CONF_101 = "etc/pve/nodes/pve-gpu01/lxc/101.conf"
CONF_102 = "etc/pve/nodes/pve-gpu01/lxc/102.conf"
HOST_CONF_101 = "/etc/pve/nodes/pve-gpu01/lxc/101.conf"
STALE = b"lxc.cgroup2.devices.allow: c 511:* rwm\n"
FIXED = b"lxc.cgroup2.devices.allow: c 509:* rwm\n"
BOOKKEEPING = (".pvetune/calls.log",)


# -- helpers (also used by test_gpu_health.py) ---------------------------------------
_PRISTINE = {}


def _pristine(host):
    """One make_scratch() copy of a demo host per test session (stand-ins installed)."""
    if host not in _PRISTINE:
        base = tempfile.mkdtemp(prefix="pvetune-lxcfix-")
        atexit.register(shutil.rmtree, base, True)
        _PRISTINE[host] = make_scratch(host, os.path.join(base, host))
    return _PRISTINE[host]


def _skip_cpu_sysfs(directory, names):
    return ["system"] if directory.endswith("/sys/devices") else []


def scratch(tmp_path, host="pve-gpu01", full=False):
    """A scratch tree whose host has 'booted': the pct stand-in started the onboot CTs.

    ``full``: a complete make_scratch() copy.  Otherwise a copy of the session's make_scratch()
    tree without /sys/devices/system (thousands of per-CPU sysfs files nothing here reads;
    copying them made every test take seconds).
    """
    dest = str(tmp_path / host)
    if full:
        tree = make_scratch(host, dest)
    else:
        tree = shutil.copytree(_pristine(host), dest, symlinks=True, ignore=_skip_cpu_sysfs)
    pct(tree, "list")
    reset_calls(tree)
    return tree


def standin(tree, name, *args, env=None):
    full = dict(os.environ)
    full["PVETUNE_ROOT"] = str(tree)
    full.update(env or {})
    return subprocess.run([os.path.join(str(tree), ".pvetune", "bin", name)] + [str(a) for a in args], env=full,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)


def pct(tree, *args):
    return standin(tree, "pct", *args)


def calls(tree):
    path = os.path.join(str(tree), ".pvetune", "calls.log")
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def reset_calls(tree):
    path = os.path.join(str(tree), ".pvetune", "calls.log")
    if os.path.exists(path):
        os.unlink(path)


def tree_bytes(root, exclude=BOOKKEEPING):
    """Every file (content) and symlink (target) of the tree, bookkeeping of the stand-ins excluded."""
    out = {}
    for dirpath, dirs, files in os.walk(str(root)):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, str(root))
            if rel in exclude:
                continue
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            else:
                with open(path, "rb") as handle:
                    out[rel] = handle.read()
    return out


def read(tree, rel):
    with open(os.path.join(str(tree), rel), "rb") as handle:
        return handle.read()


def write(tree, rel, data):
    path = os.path.join(str(tree), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data if isinstance(data, bytes) else data.encode())


def pct_state(tree):
    return json.loads(read(tree, ".pvetune/pct-state.json"))


def set_pct_state(tree, state):
    write(tree, ".pvetune/pct-state.json", json.dumps(state, indent=2, sort_keys=True) + "\n")


def all_stopped(tree):
    """The host rebooted and pve-guests has not started anything yet."""
    state = pct_state(tree)
    for entry in state["cts"].values():
        entry.update(status="stopped", nodes={}, rules=[], started=None)
    set_pct_state(tree, state)


def change_uvm_major(tree, old, new):
    """What a reboot/driver reload with a different nvidia-uvm major leaves in the tree."""
    devices = read(tree, "proc/devices").decode()
    assert "%d nvidia-uvm" % old in devices
    write(tree, "proc/devices", devices.replace("%d nvidia-uvm" % old, "%d nvidia-uvm" % new))
    listing = read(tree, ".pvetune/dev_nvidia.ls").decode()
    write(tree, ".pvetune/dev_nvidia.ls", listing.replace("%d,   0" % old, "%d,   0" % new)
          .replace("%d,   1" % old, "%d,   1" % new))


def subprocess_run(argv, data=None, environ_update=None, **_kw):
    env = dict(os.environ)
    env.update(environ_update or {})
    proc = subprocess.run(argv, input=data, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def runner_for(tree):
    fsroot = FsRoot(str(tree))
    return fsroot, Runner(fsroot, subprocess_run)


def lines(data):
    return data.splitlines(True)


def fix(tree, **args):
    params = {"root": str(tree), "run_id": "t1"}
    params.update(args)
    return run_module("pvetune_lxc_gpu", params)


def warnings(res):
    """Warning texts (ansible-core 2.19 returns them as structured summaries)."""
    out = []
    for item in res.get("warnings", []):
        out.append(item if isinstance(item, str) else item.get("event", {}).get("msg", json.dumps(item)))
    return out


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


# -- check mode, apply, idempotence ----------------------------------------------------
def test_check_mode_writes_nothing_and_shows_the_diff(tmp_path):
    tree = scratch(tmp_path, full=True)
    before = tree_bytes(tree)
    res = run_module("pvetune_lxc_gpu", {"root": str(tree)}, check_mode=True, diff=True)
    assert res["changed"] is True and not res.get("failed")
    assert tree_bytes(tree) == before
    [ct] = res["cts"]
    assert ct["ctid"] == 101 and ct["path"] == HOST_CONF_101 and ct["status"] == "changed"
    assert ct["lines"] == ["-14: lxc.cgroup2.devices.allow: c 511:* rwm", "+14: lxc.cgroup2.devices.allow: c 509:* rwm"]
    [conf_diff] = [d for d in res["diff"] if d["after_header"] == HOST_CONF_101]
    assert "c 511:* rwm" in conf_diff["before"] and "c 511:* rwm" not in conf_diff["after"]
    assert "c 509:* rwm" in conf_diff["after"]
    assert res["host_majors"]["nvidia-uvm"] == 509
    assert res["state_changed"] is True
    # pct status is read-only and tells that 101 runs: it would need a restart
    assert ct["running"] is True and ct["needs_restart"] is True and res["restart_required"] == [101]
    assert calls(tree) == [["pct", "status", "101"]]


def test_check_mode_with_restart_restarts_nothing(tmp_path):
    tree = scratch(tmp_path)
    res = run_module("pvetune_lxc_gpu", {"root": str(tree), "restart": True}, check_mode=True)
    assert res["restarted"] == [] and res["restart_required"] == [101]
    assert [c for c in calls(tree) if c[1] != "status"] == []


def test_apply_changes_only_line_14_in_place_with_backup_and_state(tmp_path):
    tree = scratch(tmp_path)
    original = read(tree, CONF_101)
    other = read(tree, CONF_102)
    inode = os.stat(os.path.join(tree, CONF_101)).st_ino
    res = fix(tree)
    assert res["changed"] is True and not res.get("failed"), res
    new = read(tree, CONF_101)
    old_lines, new_lines = lines(original), lines(new)
    assert len(old_lines) == len(new_lines)
    assert [i + 1 for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b] == [14]
    assert old_lines[13] == STALE and new_lines[13] == FIXED
    snap = original.index(b"[before-driver-580]")
    assert new[snap + len(new) - len(original):] == original[snap:]
    assert b"c 236:* rwm" in new[new.index(b"[before-driver-580]"):]
    assert read(tree, CONF_102) == other
    # written in place (pmxcfs refuses rename-over): same inode; /etc/pve/lxc still the node symlink
    assert os.stat(os.path.join(tree, CONF_101)).st_ino == inode
    assert os.readlink(os.path.join(tree, "etc/pve/lxc")) == "nodes/pve-gpu01/lxc"
    backup = os.path.join(tree, "var/lib/pvetune/runs/t1", HOST_CONF_101.lstrip("/"))
    with open(backup, "rb") as handle:
        assert handle.read() == original
    manifest = json.loads(read(tree, "var/lib/pvetune/manifest.json"))
    assert manifest["files"][HOST_CONF_101]["existed"] is True
    state = json.loads(read(tree, "var/lib/pvetune/nvidia-majors.json"))
    assert state["current"]["nvidia-uvm"] == 509
    assert {195, 506, 507, 508, 509} <= set(state["nvidia_majors"])
    assert state["names"]["509"] == "nvidia-uvm"
    assert len(state["history"]) == 1 and state["history"][0]["run_id"] == "t1"
    assert res["changes"]["files"] == [{"path": HOST_CONF_101, "action": "update"}]
    assert res["reboot_required"] is False


def test_second_run_is_unchanged_and_keeps_the_state_file(tmp_path):
    tree = scratch(tmp_path)
    fix(tree)
    conf, state = read(tree, CONF_101), read(tree, "var/lib/pvetune/nvidia-majors.json")
    again = fix(tree, run_id="t2")
    assert again["changed"] is False and again["state_changed"] is False
    assert again["cts"][0]["status"] == "unchanged"
    assert read(tree, CONF_101) == conf
    assert read(tree, "var/lib/pvetune/nvidia-majors.json") == state
    assert not os.path.exists(os.path.join(tree, "var/lib/pvetune/runs/t2"))
    # 101 still runs with the rules it started with (511): it still needs the restart
    assert again["restart_required"] == [101]
    assert "do not cover /dev/nvidia-uvm (509:0)" in again["cts"][0]["messages"][0]


def test_ctids_choose_cts_and_unknown_ct_fails_before_writing(tmp_path):
    tree = scratch(tmp_path)
    conf = read(tree, CONF_101)
    res = fix(tree, ctids=["102"])
    assert [c["ctid"] for c in res["cts"]] == [102] and res["cts"][0]["status"] == "unchanged"
    assert res["changes"]["files"] == [] and res["state_changed"] is True     # first run: majors recorded
    assert read(tree, CONF_101) == conf
    before = tree_bytes(tree)
    res = fix(tree, ctids=[101, 105])
    assert res["failed"] is True and "CT 105" in res["msg"]
    assert tree_bytes(tree) == before


def test_devn_ct_on_gpu02_needs_nothing(tmp_path):
    tree = scratch(tmp_path, "pve-gpu02")
    res = fix(tree)
    assert res["changed"] is False   # fixed host: majors already recorded by the earlier fix run
    assert [(c["ctid"], c["status"]) for c in res["cts"]] == [(101, "unchanged"), (103, "unchanged")]
    os.unlink(os.path.join(tree, "var/lib/pvetune/nvidia-majors.json"))
    res = fix(tree, run_id="t2")
    assert res["changed"] is True and res["state_changed"] is True   # records the majors again
    assert fix(tree, run_id="t3")["changed"] is False


# -- refusals -------------------------------------------------------------------------
def add_ct(tree, ctid, data):
    write(tree, "etc/pve/nodes/pve-gpu01/lxc/%d.conf" % ctid, data)


def test_refused_ct_fails_the_task_after_fixing_the_others(tmp_path):
    tree = scratch(tmp_path)
    original = read(tree, CONF_101)
    included = original.replace(b"swap: 0\n", b"swap: 0\nlxc.include: /etc/pve/gpu-common.conf\n")
    add_ct(tree, 104, included)
    res = fix(tree)
    assert res["failed"] is True
    assert "CT 104" in res["msg"] and "lxc.include" in res["msg"]
    assert res["refused"] == [104]
    item = [c for c in res["cts"] if c["ctid"] == 104][0]
    assert item["status"] == "refused" and "lxc.include" in item["reason"]
    assert read(tree, "etc/pve/nodes/pve-gpu01/lxc/104.conf") == included
    assert lines(read(tree, CONF_101))[13] == FIXED     # the other CT was still fixed


def test_refused_ct_only_warns_without_fail_on_refused(tmp_path):
    tree = scratch(tmp_path)
    add_ct(tree, 104, read(tree, CONF_101).replace(b"swap: 0\n", b"swap: 0\nlxc.include: /etc/x.conf\n"))
    res = fix(tree, fail_on_refused=False)
    assert not res.get("failed") and res["refused"] == [104]
    assert any("CT 104" in w for w in warnings(res))


def test_ct_locked_by_proxmox_is_refused(tmp_path):
    tree = scratch(tmp_path)
    locked = read(tree, CONF_101).replace(b"swap: 0\n", b"swap: 0\nlock: backup\n")
    write(tree, CONF_101, locked)
    res = fix(tree, fail_on_refused=False)
    assert res["cts"][0]["status"] == "refused" and "lock: backup" in res["cts"][0]["reason"]
    assert read(tree, CONF_101) == locked


def test_config_lock_held_by_another_task_is_refused(tmp_path, monkeypatch):
    tree = scratch(tmp_path)
    monkeypatch.setattr(lxcgpu_pct, "LOCK_TIMEOUT", 0.3)
    lock = os.path.join(tree, "run/lock/lxc/pve-config-101.lock")
    os.makedirs(os.path.dirname(lock))
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        res = fix(tree, fail_on_refused=False)
    assert res["cts"][0]["status"] == "refused" and "held by another Proxmox task" in res["cts"][0]["reason"]
    assert lines(read(tree, CONF_101))[13] == STALE


def test_corrupt_state_file_fails_and_is_left_alone(tmp_path):
    tree = scratch(tmp_path)
    write(tree, "var/lib/pvetune/nvidia-majors.json", b"{not json")
    res = fix(tree)
    assert res["failed"] is True and "nvidia-majors.json" in res["msg"]
    assert read(tree, "var/lib/pvetune/nvidia-majors.json") == b"{not json"
    assert lines(read(tree, CONF_101))[13] == STALE


# -- restarts -------------------------------------------------------------------------
def test_running_ct_is_not_restarted_without_restart(tmp_path):
    tree = scratch(tmp_path)
    res = fix(tree)
    assert res["restart_required"] == [101] and res["restarted"] == []
    assert any("pct reboot 101" in w for w in warnings(res))
    assert not [c for c in calls(tree) if c[1] in ("reboot", "stop", "start")]


def test_running_ct_is_restarted_with_restart_and_gets_the_new_rules(tmp_path):
    tree = scratch(tmp_path)
    assert pct_state(tree)["cts"]["101"]["nodes"]["/dev/nvidia-uvm"] == "denied"
    res = fix(tree, restart=True, restart_timeout=30)
    assert not res.get("failed"), res
    assert res["restarted"] == [101] and res["restart_required"] == []
    assert res["cts"][0]["restarted"] is True and res["changed"] is True
    assert ["pct", "reboot", "101", "--timeout", "30"] in calls(tree)
    assert pct_state(tree)["cts"]["101"]["nodes"]["/dev/nvidia-uvm"] == "ok"
    assert "lxc.cgroup2.devices.allow = c 509:* rwm" in read(tree, "var/lib/lxc/101/config").decode()
    # 102 has no GPU: never looked at
    assert not [c for c in calls(tree) if "102" in c]
    again = fix(tree, run_id="t2", restart=True)
    assert again["changed"] is False and again["restarted"] == []


def test_stopped_ct_is_not_restarted(tmp_path):
    tree = scratch(tmp_path)
    assert pct(tree, "stop", "101").returncode == 0
    reset_calls(tree)
    res = fix(tree, restart=True)
    assert res["cts"][0]["changed"] is True and res["cts"][0]["running"] is False
    assert res["cts"][0]["needs_restart"] is False and res["restarted"] == []
    assert calls(tree) == [["pct", "status", "101"]]


def test_ct_fixed_earlier_but_still_running_old_rules_is_restarted_later(tmp_path):
    tree = scratch(tmp_path)
    fix(tree)                                   # config fixed, CT left running
    res = fix(tree, run_id="t2", restart=True)
    assert res["restarted"] == [101] and res["changed"] is True
    assert pct_state(tree)["cts"]["101"]["nodes"]["/dev/nvidia-uvm"] == "ok"


def test_failed_restart_is_reported_and_fails_the_task(tmp_path):
    tree = scratch(tmp_path)
    write(tree, ".pvetune/fail/pct", "reboot 101\n")
    res = fix(tree, restart=True)
    assert res["failed"] is True
    assert "CT 101 failed to restart" in res["msg"] and "startup for container '101' failed" in res["msg"]
    item = res["cts"][0]
    assert item["status"] == "restart_failed" and item["restarted"] is False
    assert lines(read(tree, CONF_101))[13] == FIXED          # the correct config stays
    assert [c for c in calls(tree) if c[1] == "reboot"] == [["pct", "reboot", "101", "--timeout", "120"]]


def test_restart_stops_at_the_first_failure(tmp_path):
    tree = scratch(tmp_path)
    add_ct(tree, 104, read(tree, CONF_101).replace(b"hostname: llm", b"hostname: llm2"))
    assert pct(tree, "start", "104").returncode == 0
    write(tree, ".pvetune/fail/pct", "reboot 101\n")
    reset_calls(tree)
    res = fix(tree, restart=True)
    assert res["failed"] is True and "not restarted: 104" in res["msg"]
    assert [c for c in calls(tree) if c[1] == "reboot"] == [["pct", "reboot", "101", "--timeout", "120"]]
    assert res["restart_required"] == [101, 104]


def test_ct_with_pending_changes_is_not_restarted(tmp_path):
    tree = scratch(tmp_path)
    write(tree, CONF_101, read(tree, CONF_101) + b"\n[pve:pending]\nmemory: 4096\n")
    res = fix(tree, restart=True)
    assert res["restarted"] == [] and res["restart_required"] == [101]
    assert "pending changes" in res["cts"][0]["messages"][0]


def test_locked_running_ct_is_not_restarted(tmp_path):
    tree = scratch(tmp_path)
    fix(tree)                                   # fixed, still running with 511
    write(tree, CONF_101, read(tree, CONF_101).replace(b"swap: 0\n", b"swap: 0\nlock: backup\n"))
    res = fix(tree, run_id="t2", restart=True)
    assert res["restarted"] == [] and res["restart_required"] == [101]
    assert "locked (lock: backup)" in res["cts"][0]["messages"][-1]
    assert not [c for c in calls(tree) if c[1] == "reboot"]


def test_empty_proc_devices_fails_before_anything_changes(tmp_path):
    tree = scratch(tmp_path)
    write(tree, "proc/devices", b"")
    before = tree_bytes(tree)
    res = fix(tree)
    assert res["failed"] is True and "Character devices" in res["msg"]
    assert tree_bytes(tree) == before and calls(tree) == []


def test_without_pct_the_running_state_is_unknown(tmp_path):
    tree = scratch(tmp_path)
    os.unlink(os.path.join(tree, ".pvetune/bin/pct"))
    res = fix(tree, restart=True)
    assert not res.get("failed") and res["cts"][0]["running"] is None and res["restarted"] == []
    assert res["skipped_commands"][0]["command"] == "pct status"


# -- input validation -----------------------------------------------------------------
BAD_CTIDS = ["101; reboot", "../101", "--force", "1e3", "101\n", "1234567890", " 101", "99", "0101", "-101", 1e3,
             True, None, "101 102", "$(reboot)"]


@pytest.mark.parametrize("bad", BAD_CTIDS)
def test_injection_in_ctids_is_rejected_before_anything_runs(tmp_path, bad):
    tree = scratch(tmp_path)
    before = tree_bytes(tree, exclude=())
    res = fix(tree, ctids=[101, bad], restart=True)
    assert res["failed"] is True and "ctids" in res["msg"]
    assert calls(tree) == []
    assert tree_bytes(tree, exclude=()) == before


@pytest.mark.parametrize("args", [{"cgroup_version": "3"}, {"restart_timeout": -1}, {"run_id": "../x"}])
def test_bad_options_are_rejected(tmp_path, args):
    tree = scratch(tmp_path)
    before = tree_bytes(tree, exclude=())
    res = fix(tree, **args)
    assert res["failed"] is True
    assert calls(tree) == [] and tree_bytes(tree, exclude=()) == before


def test_validate_ctids_normalises():
    assert lxcgpu_fix.validate_ctids([103, "101", 101, "999999999"]) == [101, 103, 999999999]
    assert lxcgpu_fix.validate_ctids([]) == [] and lxcgpu_fix.validate_ctids(None) == []
    with pytest.raises(ValueError):
        lxcgpu_fix.validate_ctids("101")


# -- boot-time re-application ------------------------------------------------------------
def test_boot_apply_after_a_reboot_with_a_new_uvm_major(tmp_path):
    tree = scratch(tmp_path)
    fix(tree)                                   # 511 -> 509, state records 509
    all_stopped(tree)
    change_uvm_major(tree, 509, 510)
    reset_calls(tree)
    fsroot, runner = runner_for(tree)
    ok, messages = lxcgpu_boot.boot_apply(fsroot, runner, {"ctids": [], "cgroup_version": "auto", "wait_seconds": 0})
    assert ok, messages
    new_lines = lines(read(tree, CONF_101))
    assert new_lines[13] == b"lxc.cgroup2.devices.allow: c 510:* rwm\n"
    assert any("CT 101" in m and "510" in m for m in messages)
    assert calls(tree) == []                    # nothing started, stopped or probed
    state = json.loads(read(tree, "var/lib/pvetune/nvidia-majors.json"))
    assert {509, 510} <= set(state["nvidia_majors"]) and state["current"]["nvidia-uvm"] == 510
    assert [h["majors"]["nvidia-uvm"] for h in state["history"]] == [509, 510]
    assert state["history"][1]["source"] == "pvetune-boot"
    # pve-guests starts the CT afterwards: it gets the new major
    assert pct(tree, "start", "101").returncode == 0
    assert pct_state(tree)["cts"]["101"]["nodes"]["/dev/nvidia-uvm"] == "ok"
    ok, messages = lxcgpu_boot.boot_apply(fsroot, runner, {"ctids": [101]})
    assert ok and any("already current" in m for m in messages)


def test_boot_apply_loads_uvm_with_nvidia_modprobe_when_the_node_is_missing(tmp_path):
    tree = scratch(tmp_path)
    all_stopped(tree)
    for rel in ("proc/devices", ".pvetune/dev_nvidia.ls"):
        write(tree, rel, b"".join(x for x in lines(read(tree, rel)) if b"nvidia-uvm" not in x))
    fsroot, runner = runner_for(tree)
    ok, messages = lxcgpu_boot.boot_apply(fsroot, runner, {"wait_seconds": 0})
    assert ok, messages
    assert calls(tree) == [["nvidia-modprobe", "-u", "-c0"]]
    assert b"237 nvidia-uvm" in read(tree, "proc/devices")      # find_dynamic_major: 254..234 first
    assert lines(read(tree, CONF_101))[13] == b"lxc.cgroup2.devices.allow: c 237:* rwm\n"


def test_boot_apply_gives_up_after_the_wait_and_changes_nothing_unsafe(tmp_path):
    tree = scratch(tmp_path)
    all_stopped(tree)
    os.unlink(os.path.join(tree, "proc/driver/nvidia/version"))
    for rel in ("proc/devices", ".pvetune/dev_nvidia.ls"):
        write(tree, rel, b"".join(x for x in lines(read(tree, rel)) if b"nvidia-uvm" not in x))
    original = read(tree, CONF_101)
    fsroot, runner = runner_for(tree)
    clock = FakeClock()
    ok, messages = lxcgpu_boot.boot_apply(fsroot, runner, {"wait_seconds": 5}, sleep=clock.sleep, clock=clock.clock)
    assert not ok
    assert 5 <= clock.now <= 7
    assert any("not ready after 5 s" in m for m in messages)
    assert any("CT 101: refused" in m and "/dev/nvidia-uvm" in m for m in messages)
    assert read(tree, CONF_101) == original
    assert calls(tree) == []                    # no driver: nvidia-modprobe not even tried


def test_boot_apply_without_gpu_cts_does_not_wait(tmp_path):
    tree = scratch(tmp_path)
    os.unlink(os.path.join(tree, CONF_101))
    os.unlink(os.path.join(tree, "proc/driver/nvidia/version"))
    fsroot, runner = runner_for(tree)
    clock = FakeClock()
    ok, messages = lxcgpu_boot.boot_apply(fsroot, runner, {}, sleep=clock.sleep, clock=clock.clock)
    assert ok and clock.now == 0 and "no CT passes NVIDIA devices" in messages


def test_boot_apply_without_pmxcfs_fails(tmp_path):
    tree = scratch(tmp_path)
    os.unlink(os.path.join(tree, "etc/pve/lxc"))
    fsroot, runner = runner_for(tree)
    ok, messages = lxcgpu_boot.boot_apply(fsroot, runner, {})
    assert not ok and "pmxcfs" in messages[0]


@pytest.mark.parametrize("config", [{"ctids": ["101; reboot"]}, {"ctids": "101"}, {"wait_seconds": "60"},
                                    {"wait_seconds": 10000}, {"cgroup_version": "v3"}, {"restart": True}, []])
def test_boot_apply_rejects_bad_configuration(tmp_path, config):
    tree = scratch(tmp_path)
    before = tree_bytes(tree, exclude=())
    fsroot, runner = runner_for(tree)
    ok, messages = lxcgpu_boot.boot_apply(fsroot, runner, config)
    assert not ok and messages[0].startswith("configuration: ")
    assert tree_bytes(tree, exclude=()) == before


def test_boot_apply_with_corrupt_state_still_fixes_but_fails_the_unit(tmp_path):
    tree = scratch(tmp_path)
    write(tree, "var/lib/pvetune/nvidia-majors.json", b"[]")
    fsroot, runner = runner_for(tree)
    ok, messages = lxcgpu_boot.boot_apply(fsroot, runner, {"wait_seconds": 0})
    assert not ok and any("nvidia-majors.json" in m for m in messages)
    assert lines(read(tree, CONF_101))[13] == FIXED
    assert read(tree, "var/lib/pvetune/nvidia-majors.json") == b"[]"


def run_boot_helper(tmp_path, tree, *args):
    return run_helper(tree, *args)


def test_pvetune_boot_lxc_gpu_as_a_subprocess(tmp_path):
    tree = scratch(tmp_path)
    all_stopped(tree)
    write(tree, "etc/pvetune/lxc-gpu.json", json.dumps({"ctids": [], "cgroup_version": "auto", "wait_seconds": 0}))
    proc = run_boot_helper(tmp_path, tree, "lxc-gpu")
    assert proc.returncode == 0, proc.stderr
    assert "pvetune-boot lxc-gpu: CT 101:" in proc.stdout and "c 509:* rwm" in proc.stdout
    assert lines(read(tree, CONF_101))[13] == FIXED
    runs = os.listdir(os.path.join(tree, "var/lib/pvetune/runs"))
    assert len(runs) == 1 and runs[0].startswith("boot-")
    assert calls(tree) == []


def test_pvetune_boot_lxc_gpu_bad_configuration(tmp_path):
    tree = scratch(tmp_path)
    write(tree, "etc/pvetune/lxc-gpu.json", json.dumps({"ctids": ["101\nreboot"]}))
    proc = run_boot_helper(tmp_path, tree, "lxc-gpu")
    assert proc.returncode == 1 and "configuration: ctids" in proc.stderr
    assert lines(read(tree, CONF_101))[13] == STALE and calls(tree) == []


# -- the unit -------------------------------------------------------------------------
def render_unit(root):
    return bootunits.render_unit("lxc-gpu")


def unit_values(text, key):
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(key + "=")]


def test_unit_orders_before_the_guests_and_after_pmxcfs_and_the_driver():
    text = render_unit("/")
    assert unit_values(text, "Type") == ["oneshot"]
    assert unit_values(text, "Before") == ["pve-guests.service"]
    after = unit_values(text, "After")[0].split()
    assert {"pve-cluster.service", "systemd-modules-load.service", "nvidia-persistenced.service"} <= set(after)
    assert unit_values(text, "Wants") == ["pve-cluster.service"] and not unit_values(text, "Requires")
    assert unit_values(text, "ExecStartPre") == ["-/usr/bin/nvidia-modprobe -u -c0"]
    assert unit_values(text, "ExecStart") == ["/usr/local/sbin/pvetune-boot lxc-gpu"]
    assert unit_values(text, "WantedBy") == ["multi-user.target"]


# -- stand-ins ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["pct", "nvidia-smi", "nvidia-modprobe"])
@pytest.mark.parametrize("root", [None, "", "/", "relative/dir", "/nonexistent/pvetune"])
def test_standins_refuse_without_a_tree(tmp_path, name, root):
    env = dict(os.environ)
    env.pop("PVETUNE_ROOT", None)
    if root is not None:
        env["PVETUNE_ROOT"] = root
    proc = subprocess.run([os.path.join(STANDINS, name), "-L" if name == "nvidia-smi" else "list"], env=env,
                          cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    assert proc.returncode == 2 and "refusing" in proc.stderr
    assert not os.path.exists("/.pvetune/calls.log")
    assert os.listdir(str(tmp_path)) == []


def test_pct_standin_follows_the_real_cli(tmp_path):
    tree = scratch(tmp_path)
    listing = pct(tree, "list")
    assert listing.returncode == 0
    assert listing.stdout.splitlines() == ["%-10s %-10s %-12s %-20s" % row for row in (
        ("VMID", "Status", "Lock", "Name"), ("101", "running", "", "llm"), ("102", "stopped", "", "monitoring"))]
    assert pct(tree, "status", "101").stdout == "status: running\n"
    bad = pct(tree, "status", "101; reboot")
    assert bad.returncode == 255 and "400 Parameter verification failed." in bad.stderr
    missing = pct(tree, "status", "105")
    assert missing.returncode == 255 and "'nodes/pve-gpu01/lxc/105.conf' does not exist" in missing.stderr
    assert pct(tree, "start", "101").stderr == "CT 101 already running\n"
    assert pct(tree, "reboot", "102").stderr == "VM 102 not running\n"
    assert pct(tree, "stop", "102").stderr == "CT 102 not running\n"
    nothing = pct(tree, "exec", "101", "--", "ls")
    assert nothing.returncode == 127 and 'Failed to exec "ls"' in nothing.stderr
    stopped = pct(tree, "exec", "102", "--", "nvidia-smi", "-L")
    assert stopped.returncode == 1 and "Failed to get init pid" in stopped.stderr
    assert calls(tree)[0] == ["pct", "list"]
    write(tree, ".pvetune/fail/pct", "status\n")
    down = pct(tree, "status", "101")
    assert down.returncode == 111 and "Connection refused" in down.stderr
    assert pct(tree, "list").returncode == 0


def test_pct_start_fails_like_proxmox_for_a_missing_devn_node(tmp_path):
    tree = scratch(tmp_path, "pve-gpu02")
    listing = read(tree, ".pvetune/dev_nvidia.ls")
    write(tree, ".pvetune/dev_nvidia.ls", b"".join(x for x in lines(listing) if not x.endswith(b"/dev/nvidia7\n")))
    proc = pct(tree, "start", "103")
    assert proc.returncode == 255 and proc.stderr == "Device /dev/nvidia7 does not exist\n"
    assert pct(tree, "status", "103").stdout == "status: stopped\n"


def test_nvidia_modprobe_standin(tmp_path):
    tree = scratch(tmp_path)
    assert standin(tree, "nvidia-modprobe", "-u", "-c0").returncode == 0        # all there: no change
    assert b"509 nvidia-uvm" in read(tree, "proc/devices")
    assert standin(tree, "nvidia-modprobe", "--bogus").returncode == 1
    write(tree, ".pvetune/fail/nvidia-modprobe", "")
    assert standin(tree, "nvidia-modprobe", "-u").returncode == 1
    assert calls(tree) == [["nvidia-modprobe", "-u", "-c0"], ["nvidia-modprobe", "--bogus"], ["nvidia-modprobe", "-u"]]


def test_scratch_tree_is_independent_of_the_demo(tmp_path):
    tree = scratch(tmp_path)
    fix(tree, restart=True)
    demo = os.path.join(TOP, "demo", "snapshots", "pve-gpu01", CONF_101)
    with open(demo, "rb") as handle:
        assert STALE in handle.read()
    shutil.rmtree(tree)


def test_state_file_diff_is_one_line_of_majors_per_side():
    from ansible.module_utils.pvetune.concerns.lxcgpu import fix as lxcgpu_fix
    state = {"current": {"nvidia": 195, "nvidia-uvm": 509}, "history": [{}], "nvidia_majors": [195, 509]}
    diff = lxcgpu_fix.state_diff(None, state)
    assert diff["before"] == "absent\n"
    assert diff["after"] == ("current NVIDIA majors: nvidia 195, nvidia-uvm 509; 1 history entries; "
                             "all NVIDIA majors seen: 195, 509\n")
