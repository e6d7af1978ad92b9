"""cpufreq: P-state driver mode, governor and EPP (concerns/cpufreq/fix.py, pstate_fix.py, library/pvetune_cpufreq.py).

Everything runs on tmp trees (scratch copies of the demo hosts or small hand-made trees);
nothing here reads or writes this machine's /sys.
"""
import errno
import json
import os
import sys

import pytest
from ansible.module_utils.pvetune.boot import units as bootunits
from ansible.module_utils.pvetune.concerns.cpufreq.fix import (
    CpufreqError,
    apply_mode,
    apply_policies,
    boot_apply,
    group_reasons,
    group_runtime,
    group_steps,
    grouped_diff,
    plan_mode,
    plan_policies,
    predict_after_switch,
    read_state,
    validate_config,
    write_sysfs,
)
from ansible.module_utils.pvetune.core.cpuprofile import PSTATE
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from modharness import run_module
from runtimeutil import run_helper

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))
from scratch_host import make_scratch  # noqa: E402

POLDIR = "sys/devices/system/cpu/cpufreq"
AMD_PSTATE_STATUS = PSTATE["AuthenticAMD"]["status_file"]
INJECTIONS = ["performance; reboot", "$(id)", "--foo", "performance\n", "p" * 40, "Performance", "",
              "performance powersave", "../../etc"]


# -- helpers -----------------------------------------------------------------------
def snapshot(root):
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                with open(path, "rb") as handle:
                    out[os.path.relpath(path, root)] = handle.read()
    return out


def scratch(tmp_path, host):
    return make_scratch(host, str(tmp_path / host))


@pytest.fixture(scope="module")
def shared_gpu02(tmp_path_factory):
    """One detuned pve-gpu02 copy for the tests that must leave it unchanged (each compares it)."""
    root = scratch(tmp_path_factory.mktemp("shared"), "pve-gpu02")
    detune(root, nums=[0])
    return root


def pol_file(root, num, name):
    return os.path.join(root, POLDIR, "policy%d" % num, name)


def read(root, num, name):
    with open(pol_file(root, num, name)) as handle:
        return handle.read().strip()


def write(root, num, name, value):
    with open(pol_file(root, num, name), "w") as handle:
        handle.write(value + "\n")


def make_cpu_tree(root, policies, status=None, vendor="AuthenticAMD"):
    """A minimal cpufreq tree: policies = [{"num", "driver", "governor", "epp", "cpus"}], the P-state driver's
    status file when ``status`` is given, and a /proc/cpuinfo naming ``vendor``."""
    os.makedirs(os.path.join(str(root), "proc"), exist_ok=True)
    with open(os.path.join(str(root), "proc/cpuinfo"), "w") as handle:
        handle.write("processor\t: 0\nvendor_id\t: %s\nmodel name\t: test CPU\n\n" % vendor)
    base = os.path.join(str(root), POLDIR)
    for pol in policies:
        pdir = os.path.join(base, "policy%d" % pol["num"])
        os.makedirs(pdir)
        files = {"affected_cpus": pol.get("cpus", str(pol["num"])), "scaling_driver": pol["driver"],
                 "scaling_governor": pol["governor"]}
        if pol["driver"] in ("amd-pstate-epp", "intel_pstate"):
            files["scaling_available_governors"] = "performance powersave "
            files["energy_performance_available_preferences"] = \
                "default performance balance_performance balance_power power "
            files["energy_performance_preference"] = pol["epp"]
        else:
            files["scaling_available_governors"] = "conservative ondemand userspace powersave performance schedutil "
        for name, value in files.items():
            with open(os.path.join(pdir, name), "w") as handle:
                handle.write(value + "\n")
    if status is not None:
        path = FsRoot(str(root)).path(PSTATE[vendor]["status_file"])
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as handle:
            handle.write(status + "\n")
    return FsRoot(str(root))


