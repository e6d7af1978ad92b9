"""PCIe MaxReadReq fix (module_utils/pvetune/concerns/pcie/fix.py, library/pvetune_pcie_mrrs.py, Runner.run_system).

Every setpci here runs on a tmp tree with ``-A linux-sysfs -O sysfs.path=<tree>/sys/bus/pci``:
the guard below refuses any other command line before a process starts.
"""
import json
import os
import shutil
import subprocess
import sys

import pcibuild
import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.pvetune.boot import units as bootunits
from ansible.module_utils.pvetune.concerns.pcie.fix import (
    MrrsError,
    apply_step,
    boot_apply,
    devctl_with_mrrs,
    plan,
    select_functions,
    validate_config,
    validate_options,
)
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.runner import CommandUnavailable, Runner
from ansible.module_utils.pvetune.formats import pci_config
from modharness import run_module
from runtimeutil import run_helper

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))
from scratch_host import make_scratch  # noqa: E402

SETPCI = shutil.which("setpci")
GPUS = ["0000:01:00.0", "0000:21:00.0", "0000:41:00.0", "0000:61:00.0",
        "0000:81:00.0", "0000:a1:00.0", "0000:c1:00.0", "0000:e1:00.0"]
ROOT_PORTS = ["0000:00:01.1", "0000:20:01.1", "0000:40:01.1", "0000:60:01.1",
              "0000:80:01.1", "0000:a0:01.1", "0000:c0:01.1", "0000:e0:01.1"]
BAD_BDFS = ["0000:01:00.0; reboot", "$(id)", "--foo", "0000:01:00.0\n", "0" * 300, "0000:0A:00.0", "01:00.0",
            "0000:01:00.8", "../0000:01:00.0", ""]