class FakeKernel:
    """A writer with amd-pstate-epp / intel_pstate (HWP) semantics, on a tree: records the order of writes.

    governor performance forces EPP performance; an EPP write other than performance while the
    governor is performance fails with EBUSY; writing a P-state driver's status switches every policy's driver.
    """

    def __init__(self):
        self.writes = []

    def __call__(self, fsroot, host_path, value):
        self.writes.append((host_path, value))
        pdir, name = os.path.split(host_path)
        if name == "energy_performance_preference":
            if fsroot.read_value(pdir + "/scaling_governor") == "performance" and value != "performance":
                raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))
        write_sysfs(fsroot, host_path, value)
        if name == "scaling_governor" and value == "performance" and fsroot.exists(
                pdir + "/energy_performance_preference"):
            write_sysfs(fsroot, pdir + "/energy_performance_preference", "performance")
        row = {r["status_file"]: r for r in PSTATE.values()}.get(host_path)
        if row:
            for pol in read_state(fsroot)["policies"]:
                write_sysfs(fsroot, pol["dir"] + "/scaling_driver", row["modes"][value])
                if value == "active":
                    for fname, content in (("scaling_available_governors", "performance powersave"),
                                           ("energy_performance_available_preferences",
                                            "default performance balance_performance balance_power power")):
                        with open(fsroot.path(pol["dir"]) + "/" + fname, "w") as handle:
                            handle.write(content + "\n")
                    with open(fsroot.path(pol["dir"]) + "/energy_performance_preference", "w") as handle:
                        handle.write("performance\n")
                    write_sysfs(fsroot, pol["dir"] + "/scaling_governor", row["initial_governor"])


def epp_policy(num, governor="powersave", epp="balance_power", cpus=None):
    return {"num": num, "driver": "amd-pstate-epp", "governor": governor, "epp": epp,
            "cpus": str(num) if cpus is None else cpus}


# -- options ---------------------------------------------------------------------------
def test_validate_config_accepts_the_policy_values():
    assert validate_config({"amd_pstate_mode": "active", "governor": "performance", "epp": "performance"}) == {
        "amd_pstate_mode": "active", "intel_pstate_mode": None, "governor": "performance", "epp": "performance",
        "boost": None}
    assert validate_config({}) == {"amd_pstate_mode": None, "intel_pstate_mode": None, "governor": None,
                                   "epp": None, "boost": None}
    assert validate_config({"epp": "balance_performance"})["epp"] == "balance_performance"


@pytest.mark.parametrize("bad", INJECTIONS + [1, ["performance"]])
@pytest.mark.parametrize("key", ["governor", "epp"])
def test_validate_config_rejects_injection(key, bad):
    with pytest.raises(CpufreqError):
        validate_config({key: bad})


@pytest.mark.parametrize("config", [{"amd_pstate_mode": "enabled"}, {"amd_pstate_mode": "active\n"},
                                    {"intel_pstate_mode": "guided"}, {"intel_pstate_mode": "off"},
                                    {"mode": "active"}, ["active"]])
def test_validate_config_rejects_bad_mode_and_keys(config):
    with pytest.raises(CpufreqError):
        validate_config(config)


# -- planning (pure) -------------------------------------------------------------------
def test_plan_governor_first_then_epp_forced_by_the_kernel(tmp_path):
    fs = make_cpu_tree(tmp_path, [epp_policy(0), epp_policy(1, "performance", "performance")])
    plan = plan_policies(read_state(fs), "performance", "performance")
    assert plan["errors"] == []
    assert [(s["policy"], s["before"], s["after"]) for s in plan["governor"]] == [("policy0", "powersave",
                                                                                    "performance")]
    # policy0's EPP changes too, but by the governor write (the kernel forces it): no EPP write needed.
    assert [(s["policy"], s["before"], s["after"], s["write"]) for s in plan["epp"]] == [
        ("policy0", "balance_power", "performance", False)]


def test_plan_refuses_epp_other_than_performance_under_governor_performance(tmp_path):
    fs = make_cpu_tree(tmp_path, [epp_policy(0, "powersave", "power")])
    plan = plan_policies(read_state(fs), "performance", "balance_power")
    assert len(plan["errors"]) == 1
    assert "EBUSY" in plan["errors"][0] and "governor powersave" in plan["errors"][0]
    # the same EPP with the powersave governor is fine, and is a real EPP write
    plan = plan_policies(read_state(fs), "powersave", "balance_power")
    assert plan["errors"] == [] and plan["governor"] == []
    assert [(s["after"], s["write"]) for s in plan["epp"]] == [("balance_power", True)]


def test_plan_nothing_when_governor_and_epp_already_performance(tmp_path):
    fs = make_cpu_tree(tmp_path, [epp_policy(n, "performance", "performance") for n in range(4)])
    plan = plan_policies(read_state(fs), "performance", "performance")
    assert plan == {"governor": [], "epp": [], "skipped": [], "epp_skipped": [], "errors": []}


def test_plan_names_not_offered_fail_clearly(tmp_path):
    fs = make_cpu_tree(tmp_path, [epp_policy(0)])
    plan = plan_policies(read_state(fs), "schedutil", None)
    assert plan["errors"] == ["policy0 (amd-pstate-epp) does not offer governor schedutil "
                              "(offers: performance powersave)"]
    plan = plan_policies(read_state(fs), None, "turbo")
    assert "does not offer EPP turbo" in plan["errors"][0]


def test_plan_skips_epp_without_driver_support_and_offline_policies(tmp_path):
    fs = make_cpu_tree(tmp_path, [
        {"num": 0, "driver": "acpi-cpufreq", "governor": "schedutil"},
        {"num": 1, "driver": "acpi-cpufreq", "governor": "schedutil", "cpus": ""},
        {"num": 2, "driver": "acpi-cpufreq", "governor": "performance"},
    ])
    plan = plan_policies(read_state(fs), "performance", "performance")
    assert plan["errors"] == []
    assert [s["policy"] for s in plan["governor"]] == ["policy0"]
    assert [s["policy"] for s in plan["skipped"]] == ["policy1"]
    assert "offline" in plan["skipped"][0]["reason"]
    assert group_reasons(plan["epp_skipped"]) == [{
        "policies": "0,2", "count": 2,
        "reason": "scaling driver acpi-cpufreq offers no EPP (energy_performance_preference): EPP needs "
                  "amd_pstate in active mode"}]


def test_plan_without_any_policy_is_an_error(tmp_path):
    fs = FsRoot(str(tmp_path))
    assert plan_policies(read_state(fs), "performance", None)["errors"]
    assert plan_policies(read_state(fs), None, None)["errors"] == []


def test_plan_mode():
    base = {"pstate": "amd_pstate", "pstate_present": True, "pstate_status": "passive", "policies": []}
    assert plan_mode(base, None)["action"] == "not_requested"
    assert plan_mode(base, "passive")["action"] == "none"
    step = plan_mode(base, "active")
    assert (step["action"], step["before"], step["after"], step["reboot_required"]) == (
        "switch", "passive", "active", False)
    missing = {"pstate": "amd_pstate", "pstate_present": False, "pstate_status": None, "policies": [
        {"name": "policy0", "num": 0, "online": True, "driver": "acpi-cpufreq"}]}
    step = plan_mode(missing, "active")
    assert step["action"] == "unavailable" and step["reboot_required"] is True
    assert "amd_pstate=active" in step["message"] and "acpi-cpufreq" in step["message"]
    # Booted with the argument already (or another mode): only a missing/different argument needs a reboot.
    for cmdline, reboot in (("ro quiet amd_pstate=active", False), ("ro amd-pstate=active", False),
                            ("amd_pstate=active amd_pstate=passive", True), ("ro amd_pstate=passive", True),
                            ("ro quiet", True), (None, True)):
        step = plan_mode(dict(missing, cmdline=cmdline), "active")
        assert step["action"] == "unavailable" and step["reboot_required"] is reboot, cmdline
    step = plan_mode(dict(missing, cmdline="ro amd_pstate=active"), "active")
    assert "did not load" in step["message"] and "CPPC" in step["message"]