def _has_sysfs_method():
    if not SETPCI:
        return False
    proc = subprocess.run([SETPCI, "-A", "help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False)
    return "linux-sysfs" in proc.stdout


needs_setpci = pytest.mark.skipif(not _has_sysfs_method(),
                                  reason="setpci (pciutils) with the linux-sysfs method is not installed")


# -- helpers ---------------------------------------------------------------------------------
def snapshot(root):
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                with open(path, "rb") as handle:
                    out[os.path.relpath(path, root)] = handle.read()
    return out


def config_file(root, bdf):
    return os.path.realpath(os.path.join(root, "sys/bus/pci/devices", bdf, "config"))


def config_bytes(root, bdf):
    with open(config_file(root, bdf), "rb") as handle:
        return handle.read()


def mrrs_of(root, bdf):
    return pci_config.parse_config(config_bytes(root, bdf))["mrrs"]


def set_mrrs_bytes(root, bdf, size):
    """What the firmware does at boot: MRRS back to ``size`` (bytes written directly, no setpci)."""
    data = bytearray(config_bytes(root, bdf))
    cap = pci_config.parse_config(bytes(data))["cap_exp"]
    word = int.from_bytes(data[cap + 8:cap + 10], "little")
    word = devctl_with_mrrs(word, size)
    data[cap + 8:cap + 10] = word.to_bytes(2, "little")
    with open(config_file(root, bdf), "wb") as handle:
        handle.write(bytes(data))


def guarded_run_fn(root):
    """run_fn for Runner: only setpci, only on ``root``'s tree."""
    sysfs = "sysfs.path=%s/sys/bus/pci" % os.path.realpath(root)

    def run(argv, data=None, environ_update=None, **_kw):
        assert os.path.basename(argv[0]) == "setpci", argv
        assert argv[1:5] == ["-A", "linux-sysfs", "-O", sysfs], argv
        assert "-A" not in argv[5:] and not any("sysfs.path" in a for a in argv[5:]), argv
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    return run


@pytest.fixture
def guard_module_commands(monkeypatch):
    """Wrap AnsibleModule.run_command: a module may only run setpci on the test's tree."""
    calls = []

    def install(root):
        check = guarded_run_fn(root)

        def run_command(_self, args, **kw):
            calls.append(list(args))
            return check(list(args), **kw)

        monkeypatch.setattr(AnsibleModule, "run_command", run_command)
        return calls

    return install


@pytest.fixture
def forbid_commands(monkeypatch):
    def run_command(_self, args, **_kw):
        raise AssertionError("no command may run here: %r" % (args,))

    monkeypatch.setattr(AnsibleModule, "run_command", run_command)


def scratch(tmp_path, host="pve-gpu01"):
    return make_scratch(host, str(tmp_path / host))


@pytest.fixture(scope="module")
def shared_gpu01(tmp_path_factory):
    """One pve-gpu01 copy for the tests that must leave it unchanged (each compares it)."""
    return scratch(tmp_path_factory.mktemp("shared"))


# -- options (pure) ------------------------------------------------------------------------------
def test_validate_options_defaults_and_dedup():
    assert validate_options() == {"mrrs": 4096, "vendor": "0x10de", "class_prefix": "0x03", "bdfs": None}
    assert validate_options(512, "0x1002", "0x0302", ["0000:01:00.0", "0000:01:00.0"])["bdfs"] == ["0000:01:00.0"]
    assert validate_options(bdfs=[])["bdfs"] is None


@pytest.mark.parametrize("kw", [
    {"mrrs": 100}, {"mrrs": 8192}, {"mrrs": True}, {"mrrs": "4096"}, {"mrrs": 0},
    {"vendor": "0x10de; reboot"}, {"vendor": "$(id)"}, {"vendor": "--foo"}, {"vendor": "0x10de\n"},
    {"vendor": "0x10DE"}, {"vendor": "10de"}, {"vendor": "0x" + "1" * 100},
    {"class_prefix": "0x03; reboot"}, {"class_prefix": "$(id)"}, {"class_prefix": "--foo"},
    {"class_prefix": "0x03\n"}, {"class_prefix": "0x0300000"}, {"class_prefix": "03"},
    {"bdfs": "0000:01:00.0"}, {"bdfs": ["0000:01:00.0"] * 300},
] + [{"bdfs": [bad]} for bad in BAD_BDFS])
def test_validate_options_rejects(kw):
    with pytest.raises(MrrsError):
        validate_options(**kw)


def test_validate_config():
    assert validate_config({"mrrs": 4096, "vendor": "0x10de", "class_prefix": "0x03", "bdfs": None})["mrrs"] == 4096
    assert validate_config({})["vendor"] == "0x10de"
    with pytest.raises(MrrsError):
        validate_config({"mrrs": 4096, "command": "reboot"})
    with pytest.raises(MrrsError):
        validate_config(["mrrs"])


def test_devctl_with_mrrs_touches_bits_14_12_only():
    assert devctl_with_mrrs(0x2137, 4096) == 0x5137
    assert devctl_with_mrrs(0xA137, 4096) == 0xD137  # bit 15 kept as it is
    assert devctl_with_mrrs(0x7FFF, 128) == 0x0FFF
    assert devctl_with_mrrs(0x0000, 4096) == 0x5000


def test_plan_on_the_demo_host(shared_gpu01):
    fs = FsRoot(shared_gpu01)
    functions, errors = select_functions(fs, validate_options())
    assert errors == [] and [f["bdf"] for f in functions] == GPUS
    steps = plan(functions, 4096)
    assert {(s["devctl_before"], s["devctl_after"], s["mrrs_before"], s["action"]) for s in steps} == {
        ("2137", "5137", 512, "set")}
    assert {s["device"] for s in steps} == {"10de:2bb5"}
    assert all(s["action"] == "none" for s in plan(functions, 512))


def test_select_explicit_bdfs(shared_gpu01):
    fs = FsRoot(shared_gpu01)
    functions, errors = select_functions(fs, validate_options(bdfs=["0000:21:00.0"]))
    assert [f["bdf"] for f in functions] == ["0000:21:00.0"] and errors == []
    _functions, errors = select_functions(fs, validate_options(bdfs=["0000:21:00.0", "0000:20:01.1",
                                                                     "0000:77:00.0"]))
    assert errors == ["0000:20:01.1 does not match vendor 0x10de and class prefix 0x03",
                      "0000:77:00.0: no such PCI function (/sys/bus/pci/devices/0000:77:00.0)"]


# -- Runner.run_system: the one way to run the real setpci for a tree ------------------------------
class Recorder:
    def __init__(self, result=(0, "", "")):
        self.calls = []
        self.result = result

    def __call__(self, argv, data=None, environ_update=None, **_kw):
        self.calls.append((argv, environ_update))
        return self.result


@needs_setpci
def test_run_system_accepts_exactly_the_tree_setpci(shared_gpu01):
    rec = Recorder((0, "2137\n", ""))
    runner = Runner(FsRoot(shared_gpu01), rec, path=(os.path.dirname(SETPCI or "/usr/bin/setpci"),))
    sysfs = pci_config.sysfs_path_for_root(FsRoot(shared_gpu01).root)
    args = pci_config.setpci_read_args("0000:01:00.0", sysfs)
    assert runner.run_system("setpci", args) == (0, "2137\n", "")
    argv, env = rec.calls[0]
    assert argv == [SETPCI] + args and env["PVETUNE_ROOT"] == FsRoot(shared_gpu01).root
    runner.run_system("setpci", pci_config.setpci_mrrs_args("0000:01:00.0", 4096, sysfs))
    assert rec.calls[1][0][-1] == "CAP_EXP+8.w=5000:7000"


def _bad_system_calls(root):
    sysfs = "sysfs.path=%s/sys/bus/pci" % root
    good = ["-A", "linux-sysfs", "-O", sysfs, "-s", "0000:01:00.0"]
    return [
        ("lspci", good + ["CAP_EXP+8.w"]),
        ("sh", ["-c", "id"]),
        ("update-grub", []),
        ("setpci", ["-s", "0000:01:00.0", "CAP_EXP+8.w"]),                       # no access method: real /sys
        ("setpci", ["-A", "linux-sysfs", "-O", "sysfs.path=/sys/bus/pci", "-s", "0000:01:00.0", "CAP_EXP+8.w"]),
        ("setpci", ["-A", "linux-sysfs", "-O", "sysfs.path=/tmp/elsewhere/sys/bus/pci", "-s", "0000:01:00.0",
                    "CAP_EXP+8.w"]),
        ("setpci", ["-O", sysfs, "-A", "linux-sysfs", "-s", "0000:01:00.0", "CAP_EXP+8.w"]),
        ("setpci", good + ["-A", "intel-conf1", "CAP_EXP+8.w"]),
        ("setpci", good + ["-O", "sysfs.path=/sys/bus/pci", "CAP_EXP+8.w"]),
        ("setpci", good + ["-s", "0000:21:00.0", "CAP_EXP+8.w"]),
        ("setpci", good + ["-f", "CAP_EXP+8.w"]),
        ("setpci", good + ["-H1", "CAP_EXP+8.w"]),
        ("setpci", good),                                                          # no operation
        ("setpci", ["-A", "linux-sysfs", "-O", sysfs, "CAP_EXP+8.w"]),           # no -s: every device
        ("setpci", ["-A", "linux-sysfs", "-O", sysfs, "-s", "01:00.0", "CAP_EXP+8.w"]),
        ("setpci", ["-A", "linux-sysfs", "-O", sysfs, "-s", "0000:01:00.0\n", "CAP_EXP+8.w"]),
        ("setpci", ["-A", "linux-sysfs", "-O", sysfs, "-s", "$(id)", "CAP_EXP+8.w"]),
        ("setpci", good + ["CAP_EXP+8.w; reboot"]),
        ("setpci", good + ["CAP_EXP+8.w=5000:7000\n"]),
        ("setpci", good + ["$(id)"]),
        ("setpci", ["-A", "linux-sysfs", "-O", sysfs, "-s", "0000:77:00.0", "CAP_EXP+8.w"]),  # not in the tree
    ]


def test_run_system_refuses_everything_else(shared_gpu01):
    root = FsRoot(shared_gpu01).root
    for name, argv in _bad_system_calls(root):
        rec = Recorder()
        runner = Runner(FsRoot(shared_gpu01), rec)
        with pytest.raises((CommandUnavailable, ValueError)):
            runner.run_system(name, argv)
        assert rec.calls == [], (name, argv)
    # and plain run() still refuses real commands for a tree
    with pytest.raises(CommandUnavailable):
        Runner(FsRoot(shared_gpu01), Recorder()).run("setpci", ["-s", "0000:01:00.0", "CAP_EXP+8.w"])


def test_run_system_refuses_a_device_link_out_of_the_tree(tmp_path):
    # A tree whose device symlink points at another directory (as an absolute link to /sys would).
    outside = tmp_path / "outside" / "0000:01:00.0"
    outside.mkdir(parents=True)
    (outside / "config").write_bytes(pcibuild.build_config(0x10DE, 0x2BB5, 0x030200))
    root = tmp_path / "tree"
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink(str(outside), str(root / "sys/bus/pci/devices/0000:01:00.0"))
    fs = FsRoot(str(root))
    rec = Recorder()
    with pytest.raises(CommandUnavailable, match="outside the root"):
        Runner(fs, rec).run_system("setpci", pci_config.setpci_mrrs_args("0000:01:00.0", 4096,
                                                                  pci_config.sysfs_path_for_root(fs.root)))
    assert rec.calls == []


def test_run_system_on_the_live_root_is_plain_run():
    rec = Recorder((0, "2137\n", ""))
    runner = Runner(FsRoot("/"), rec, path=("/nonexistent-pvetune-path",))
    with pytest.raises(CommandUnavailable):
        runner.run_system("setpci", ["-s", "0000:01:00.0", "CAP_EXP+8.w"])  # PATH lookup, not installed here
    assert rec.calls == []


# -- setpci output handling (fake runners: no process) ---------------------------------------------
class FakeSetpci:
    """A runner whose setpci 'succeeds' with the given answers; writes nothing."""

    def __init__(self, fsroot, answers):
        self.fsroot = fsroot
        self.answers = list(answers)
        self.calls = []

    def run_system(self, name, args):
        self.calls.append((name, args))
        return self.answers.pop(0)

    def which_system(self, name):
        return "/usr/bin/" + name


def _one_step(root, bdf="0000:01:00.0"):
    fs = FsRoot(root)
    functions, _ = select_functions(fs, validate_options(bdfs=[bdf]))
    return fs, plan(functions, 4096)[0]


def test_no_devices_selected_is_a_failure_although_setpci_exits_0(shared_gpu01):
    fs, step = _one_step(shared_gpu01)
    warning = "setpci: Warning: No devices selected for operation group 1.\n"
    runner = FakeSetpci(fs, [(0, "", warning)])
    apply_step(fs, runner, step)
    assert step["result"] == "failed" and "selected no device" in step["message"]
    assert len(runner.calls) == 1  # no read-back after a failed write


def test_readback_must_match_the_config_file(shared_gpu01):
    fs, step = _one_step(shared_gpu01)
    # setpci claims 5137 but the config still says 2137: a failure, not a success.
    apply_step(fs, FakeSetpci(fs, [(0, "", ""), (0, "5137\n", "")]), step)
    assert step["result"] == "failed" and "config reads Device Control 2137" in step["message"]
    fs, step = _one_step(shared_gpu01)
    apply_step(fs, FakeSetpci(fs, [(0, "", ""), (0, "garbage", "")]), step)
    assert step["result"] == "failed" and "unexpected setpci output" in step["message"]
    fs, step = _one_step(shared_gpu01)
    apply_step(fs, FakeSetpci(fs, [(1, "", "setpci: Unable to open /x")]), step)
    assert step["result"] == "failed" and "exited 1" in step["message"]


@needs_setpci
def test_real_setpci_prints_no_devices_selected_and_exits_0(shared_gpu01):
    """The behaviour the failure check exists for (run directly, on the tree only)."""
    sysfs = pci_config.sysfs_path_for_root(FsRoot(shared_gpu01).root)
    proc = guarded_run_fn(shared_gpu01)([SETPCI] + pci_config.setpci_read_args("0000:77:00.0", sysfs))
    assert proc[0] == 0 and "No devices selected" in proc[2]


# -- the module -------------------------------------------------------------------------------------
def test_module_check_mode_writes_nothing_and_runs_nothing(shared_gpu01, forbid_commands):
    before = snapshot(shared_gpu01)
    res = run_module("pvetune_pcie_mrrs", {"root": shared_gpu01}, check_mode=True, diff=True)
    assert "failed" not in res, res.get("msg")
    assert res["changed"] is True and res["reboot_required"] is False and res["skipped_commands"] == []
    assert [(f["bdf"], f["mrrs_before"], f["mrrs_after"], f["result"]) for f in res["functions"]] == [
        (bdf, 512, 4096, "planned") for bdf in GPUS]
    diff = [d for d in res["diff"] if d["before_header"] == "runtime values"][0]
    # MaxReadReq in bytes, the DevCtl word beside it (issue 15)
    assert diff["before"].splitlines() == ["pcie:%s MaxReadReq = 512 bytes (DevCtl 2137)" % bdf for bdf in GPUS]
    assert diff["after"].splitlines() == ["pcie:%s MaxReadReq = 4096 bytes (DevCtl 5137)" % bdf for bdf in GPUS]
    assert snapshot(shared_gpu01) == before


@needs_setpci
def test_module_apply_sets_4096_and_nothing_else_then_idempotent(tmp_path, guard_module_commands):
    root = scratch(tmp_path)
    calls = guard_module_commands(root)
    originals = {bdf: config_bytes(root, bdf) for bdf in GPUS + ROOT_PORTS}
    before = snapshot(root)
    res = run_module("pvetune_pcie_mrrs", {"root": root, "run_id": "t1"})
    assert "failed" not in res, res.get("msg")
    assert res["changed"] is True
    assert [f["result"] for f in res["functions"]] == ["done"] * 8
    for bdf in GPUS:
        old, new = originals[bdf], config_bytes(root, bdf)
        cap = pci_config.parse_config(old)["cap_exp"]
        assert pci_config.parse_config(new)["mrrs"] == 4096
        assert len(old) == len(new)
        diffs = [i for i in range(len(old)) if old[i] != new[i]]
        assert diffs == [cap + 9], bdf  # the high byte of Device Control
        assert (old[cap + 9] ^ new[cap + 9]) & ~0x70 == 0  # only bits 14:12 of the word
    for bdf in ROOT_PORTS:
        assert config_bytes(root, bdf) == originals[bdf]
    # every write was masked, and every command carried the tree's sysfs path (guard_module_commands)
    writes = [c[-1] for c in calls if "=" in c[-1]]
    assert len(writes) == 8 and all(w == "CAP_EXP+8.w=5000:7000" for w in writes)
    assert len(calls) == 16
    manifest = json.loads(open(os.path.join(root, "var/lib/pvetune/manifest.json")).read())
    assert manifest["runtime"]["pcie:0000:01:00.0:devctl"]["original"] == "2137"
    # nothing but the 8 configs and pvetune's state changed
    after = snapshot(root)
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    assert [p for p in changed if not p.startswith("var/lib/pvetune/")] == sorted(
        os.path.relpath(config_file(root, b), root) for b in GPUS)
    del calls[:]
    again = run_module("pvetune_pcie_mrrs", {"root": root, "run_id": "t2"})
    assert again["changed"] is False and calls == []
    assert [f["result"] for f in again["functions"]] == ["unchanged"] * 8


@needs_setpci
def test_module_bdfs_selection(tmp_path, guard_module_commands):
    root = scratch(tmp_path)
    guard_module_commands(root)
    res = run_module("pvetune_pcie_mrrs", {"root": root, "bdfs": ["0000:21:00.0", "0000:e1:00.0"]})
    assert "failed" not in res, res.get("msg")
    assert [f["bdf"] for f in res["functions"]] == ["0000:21:00.0", "0000:e1:00.0"]
    assert {bdf: mrrs_of(root, bdf) for bdf in GPUS} == {
        bdf: 4096 if bdf in ("0000:21:00.0", "0000:e1:00.0") else 512 for bdf in GPUS}


@pytest.mark.parametrize("bdfs", [["0000:77:00.0"], ["0000:20:01.1"], ["0000:01:00.0", "0000:77:00.0"]])
def test_module_unknown_or_unmatched_bdf_fails_before_any_write(shared_gpu01, forbid_commands, bdfs):
    before = snapshot(shared_gpu01)
    res = run_module("pvetune_pcie_mrrs", {"root": shared_gpu01, "bdfs": bdfs})
    assert res["failed"] is True
    assert snapshot(shared_gpu01) == before


@pytest.mark.parametrize("params", [{"bdfs": [bad]} for bad in BAD_BDFS] + [
    {"vendor": "0x10de; reboot"}, {"vendor": "$(id)"}, {"class_prefix": "--foo"}, {"class_prefix": "0x03\n"},
    {"mrrs": 8192}, {"mrrs": "4096; reboot"}, {"run_id": "$(id)"}, {"root": "relative/path"},
])
def test_module_rejects_injection_before_any_command(shared_gpu01, forbid_commands, params):
    before = snapshot(shared_gpu01)
    args = {"root": shared_gpu01}
    args.update(params)
    res = run_module("pvetune_pcie_mrrs", args)
    assert res["failed"] is True
    assert snapshot(shared_gpu01) == before


def test_module_without_setpci_skips_for_a_tree(shared_gpu01, monkeypatch, forbid_commands):
    monkeypatch.setattr(Runner, "which_system", lambda self, name: None)
    before = snapshot(shared_gpu01)
    res = run_module("pvetune_pcie_mrrs", {"root": shared_gpu01})
    assert "failed" not in res, res.get("msg")
    assert res["changed"] is False and res["skipped_commands"][0]["command"] == "setpci"
    assert {f["result"] for f in res["functions"]} == {"skipped"}
    assert snapshot(shared_gpu01) == before


# -- boot ---------------------------------------------------------------------------------------------
CONFIG = {"mrrs": 4096, "vendor": "0x10de", "class_prefix": "0x03", "bdfs": None}


@needs_setpci
def test_boot_apply_reapplies_after_a_simulated_reboot(tmp_path):
    root = scratch(tmp_path)
    fs = FsRoot(root)
    runner = Runner(fs, guarded_run_fn(root))
    ok, messages = boot_apply(fs, runner, CONFIG)
    assert ok, messages
    assert all(mrrs_of(root, bdf) == 4096 for bdf in GPUS)
    for bdf in GPUS:  # the firmware default again after a reboot
        set_mrrs_bytes(root, bdf, 512)
    runner = Runner(fs, guarded_run_fn(root))
    ok, messages = boot_apply(fs, runner, CONFIG)
    assert ok, messages
    assert all(mrrs_of(root, bdf) == 4096 for bdf in GPUS)
    assert len(messages) == 8 and "MaxReadReq 512 -> 4096" in messages[0]
    ok, messages = boot_apply(fs, Runner(fs, guarded_run_fn(root)), CONFIG)
    assert ok and messages == ["already 4096 bytes: %s" % " ".join(GPUS)]


def test_boot_apply_bad_config_and_missing_bdf(shared_gpu01):
    fs = FsRoot(shared_gpu01)
    rec = Recorder()
    ok, messages = boot_apply(fs, Runner(fs, rec), {"bdfs": ["$(id)"]})
    assert not ok and "bdfs" in messages[0]
    ok, messages = boot_apply(fs, Runner(fs, rec), {"bdfs": ["0000:77:00.0"], "mrrs": 512})
    assert not ok and "no such PCI function" in messages[0]
    assert rec.calls == []


@needs_setpci
def test_boot_helper_script_pcie_mrrs(tmp_path):
    root = scratch(tmp_path)
    os.makedirs(os.path.join(root, "etc/pvetune"), exist_ok=True)
    with open(os.path.join(root, "etc/pvetune/pcie-mrrs.json"), "w") as handle:
        json.dump(CONFIG, handle)
    proc = run_helper(root, "pcie-mrrs")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("MaxReadReq 512 -> 4096 bytes") == 8
    assert all(mrrs_of(root, bdf) == 4096 for bdf in GPUS)
    set_mrrs_bytes(root, "0000:41:00.0", 512)
    proc = run_helper(root, "pcie-mrrs")
    assert proc.returncode == 0 and proc.stdout.count("MaxReadReq 512 -> 4096 bytes") == 1
    assert mrrs_of(root, "0000:41:00.0") == 4096


# -- the unit -------------------------------------------------------------------------------------
def test_pcie_unit():
    live = bootunits.render_unit("pcie-mrrs")
    assert "ExecStart=/usr/local/sbin/pvetune-boot pcie-mrrs\n" in live
    for line in ("Type=oneshot", "RemainAfterExit=yes", "Before=pve-guests.service", "WantedBy=multi-user.target",
                 "After=nvidia-persistenced.service"):
        assert line + "\n" in live
    assert "systemd-modules-load.service" in live and "systemd-udev-settle.service" in live
    directives = [line for line in live.splitlines() if line and not line.startswith("#")]
    assert not any(line.startswith(("Wants=", "Requires=")) for line in directives)
    assert any(line.startswith("Documentation=") for line in directives)