def test_module_no_reboot_when_booted_with_the_arg_and_amd_pstate_absent(tmp_path):
    # A host without CPPC (amd_pstate cannot load): once amd_pstate=active is on /proc/cmdline another
    # reboot changes nothing, so the module must not ask for one (fix.yml would reboot it on every run).
    root = scratch(tmp_path, "pve-gpu01")
    with open(os.path.join(root, "proc/cmdline")) as handle:
        cmdline = handle.read().strip()
    with open(os.path.join(root, "proc/cmdline"), "w") as handle:
        handle.write(cmdline + " amd_pstate=active\n")
    res = run_module("pvetune_cpufreq", args(root))
    assert "failed" not in res, res.get("msg")
    assert res["pstate"]["action"] == "unavailable" and res["reboot_required"] is False
    assert "did not load" in res["pstate"]["message"]


def test_predict_after_switch_to_active_and_passive(tmp_path):
    fs = make_cpu_tree(tmp_path, [{"num": 0, "driver": "amd-pstate", "governor": "schedutil"}], status="passive")
    state = read_state(fs)
    active = predict_after_switch(state, "active")
    assert active["predicted"] and active["policies"][0]["driver"] == "amd-pstate-epp"
    assert active["policies"][0]["epp"] == "performance"
    assert state["policies"][0]["driver"] == "amd-pstate"  # the input is not modified
    passive = predict_after_switch(active, "passive")
    assert passive["policies"][0]["epp"] is None and passive["policies"][0]["governor"] == "schedutil"


# -- applying on small trees -------------------------------------------------------------
def test_apply_writes_governor_before_epp_and_skips_forced_epp(tmp_path):
    fs = make_cpu_tree(tmp_path, [epp_policy(0), epp_policy(1, "powersave", "power")])
    kernel = FakeKernel()
    plan = plan_policies(read_state(fs), "performance", "performance")
    assert apply_policies(fs, plan, kernel) == []
    written = [os.path.basename(p) for p, _ in kernel.writes]
    assert written == ["scaling_governor", "scaling_governor"]  # EPP needed no write at all
    assert [s["result"] for s in plan["epp"]] == ["set by the kernel with the governor"] * 2
    assert read(str(tmp_path), 1, "energy_performance_preference") == "performance"


def test_apply_epp_write_after_governor_powersave(tmp_path):
    fs = make_cpu_tree(tmp_path, [epp_policy(0, "performance", "performance")])
    kernel = FakeKernel()
    plan = plan_policies(read_state(fs), "powersave", "balance_performance")
    assert apply_policies(fs, plan, kernel) == []
    # Had EPP been written first, the kernel would have refused it (EBUSY under performance).
    assert [os.path.basename(p) for p, _ in kernel.writes] == ["scaling_governor", "energy_performance_preference"]
    assert read(str(tmp_path), 0, "energy_performance_preference") == "balance_performance"


def test_apply_reports_ebusy_with_the_reason(tmp_path):
    fs = make_cpu_tree(tmp_path, [epp_policy(0, "performance", "performance")])
    # A plan made without the governor step (e.g. stale), so the EPP write meets the kernel's refusal.
    plan = {"governor": [], "epp": [{"policy": "policy0", "num": 0, "attribute": "energy_performance_preference",
                                     "path": "/sys/devices/system/cpu/cpufreq/policy0/energy_performance_preference",
                                     "before": "performance", "after": "power", "write": True}]}
    failures = apply_policies(fs, plan, FakeKernel())
    assert len(failures) == 1 and "EBUSY" in failures[0] and "governor is performance" in failures[0]
    assert plan["epp"][0]["result"] == "failed"


def test_apply_mode_switch_verified_with_the_drivers(tmp_path):
    fs = make_cpu_tree(tmp_path, [{"num": 0, "driver": "amd-pstate", "governor": "schedutil"}], status="passive")
    step = apply_mode(fs, plan_mode(read_state(fs), "active"), FakeKernel())
    assert step["action"] == "switched" and step["after"] == "active" and step["reboot_required"] is False
    assert read_state(fs)["policies"][0]["driver"] == "amd-pstate-epp"


def test_apply_mode_not_effective_is_written_back_and_reported(tmp_path):
    # A plain tree cannot switch drivers: status reads back, the policies do not follow.
    fs = make_cpu_tree(tmp_path, [{"num": 0, "driver": "amd-pstate", "governor": "schedutil"}], status="passive")
    step = apply_mode(fs, plan_mode(read_state(fs), "active"))
    assert step["action"] == "failed" and step["reboot_required"] is True
    assert "not effective" in step["message"] and "amd_pstate=active" in step["message"]
    assert fs.read_value(AMD_PSTATE_STATUS) == "passive"


def test_apply_mode_refused_write(tmp_path):
    fs = make_cpu_tree(tmp_path, [{"num": 0, "driver": "amd-pstate", "governor": "schedutil"}], status="passive")

    def refuse(_fs, _path, _value):
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))

    step = apply_mode(fs, plan_mode(read_state(fs), "guided"), refuse)
    assert step["action"] == "failed" and "EINVAL" in step["message"] and "amd_pstate=guided" in step["message"]
    assert fs.read_value(AMD_PSTATE_STATUS) == "passive"


def test_write_sysfs_never_creates_files(tmp_path):
    fs = FsRoot(str(tmp_path))
    with pytest.raises(OSError):
        write_sysfs(fs, "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor", "performance")
    assert not os.path.exists(os.path.join(str(tmp_path), "sys"))


# -- grouping -------------------------------------------------------------------------------
def test_group_128_policies_into_one_line():
    entries = [{"key": "cpufreq:policy%d:scaling_governor" % n, "before": "schedutil", "after": "performance",
                "path": "/x"} for n in range(128)]
    entries += [{"key": "cpufreq:policy%d:scaling_governor" % n, "before": "powersave", "after": "performance",
                 "path": "/x"} for n in (130, 131, 140)]
    entries.insert(0, {"key": "amd_pstate:status", "before": "passive", "after": "active", "path": "/x"})
    grouped = group_runtime(entries)
    assert grouped == [
        {"key": "amd_pstate:status", "before": "passive", "after": "active", "count": 1},
        {"key": "cpufreq:policy[0-127]:scaling_governor", "before": "schedutil", "after": "performance",
         "count": 128},
        {"key": "cpufreq:policy[130-131,140]:scaling_governor", "before": "powersave", "after": "performance",
         "count": 3},
    ]
    diff = grouped_diff(entries)
    assert diff["after"].count("\n") == 3
    assert "cpufreq:policy[0-127]:scaling_governor = schedutil\n" in diff["before"]
    steps = [{"attribute": "scaling_governor", "before": "a", "after": "b", "num": n} for n in (3, 1, 2, 9)]
    assert group_steps(steps) == [{"attribute": "scaling_governor", "before": "a", "after": "b",
                                   "policies": "1-3,9", "count": 4}]


# -- the module on scratch copies of the demo hosts ---------------------------------------------
def args(root, **kw):
    base = {"root": str(root), "amd_pstate_mode": "active", "governor": "performance", "epp": "performance"}
    base.update(kw)
    return base


def detune(root, nums=range(64), governor="powersave", epp="balance_power"):
    for num in nums:
        write(root, num, "scaling_governor", governor)
        write(root, num, "energy_performance_preference", epp)


def test_module_check_mode_writes_nothing_and_groups_the_diff(tmp_path):
    root = scratch(tmp_path, "pve-gpu02")
    detune(root)
    before = snapshot(root)
    res = run_module("pvetune_cpufreq", args(root), check_mode=True, diff=True)
    assert "failed" not in res, res.get("msg")
    assert res["changed"] is True and res["reboot_required"] is False
    assert snapshot(root) == before
    assert res["changes"]["runtime"] == [
        {"key": "cpufreq:policy[0-63]:scaling_governor", "before": "powersave", "after": "performance",
         "count": 64},
        {"key": "cpufreq:policy[0-63]:energy_performance_preference", "before": "balance_power",
         "after": "performance", "count": 64},
    ]
    assert len(res["diff"]) == 1 and res["diff"][0]["after"].count("\n") == 2
    assert res["policies"][0]["policies"] == "0-63"


def test_module_apply_then_idempotent_and_recorded_for_rollback(tmp_path):
    root = scratch(tmp_path, "pve-gpu02")
    detune(root, nums=range(64, 128), governor="powersave", epp="power")
    res = run_module("pvetune_cpufreq", args(root, run_id="t1"))
    assert "failed" not in res, res.get("msg")
    assert res["changed"] is True
    for num in range(128):
        assert read(root, num, "scaling_governor") == "performance"
        assert read(root, num, "energy_performance_preference") == "performance"
    manifest = json.loads(open(os.path.join(root, "var/lib/pvetune/manifest.json")).read())
    entry = manifest["runtime"]["cpufreq:policy100:energy_performance_preference"]
    assert entry["original"] == "power" and entry["path"].endswith("policy100/energy_performance_preference")
    assert len([k for k in manifest["runtime"] if k.startswith("cpufreq:")]) == 128
    again = run_module("pvetune_cpufreq", args(root, run_id="t2"))
    assert again["changed"] is False and again["changes"]["runtime"] == []


def test_module_offline_policy_is_skipped_and_reported(tmp_path):
    root = scratch(tmp_path, "pve-gpu02")
    detune(root, nums=[5, 6, 7])
    write(root, 5, "affected_cpus", "")
    write(root, 7, "affected_cpus", "")
    res = run_module("pvetune_cpufreq", args(root))
    assert "failed" not in res, res.get("msg")
    assert res["skipped_policies"] == [{"policies": "5,7", "count": 2,
                                        "reason": "affected_cpus is empty: every CPU of the policy is offline"}]
    assert read(root, 5, "scaling_governor") == "powersave"
    assert read(root, 6, "scaling_governor") == "performance"
    assert res["policies"][0]["policies"] == "6"


def test_module_acpi_cpufreq_needs_the_boot_arg(tmp_path):
    root = scratch(tmp_path, "pve-gpu01")
    for num in (0, 1, 2):
        write(root, num, "scaling_governor", "schedutil")
    res = run_module("pvetune_cpufreq", args(root))
    assert "failed" not in res, res.get("msg")
    assert res["reboot_required"] is True and res["pstate"]["action"] == "unavailable"
    assert any("amd_pstate=active" in m for m in res["messages"])
    assert res["epp_skipped"][0]["policies"] == "0-127"
    assert res["changes"]["runtime"] == [{"key": "cpufreq:policy[0-2]:scaling_governor", "before": "schedutil",
                                          "after": "performance", "count": 3}]
    assert read(root, 1, "scaling_governor") == "performance"


def test_module_mode_switch_failure_is_reported_not_failed(tmp_path):
    root = scratch(tmp_path, "pve-gpu03")  # amd-pstate passive; a tree cannot switch the driver
    res = run_module("pvetune_cpufreq", args(root))
    assert "failed" not in res, res.get("msg")
    assert res["pstate"]["action"] == "failed" and res["reboot_required"] is True
    assert res["changed"] is False
    with open(os.path.join(root, "sys/devices/system/cpu/amd_pstate/status")) as handle:
        assert handle.read() == "passive\n"
    strict = run_module("pvetune_cpufreq", args(root, require_runtime_mode=True))
    assert strict["failed"] is True and "amd_pstate=active" in strict["msg"]


def test_module_check_mode_predicts_after_a_mode_switch(tmp_path):
    root = scratch(tmp_path, "pve-gpu03")
    before = snapshot(root)
    res = run_module("pvetune_cpufreq", args(root), check_mode=True, diff=True)
    assert res["predicted"] is True and res["pstate"]["action"] == "switch"
    assert res["drivers"] == {"amd-pstate-epp": "0-127"}
    assert "amd_pstate:status = active" in res["diff"][0]["after"]
    assert snapshot(root) == before


@pytest.mark.parametrize("options", [
    {"governor": "schedutil"},              # not offered by amd-pstate-epp
    {"epp": "turbo"},                       # not offered
    {"governor": "performance", "epp": "power"},  # the kernel would refuse it (EBUSY)
])
def test_module_refuses_before_writing(shared_gpu02, options):
    root = shared_gpu02
    before = snapshot(root)
    res = run_module("pvetune_cpufreq", args(root, **options))
    assert res["failed"] is True
    assert snapshot(root) == before


@pytest.mark.parametrize("bad", INJECTIONS)
@pytest.mark.parametrize("key", ["governor", "epp"])
def test_module_rejects_injection_before_anything(shared_gpu02, key, bad):
    root = shared_gpu02
    before = snapshot(root)
    res = run_module("pvetune_cpufreq", args(root, **{key: bad}))
    assert res["failed"] is True
    assert snapshot(root) == before


# -- boot --------------------------------------------------------------------------------------
CONFIG = {"amd_pstate_mode": "active", "governor": "performance", "epp": "performance"}


def test_boot_apply_reapplies_after_a_simulated_reboot(tmp_path):
    root = scratch(tmp_path, "pve-gpu02")
    detune(root, nums=range(128), governor="powersave", epp="balance_performance")  # as after a reboot
    before_manifest = os.path.exists(os.path.join(root, "var/lib/pvetune/manifest.json"))
    ok, messages = boot_apply(FsRoot(root), None, CONFIG)
    assert ok, messages
    assert "scaling_governor powersave -> performance on policy 0-127" in messages
    assert all(read(root, n, "energy_performance_preference") == "performance" for n in range(128))
    assert os.path.exists(os.path.join(root, "var/lib/pvetune/manifest.json")) == before_manifest
    ok, messages = boot_apply(FsRoot(root), None, CONFIG)
    assert ok and messages == ["governor performance, epp performance already set where offered"]


def test_boot_apply_reports_mode_but_fails_on_bad_config(tmp_path):
    root = scratch(tmp_path, "pve-gpu01")
    ok, messages = boot_apply(FsRoot(root), None, CONFIG)
    assert ok and messages[0].startswith("warning: ") and "amd_pstate=active" in messages[0]
    ok, messages = boot_apply(FsRoot(root), None, {"governor": "$(id)"})
    assert not ok and "governor" in messages[0]
    ok, messages = boot_apply(FsRoot(root), None, {"governor": "turbo"})
    assert not ok and any("does not offer governor turbo" in m for m in messages)


def run_boot_helper(tmp_path, root, sub):
    return run_helper(root, sub)


def test_boot_helper_script_cpufreq(tmp_path):
    root = scratch(tmp_path, "pve-gpu02")
    detune(root, nums=range(8))
    os.makedirs(os.path.join(root, "etc/pvetune"), exist_ok=True)
    with open(os.path.join(root, "etc/pvetune/cpufreq.json"), "w") as handle:
        json.dump(CONFIG, handle)
    proc = run_boot_helper(tmp_path, root, "cpufreq")
    assert proc.returncode == 0, proc.stderr
    assert "pvetune-boot cpufreq: scaling_governor powersave -> performance on policy 0-7" in proc.stdout
    assert read(root, 3, "scaling_governor") == "performance"
    with open(os.path.join(root, "etc/pvetune/cpufreq.json"), "w") as handle:
        json.dump({"governor": "performance; reboot"}, handle)
    proc = run_boot_helper(tmp_path, root, "cpufreq")
    assert proc.returncode == 1 and "governor" in proc.stderr


# -- the unit -------------------------------------------------------------------------------------
def test_cpufreq_unit():
    live = bootunits.render_unit("cpufreq")
    assert "ExecStart=/usr/local/sbin/pvetune-boot cpufreq\n" in live
    for line in ("Type=oneshot", "RemainAfterExit=yes", "Before=pve-guests.service", "WantedBy=multi-user.target"):
        assert line + "\n" in live
    assert "After=systemd-modules-load.service" in live and "Documentation=" in live


def test_plan_mode_intel_and_a_status_the_kernel_never_reports():
    intel = {"pstate": "intel_pstate", "pstate_present": True, "pstate_status": "passive", "policies": []}
    step = plan_mode(intel, "active")
    assert (step["driver"], step["action"], step["reboot_required"]) == ("intel_pstate", "switch", False)
    assert plan_mode(dict(intel, pstate_status="off"), "active")["action"] == "switch"
    odd = plan_mode(dict(intel, pstate_status="turbo"), "active")
    assert odd["action"] == "unknown" and "nothing written" in odd["message"]
    # intel_pstate not loaded: its boot argument, unless the kernel was booted with it already.
    gone = dict(intel, pstate_present=False, pstate_status=None, policies=[
        {"name": "policy0", "num": 0, "online": True, "driver": "acpi-cpufreq"}])
    step = plan_mode(gone, "active")
    assert step["action"] == "unavailable" and step["reboot_required"] is True
    assert "intel_pstate=active" in step["message"]
    assert plan_mode(dict(gone, cmdline="ro intel_pstate=active"), "active")["reboot_required"] is False
    assert plan_mode({"pstate": None, "pstate_status": None, "vendor": "HygonGenuine", "policies": []},
                     "active")["action"] == "not_applicable"


def test_apply_mode_switches_intel_pstate_to_active(tmp_path):
    fs = make_cpu_tree(tmp_path, [{"num": 0, "driver": "intel_cpufreq", "governor": "schedutil"}], status="passive",
                       vendor="GenuineIntel")
    state = read_state(fs)
    assert (state["pstate"], state["pstate_status"]) == ("intel_pstate", "passive")
    step = apply_mode(fs, plan_mode(state, "active"), FakeKernel())
    assert step["action"] == "switched" and step["reboot_required"] is False
    after = read_state(fs)["policies"][0]
    assert (after["driver"], after["governor"]) == ("intel_pstate", "powersave")
    predicted = predict_after_switch(state, "active")["policies"][0]
    assert (predicted["governor"], predicted["epp"]) == ("powersave", "balance_performance")


def test_boot_apply_on_the_intel_host_sets_governor_and_epp_and_leaves_the_amd_mode_alone(tmp_path):
    """pvetune-boot cpufreq with the fix's configuration (both vendors' modes) on pve-gpu05 after a reboot."""
    root = scratch(tmp_path, "pve-gpu05")  # as booted: powersave, EPP balance_performance, intel_pstate active
    config = dict(CONFIG, intel_pstate_mode="active")
    ok, messages = boot_apply(FsRoot(root), None, config)
    assert ok, messages
    assert messages == ["scaling_governor powersave -> performance on policy 0-159",
                        "energy_performance_preference balance_performance -> performance on policy 0-159"]
    with open(os.path.join(root, "sys/devices/system/cpu/intel_pstate/status")) as handle:
        assert handle.read() == "active\n"
    assert not os.path.exists(os.path.join(root, "sys/devices/system/cpu/amd_pstate"))
    ok, messages = boot_apply(FsRoot(root), None, config)
    assert ok and messages == ["governor performance, epp performance already set where offered"]
