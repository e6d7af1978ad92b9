"""The GPUs' own runtime state: gpu.power_limit, gpu.clocks, gpu.health (concerns/gpu) and nvidia.compute_capability
(concerns/nvidia_stack), on real nvidia-smi -q outputs, kernel logs with Xid lines and AER counters
(tests/fixtures/realdata/gpu_runtime, nvidia_smi; their sources in SOURCES.md there)."""
import copy
import json
import os
import re

import pytest
from ansible.module_utils.pvetune.concerns.gpu import checks as gpu
from ansible.module_utils.pvetune.concerns.nvidia import checks as nvidia
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.formats.aer_stats import parse_aer_counters
from ansible.module_utils.pvetune.formats.kernel_xid import parse_xid_lines
from ansible.module_utils.pvetune.formats.modprobe_conf import option_values
from ansible.module_utils.pvetune.formats.nvidia_smi_q import parse_gpu_state
from ansible.module_utils.pvetune.tables.cuda_targets import compute_capability
from checkcases import assert_scenario, scenario_id, setv
from smitree import set_power_limit

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(HERE, "..", "fixtures", "realdata")
H100 = "thamada_H100SXMx8_smi_nvidia-smi-q.txt"
RTX5090 = os.path.join("gpu_runtime", "thamada_rtx5090_nvidia_smi_q.txt")


def real(*parts):
    with open(os.path.join(REAL, *parts)) as handle:
        return handle.read()


def smi_facts(name, subdir="nvidia_smi"):
    text = real(subdir, name) if subdir else real(name)
    smi = nvidia.parse_nvidia_smi(text)
    smi["state"] = parse_gpu_state(text)
    return smi


ZERO_AER = {kind: {"total": 0, "counters": {}} for kind in ("correctable", "nonfatal", "fatal")}


def good_facts():
    """Eight H100 SXM (the real -q: 700 W limits at their defaults, applications clocks at their defaults, idle), each
    behind a switch port with zero AER counts, a clean kernel log, one running CT with CUDA 12.4."""
    smi = smi_facts(H100)
    bdfs = [g["bus_id"][-12:] for g in smi["gpus"]]
    ports = ["0000:%02x:01.0" % (int(b[5:7], 16) - 1) for b in bdfs]
    functions = [{"bdf": b, "is_gpu": True, "driver": "nvidia", "device_id": 0x2330,
                  "model": "GH100 [H100 SXM5 80GB]", "numa_node": 0, "chain": [p, b], "path": "/sys/devices/x/" + b}
                 for b, p in zip(bdfs, ports)]
    return {
        "pci": {"functions": functions, "bridges": {p: {"bdf": p, "path": "/sys/devices/x/" + p} for p in ports},
                "evidence": []},
        "nvidia": {"version": {"version": "565.57.01", "open": True}, "smi": smi, "smi_reason": None,
                   "evidence": ["nvidia-smi -q"]},
        "gpu": {"xid": [], "xid_reason": None, "aer": {d: copy.deepcopy(ZERO_AER) for d in bdfs + ports},
                "evidence": ["journalctl -k -b 0: 0 Xid events"]},
        "ct_runtime": {"cts": [{"ctid": "101", "running": True,
                                "libs": {"root": "/proc/4242/root", "reason": None, "dirs": ["/usr/local/cuda/lib64"],
                                         "links": {}, "versions": {"libcudart.so": ["12.4.127"],
                                                                   "libcublas.so": ["12.4.5.8"]}}}],
                       "evidence": []},
    }


H100_BUSES = sorted(re.findall(r"^GPU ([0-9A-F:.]+)$", real("nvidia_smi", H100), re.M))


def state(index, *path):
    """The path inside the smi state of the index-th GPU (its bus id from the real file)."""
    bus = H100_BUSES[index].lower()
    return ("nvidia", "smi", "state", bus) + path


def as_blackwell(facts):
    for fn in facts["pci"]["functions"]:
        fn.update(device_id=0x2bb5, model="GB202GL [RTX PRO 6000 Blackwell Server Edition]")


FIRST, PORT0 = "0000:18:00.0", "0000:17:01.0"
XID79 = {"bus": "0000:18:00", "xid": 79, "count": 2, "first": "GPU has fallen off the bus.",
         "last": "GPU has fallen off the bus."}

SCENARIOS = [
    # -- gpu.power_limit ---------------------------------------------------------------------------------------
    ("gpu.power_limit", "pass", [], None, "every GPU at its default power limit", False),
    ("gpu.power_limit", "fail", [setv(state(2, "power", "limit"), 300.0), setv(state(2, "power", "requested"), 300.0)],
     None, "capped at 300 W, 400 W below 700 W (it may go up to 700 W)", False),
    ("gpu.power_limit", "warn", [setv(state(0, "power", "limit"), 650.0)], None,
     "700 W requested, 650 W enforced", False),
    ("gpu.power_limit", "warn", [], {"gpu_power_limit": 450}, "700 W, above the policy's 450 W", False),
    ("gpu.power_limit", "pass", [lambda f: [s["power"].update(limit=450.0, requested=450.0)
                                            for s in f["nvidia"]["smi"]["state"].values()]],
     {"gpu_power_limit": 450}, "every GPU at its 450 W power limit", False),
    ("gpu.power_limit", "skip", [setv(("nvidia", "smi"), None), setv(("nvidia", "smi_reason"), "nvidia-smi not "
                                                                  "installed")], None,
     "nvidia-smi -q not read: nvidia-smi not installed", False),
    ("gpu.power_limit", "skip", [lambda f: [s.update(power={}) for s in f["nvidia"]["smi"]["state"].values()]], None,
     "gives no power limit for this GPU (N/A)", False),
    ("gpu.power_limit", "error", [setv(("pci",), {"error": "/sys/bus/pci/devices: Permission denied"})], None,
     "/sys/bus/pci/devices: Permission denied", False),
    # -- gpu.clocks --------------------------------------------------------------------------------------------
    ("gpu.clocks", "pass", [], None, "default clocks, no hardware slowdown on any GPU", False),
    ("gpu.clocks", "fail", [setv(state(3, "clocks", "applications"), {"graphics": 1410, "memory": 2619})], None,
     "applications clocks 1410/2619 MHz, default 1980/2619 MHz: left by nvidia-smi -ac", False),
    ("gpu.clocks", "warn", [setv(state(3, "events"), ["Applications Clocks Setting"])], None,
     "the clock event reason 'Applications Clocks Setting' is active with the applications clocks at their "
     "defaults: locked clocks", False),
    ("gpu.clocks", "warn", [setv(state(5, "throttle"), ["SW Power Cap", "HW Thermal Slowdown"]),
                            setv(state(5, "events"), ["SW Power Cap", "HW Thermal Slowdown"])], None,
     "held down by HW Thermal Slowdown: cooling, the PSU or the platform's power brake", False),
    ("gpu.clocks", "pass", [setv(state(5, "throttle"), ["SW Power Cap"]), setv(state(5, "events"), ["SW Power Cap"])],
     None, "default clocks", False),
    ("gpu.clocks", "skip", [setv(("pci", "functions"), [])], None, "no host-owned NVIDIA GPU", False),
    ("gpu.clocks", "error", [setv(("nvidia",), {"error": "/proc/devices: Permission denied"})], None,
     "/proc/devices: Permission denied", False),
    # -- gpu.health --------------------------------------------------------------------------------------------
    ("gpu.health", "pass", [], None, "no Xid errors, no uncorrectable PCIe or memory errors on 8 GPUs", False),
    ("gpu.health", "fail", [setv(("gpu", "xid"), [XID79])], None,
     "Xid 79 x2 since boot: GPU has fallen off the bus", False),
    ("gpu.health", "pass", [setv(("gpu", "xid"), [dict(XID79, xid=13, count=4)])], None, "no Xid errors", False),
    ("gpu.health", "warn", [setv(("gpu", "aer", PORT0, "nonfatal"), {"total": 3, "counters": {"CmpltTO": 3}})],
     None, "AER nonfatal errors on its upstream port 0000:17:01.0: 3 (CmpltTO 3)", False),
    ("gpu.health", "pass", [setv(("gpu", "aer", FIRST, "correctable"), {"total": 12, "counters": {"BadTLP": 12}})],
     None, "no Xid errors", False),
    ("gpu.health", "fail", [setv(state(0, "remap_failure"), True)], None, "a row remapping FAILED", False),
    ("gpu.health", "warn", [setv(state(0, "remap_pending"), True)], None, "a row remap or page retirement is pending",
     False),
    ("gpu.health", "fail", [setv(("gpu", "xid"), [dict(XID79, bus="0000:c1:00")])], None,
     "0000:c1:00 (not on the PCI bus now): Xid 79", False),
    ("gpu.health", "error", [setv(("gpu", "aer", FIRST, "error"), "/sys/x/aer_dev_fatal: not a '<error> <count>' "
                                  "line: 'x'")], None, "not a '<error> <count>' line", False),
    ("gpu.health", "pass", [setv(("gpu", "xid_reason"), "journalctl not installed")], None, "no Xid errors", False),
    ("gpu.health", "error", [setv(("gpu",), {"error": "TypeError: boom"})], None, "TypeError: boom", False),
    # -- nvidia.compute_capability -----------------------------------------------------------------------------
    ("nvidia.compute_capability", "pass", [], None, "every checked GPU CT's CUDA runtime targets sm_90", False),
    ("nvidia.compute_capability", "fail", [as_blackwell], None,
     "CUDA runtime 12.4 (libcudart.so.12.4.127, libcublas.so.12.4.5.8) cannot target the GPUs' compute capability "
     "12.0 (sm_120, first in CUDA 12.8)", False),
    ("nvidia.compute_capability", "warn", [as_blackwell, setv(("ct_runtime", "cts", 0, "libs", "versions",
                                                               "libcudart.so"), ["12.4.127", "12.8.90"])], None,
     "CUDA 12.8 fits, but libcudart.so.12.4.127, libcublas.so.12.4.5.8 predates CUDA 12.8", False),
    ("nvidia.compute_capability", "fail", [setv(("ct_runtime", "cts", 0, "libs", "versions"),
                                                {"libcudart.so": ["11.7.99"]})], None,
     "cannot target the GPUs' compute capability 9.0 (sm_90, first in CUDA 11.8)", False),
    ("nvidia.compute_capability", "skip", [setv(("ct_runtime", "cts", 0, "libs", "versions"), {})], None,
     "no running GPU CT with a CUDA runtime", False),
    ("nvidia.compute_capability", "skip", [lambda f: [fn.update(device_id=0x1234, model="") for fn in
                                                      f["pci"]["functions"]]], None, "not in the table", False),
    ("nvidia.compute_capability", "error", [setv(("ct_runtime",), {"error": "/proc: Permission denied"})], None,
     "/proc: Permission denied", False),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario_id(s) for s in SCENARIOS])
def test_scenario(scenario):
    assert_scenario(good_facts(), scenario)


# -- readers on real inputs ---------------------------------------------------------------------------------------
def test_power_and_clocks_of_real_outputs_in_both_driver_forms():
    h100 = parse_gpu_state(real("nvidia_smi", H100))["00000000:18:00.0"]
    assert h100["power"] == {"draw": 100.89, "limit": 700.0, "requested": 700.0, "default": 700.0, "min": 200.0,
                             "max": 700.0}
    assert h100["clocks"]["applications"] == h100["clocks"]["default_applications"] == {"graphics": 1980,
                                                                                        "memory": 2619}
    assert (h100["events"], h100["throttle"], h100["replays"], h100["addressing"]) == (["Idle"], [], 7, "None")
    # driver 384: "Power Readings", "Power Limit" (requested) and "Enforced Power Limit"; clocks N/A
    gtx = parse_gpu_state(real("nvidia_smi", "eler_gtx1080ti_driver384_persistence_disabled_smi_q_gpu0.txt"))
    (old,) = gtx.values()
    assert (old["power"]["limit"], old["power"]["requested"], old["power"]["max"]) == (280.0, 280.0, 330.0)
    assert "applications" not in old["clocks"] and old["addressing"] is None
    rtx = parse_gpu_state(real(RTX5090))["00000000:02:00.0"]
    assert rtx["addressing"] == "HMM" and rtx["power"]["default"] == 575.0 and rtx["events"] == ["SW Power Cap"]


def test_memory_health_of_real_captures():
    """A100 SXM (555.42.02): one GPU with a pending row remap; A40 x10 at their power cap now (SW Power Cap, not a
    hardware reason); H100 x8 clean."""
    a100 = parse_gpu_state(real("nvidia_smi", "thamada_A100SXMx4_smi_nvidia-smi-q.txt"))
    assert a100["00000000:9e:00.0"]["remap_pending"] and not a100["00000000:68:00.0"]["remap_pending"]
    assert ("warn", "a row remap or page retirement is pending (reset the GPU to apply it)") in \
        gpu.memory_findings(a100["00000000:9e:00.0"])
    a40 = parse_gpu_state(real("nvidia_smi", "thamada_A40x10_smi_nvidia-smi-q.txt"))
    assert any("SW Power Cap" in s["throttle"] for s in a40.values())
    assert all(gpu.clocks_item("x", s)["status"] == "pass" for s in a40.values())
    h100 = parse_gpu_state(real("nvidia_smi", H100))
    assert all(level == "info" and "PCIe replays" in text for s in h100.values()
               for level, text in gpu.memory_findings(s))


def test_real_rtx5090_through_the_checks_passes_power_and_clocks():
    facts = good_facts()
    smi = smi_facts(RTX5090, subdir=None)
    facts["nvidia"]["smi"] = smi
    facts["pci"]["functions"] = facts["pci"]["functions"][:1]
    facts["pci"]["functions"][0].update(bdf="0000:02:00.0", chain=["0000:02:00.0"], device_id=0x2b85, model="GB202 "
                                        "[GeForce RTX 5090]")
    facts["gpu"]["aer"] = {}
    from checkcases import run_check
    assert run_check(facts, None, "gpu.power_limit")["status"] == "pass"
    clocks = run_check(facts, None, "gpu.clocks")
    assert clocks["status"] == "pass", clocks["message"]    # SW Power Cap alone is normal (seen at idle P8 here)
    assert compute_capability(0x2b85, "GB202 [GeForce RTX 5090]") == "12.0"


@pytest.mark.parametrize("name,expect", [
    ("nvidia_xid79_kernel_log.txt", [("0000:01:00", 79, 1), ("0000:01:00", 154, 1)]),
    ("nvidia_xid79_journal_log.txt", [("0000:2b:00", 79, 1)]),
    ("nixos_xid13_kernel_log.txt", [("0000:01:00", 13, 4)]),
    ("stas00_xid63_kernel_log.txt", [("0000:10:1c", 63, 1)]),
    ("nvidia_nvsentinel_fallen_off_bus_noxid_kernel_log.txt", [("0000:b3:00", 79, 1)]),
])
def test_real_kernel_logs(name, expect):
    events = parse_xid_lines(real("gpu_runtime", name))
    assert [(e["bus"], e["xid"], e["count"]) for e in events] == expect


def test_real_aer_counters():
    """The fwupd record lost the newlines between "<name> <count>" entries: put them back, as the kernel writes."""
    record = real("gpu_runtime", "fwupd_aer_dev_umockdev_record.txt")
    files = dict(re.findall(r"^A: aer_dev_(\w+)=(.*)$", record, re.M))
    for kind, total_name in (("correctable", "TOTAL_ERR_COR"), ("fatal", "TOTAL_ERR_FATAL"),
                             ("nonfatal", "TOTAL_ERR_NONFATAL")):
        text = re.sub(r"(?<=[0-9])(?=[A-Z])", "\n", files[kind]) + "\n"
        assert text.splitlines()[-1] == total_name + " 0"
        assert parse_aer_counters(text) == ({}, 0)
    assert parse_aer_counters("RxErr 2\nBadTLP 0\nTOTAL_ERR_COR 2\n") == ({"RxErr": 2}, 2)
    for bad in ("", "RxErr two\n", "TOTAL_ERR_COR\n"):
        with pytest.raises(ValueError):
            parse_aer_counters(bad)


def test_reader_on_a_tree(tmp_path):
    """The gpu section of a snapshot: its kernel-xid capture and the AER files of a GPU and its port."""
    from ansible.module_utils.pvetune import audit
    (tmp_path / ".pvetune").mkdir()
    (tmp_path / ".pvetune/kernel-xid.txt").write_text(real("gpu_runtime", "nvidia_xid79_journal_log.txt"))
    for dev in ("0000:2a:01.0", "0000:2b:00.0"):
        path = tmp_path / "sys/devices/pci0000:2a/0000:2a:01.0" / ("" if dev.endswith("01.0") else dev)
        path.mkdir(parents=True, exist_ok=True)
        (path / "aer_dev_fatal").write_text("DLP 0\nTOTAL_ERR_FATAL 0\n")
        (path / "aer_dev_nonfatal").write_text("CmpltTO %d\nTOTAL_ERR_NONFATAL %d\n" % ((1, 1) if "01.0" in dev
                                                                                       else (0, 0)))
    pci = {"functions": [{"bdf": "0000:2b:00.0", "is_gpu": True, "chain": ["0000:2a:01.0", "0000:2b:00.0"],
                          "path": "/sys/devices/pci0000:2a/0000:2a:01.0/0000:2b:00.0"}],
           "bridges": {"0000:2a:01.0": {"bdf": "0000:2a:01.0", "path": "/sys/devices/pci0000:2a/0000:2a:01.0"}}}
    ctx = audit.Context(FsRoot(str(tmp_path)), None, None, {"pci": pci})
    section = gpu.read_gpu(ctx)
    assert [(e["bus"], e["xid"]) for e in section["xid"]] == [("0000:2b:00", 79)]
    assert section["aer"]["0000:2a:01.0"]["nonfatal"] == {"total": 1, "counters": {"CmpltTO": 1}}
    assert section["aer"]["0000:2b:00.0"]["correctable"] is None         # no file: AER not reported
    empty = gpu.read_gpu(audit.Context(FsRoot(str(tmp_path / "sys")), None, None, {"pci": pci}))
    assert empty["xid_reason"] == "snapshot has no /.pvetune/kernel-xid.txt"


class FakeRunner(object):
    def __init__(self, rc, out, err="", installed=True):
        self.result, self.installed, self.calls = (rc, out, err), installed, []

    def which(self, name):
        return "/usr/bin/" + name if self.installed else None

    def run(self, name, args):
        self.calls.append([name] + list(args))
        return self.result


@pytest.mark.parametrize("runner,events,reason", [
    (FakeRunner(1, "", ""), 0, None),                                          # journalctl -g: nothing matched
    (FakeRunner(0, "2026-12-01T10:00:00+0000 pve kernel: NVRM: Xid (PCI:0000:41:00): 79, GPU has fallen off the "
                   "bus.\n"), 1, None),
    (FakeRunner(1, "", "Failed to open journal"), 0, "journalctl exited 1: Failed to open journal"),
    (FakeRunner(0, "", installed=False), 0, "journalctl not installed"),
])
def test_live_kernel_log(runner, events, reason):
    live = FsRoot("/")
    xid, why, _where = gpu.read_xid(live, runner)
    assert (len(xid), why) == (events, reason)
    if runner.installed:
        assert runner.calls == [["journalctl", "-k", "-b", "0", "--no-pager", "-o", "short-iso", "--grep",
                                 "NVRM: Xid|fallen off the bus"]]


def test_hmm_and_persistenced_readers(tmp_path):
    (tmp_path / "sys/module/nvidia_uvm/parameters").mkdir(parents=True)
    (tmp_path / "sys/module/nvidia_uvm/parameters/uvm_disable_hmm").write_text("N\n")
    for directory, name, text in (("etc/modprobe.d", "nvidia.conf", "options nvidia NVreg_OpenRmEnableUnsupportedGpus=1"
                                   "\n"),
                                  ("usr/lib/modprobe.d", "nvidia-uvm.conf", "options nvidia-uvm uvm_disable_hmm=0\n"),
                                  ("etc/modprobe.d", "zz-hmm.conf", "# ollama #11593\noptions nvidia_uvm "
                                   "uvm_disable_hmm=1  # off\n")):
        (tmp_path / directory).mkdir(parents=True, exist_ok=True)
        (tmp_path / directory / name).write_text(text)
    root = FsRoot(str(tmp_path))
    assert nvidia.read_hmm(root) == {"disabled": False, "configured": True,
                                     "configured_in": "/etc/modprobe.d/zz-hmm.conf", "error": None}
    (tmp_path / "sys/module/nvidia_uvm/parameters/uvm_disable_hmm").write_text("maybe\n")
    assert nvidia.read_hmm(root)["error"] == "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm: 'maybe' is not Y or N"
    assert nvidia.read_persistenced(root) == {"pid": None, "running": False}
    (tmp_path / "run/nvidia-persistenced").mkdir(parents=True)
    (tmp_path / "run/nvidia-persistenced/nvidia-persistenced.pid").write_text("2187\n")
    (tmp_path / "proc/2187").mkdir(parents=True)
    (tmp_path / "proc/2187/comm").write_text("nvidia-persiste\n")
    assert nvidia.read_persistenced(root) == {"pid": 2187, "running": True}
    assert option_values("options nvidia-uvm uvm_disable_hmm=yes # no\noptions nvidia x=1\n", "nvidia_uvm",
                         "uvm_disable_hmm") == ["yes"]
    (tmp_path / "etc/modprobe.d/zz-hmm.conf").write_text("options nvidia_uvm uvm_disable_hmm=yes\n")
    assert nvidia.read_hmm(root)["configured"] is None


# -- the power-limit fix (pvetune_gpu_power), its boot re-application and its rollback -----------------------------
def _gpu_tree(tmp_path):
    """pve-gpu05's scratch copy: GPU 2 (0000:41:00.0) capped at 300 W of its 600 W default, nvidia-smi stand-in."""
    from test_lxcfix import scratch
    return scratch(tmp_path, host="pve-gpu05")


def _limits(tree):
    from ansible.module_utils.pvetune.concerns.gpu.fix import read_limits
    return {bdf: g["power"]["limit"] for bdf, g in read_limits(FsRoot(str(tree)), None).items()}


CAPPED = "0000:41:00.0"


def test_power_fix_check_diff_apply_idempotent_boot_and_rollback(tmp_path):
    from ansible.module_utils.pvetune.concerns.gpu import fix as gpu_fix
    from ansible.module_utils.pvetune.core.runner import Runner
    from modharness import run_module
    from test_lxcfix import calls, reset_calls
    tree = _gpu_tree(tmp_path)
    assert _limits(tree)[CAPPED] == 300.0
    reset_calls(tree)
    args = {"root": str(tree), "run_id": "20261204T220000Z", "power_limit": "default"}
    check = run_module("pvetune_gpu_power", args, check_mode=True, diff=True)
    assert check["changed"] is True and calls(tree) == []                  # --check runs no nvidia-smi -pl
    (runtime_diff,) = [d for d in check["diff"] if "gpu:" in d.get("before", "") + d.get("after", "")]
    assert "gpu:%s power.limit = 300 W" % CAPPED in runtime_diff["before"]
    assert "gpu:%s power.limit = 600 W" % CAPPED in runtime_diff["after"]
    assert [g["bdf"] for g in check["gpus"] if g["action"] == "set"] == [CAPPED]
    done = run_module("pvetune_gpu_power", args)
    assert done["changed"] is True and not done.get("failed"), done
    assert calls(tree) == [["nvidia-smi", "-i", "00000000:41:00.0", "-pl", "600"]]
    assert set(_limits(tree).values()) == {600.0}
    with open(os.path.join(str(tree), "var/lib/pvetune/manifest.json")) as handle:
        manifest = json.load(handle)
    assert manifest["runtime"]["gpu:%s:power_limit" % CAPPED]["original"] == "300"
    again = run_module("pvetune_gpu_power", args)
    assert again["changed"] is False and len(calls(tree)) == 1        # a tree's nvidia-smi -q is its capture
    # the limit is lost at a reboot: the boot helper's subcommand sets it again from its config
    set_power_limit(tree, "0000" + CAPPED, 300.0)
    runner = Runner(FsRoot(str(tree)), _run_command)
    ok, messages = gpu_fix.boot_apply(FsRoot(str(tree)), runner, {"power_limit": "default"})
    assert ok and "%s: power.limit 300 W -> 600 W" % CAPPED in messages and _limits(tree)[CAPPED] == 600.0
    # rollback puts the recorded limit back
    back = run_module("pvetune_rollback", {"root": str(tree)})
    assert not back.get("failed"), back
    assert _limits(tree)[CAPPED] == 300.0 and {v for k, v in _limits(tree).items() if k != CAPPED} == {600.0}


def test_power_fix_with_a_policy_cap_above_the_max_and_a_refusing_nvidia_smi(tmp_path):
    from modharness import run_module
    tree = _gpu_tree(tmp_path)
    over = run_module("pvetune_gpu_power", {"root": str(tree), "power_limit": 700})
    assert over["changed"] is False and "0000:41:00.0: 700 W is above the GPU's maximum 600 W" in str(over["warnings"])
    bad = run_module("pvetune_gpu_power", {"root": str(tree), "power_limit": "600W"})
    assert bad["failed"] and bad["msg"] == "power_limit: '600W' is neither default nor watts from 50 to 2000"
    os.makedirs(os.path.join(str(tree), ".pvetune/fail"), exist_ok=True)
    with open(os.path.join(str(tree), ".pvetune/fail/nvidia-smi"), "w") as handle:
        handle.write("-i\n")
    failed = run_module("pvetune_gpu_power", {"root": str(tree), "run_id": "20261204T220100Z"})
    assert failed["failed"] and "nvidia-smi -i 00000000:41:00.0 -pl 600 exited 255" in failed["msg"]
    assert _limits(tree)[CAPPED] == 300.0
    os.unlink(os.path.join(str(tree), ".pvetune/bin/nvidia-smi"))
    os.unlink(os.path.join(str(tree), ".pvetune/fail/nvidia-smi"))
    skipped = run_module("pvetune_gpu_power", {"root": str(tree)})
    assert skipped["changed"] is False and "no nvidia-smi stand-in" in skipped["skipped_commands"][0]["reason"]


def _run_command(argv, data=None, environ_update=None, **_kw):
    import subprocess
    proc = subprocess.run(argv, input=data, env=dict(os.environ, **(environ_update or {})), capture_output=True,
                          text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


# -- scripts/gpu_snapshot.py: a real GPU host's snapshot against nvidia-smi's own answers --------------------------
SMI_QUERY_HEAD = ("pci.bus_id, driver_version, persistence_mode, power.limit [W], power.default_limit [W], "
                  "power.max_limit [W], enforced.power.limit [W], clocks.applications.graphics [MHz], "
                  "clocks.default_applications.graphics [MHz], ecc.errors.uncorrected.volatile.total, "
                  "pcie.link.gen.current, pcie.link.width.current, compute_cap\n")


def _snapshot_dir(tmp_path, capped_watts):
    """pve-gpu05 packed as collect() packs a snapshot, and the --query-gpu answers of its eight GPUs."""
    import subprocess
    import sys
    from ansible.module_utils.pvetune.collect import collect
    from ansible.module_utils.pvetune.core.runner import Runner
    demo = os.path.join(HERE, "..", "..", "demo", "snapshots", "pve-gpu05")
    data, _info = collect(os.path.abspath(demo), lambda fsroot: Runner(fsroot, lambda *a, **k: (127, "", "")))
    (tmp_path / "snap").mkdir(parents=True)
    (tmp_path / "snap/snapshot.tar.gz").write_bytes(data)
    rows = [SMI_QUERY_HEAD]
    for bus in ("01", "21", "41", "61", "81", "a1", "c1", "e1"):
        limit = capped_watts if bus == "41" else "600.00"
        rows.append("00000000:%s:00.0, 580.95.05, Enabled, %s, 600.00, 600.00, %s, 2430, 2430, 0, 5, 16, 12.0\n" % (
            bus.upper(), limit, limit))
    (tmp_path / "snap/smi-query.csv").write_text("".join(rows))
    script = os.path.join(HERE, "..", "..", "scripts", "gpu_snapshot.py")
    return subprocess.run([sys.executable, script, "compare", str(tmp_path / "snap")], capture_output=True, text=True,
                          check=False)


def test_gpu_snapshot_compare_agrees_with_nvidia_smi_and_names_a_difference(tmp_path):
    same = _snapshot_dir(tmp_path, "300.00")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "88 readings of 8 GPUs compared, 0 differ" in same.stdout
    other = _snapshot_dir(tmp_path / "x", "450.00")
    assert other.returncode == 1
    assert "DIFF 0000:41:00.0 power.limit (enforced)" in other.stdout and "nvidia-smi 450.0" in other.stdout


# -- the HMM fix (pvetune_nvidia_hmm) --------------------------------------------------------------------------------
def test_hmm_fix_writes_the_modprobe_file_asks_for_a_reboot_and_rolls_back(tmp_path):
    from ansible.module_utils.pvetune.concerns.nvidia.fix import CONF
    from checkcases import audit_tree
    from modharness import run_module
    from test_lxcfix import scratch
    tree = scratch(tmp_path)                                # pve-gpu01: 580.95.05, HMM on, nothing configured
    args = {"root": str(tree), "run_id": "20261204T223000Z", "mode": "auto"}
    check = run_module("pvetune_nvidia_hmm", args, check_mode=True, diff=True)
    assert check["changed"] and check["wanted"] and "cuInit returns CUDA_ERROR_NOT_INITIALIZED" in check["why"]
    assert "options nvidia_uvm uvm_disable_hmm=1" in check["diff"][0]["after"]
    assert not os.path.exists(os.path.join(str(tree), CONF.lstrip("/")))
    done = run_module("pvetune_nvidia_hmm", args)
    assert done["changed"] and done["reboot_required"] and done["loaded"] == "HMM on"
    res = audit_tree(str(tree))[1]["nvidia.uvm_hmm"]
    assert res["status"] == "pending" and res["reboot_required"] and CONF in res["message"]
    again = run_module("pvetune_nvidia_hmm", args)
    assert not again["changed"] and again["reboot_required"]     # still waiting for the module to load again
    back = run_module("pvetune_rollback", {"root": str(tree)})
    assert not back.get("failed") and not os.path.exists(os.path.join(str(tree), CONF.lstrip("/")))
    # a driver branch without known HMM issues: "auto" writes nothing, "disable" does
    with open(os.path.join(str(tree), "proc/driver/nvidia/version")) as handle:
        text = handle.read()
    with open(os.path.join(str(tree), "proc/driver/nvidia/version"), "w") as handle:
        handle.write(text.replace("580.95.05", "550.127.05"))
    auto = run_module("pvetune_nvidia_hmm", dict(args, run_id="20261204T223100Z"), check_mode=True)
    assert not auto["changed"] and not auto["wanted"] and auto["why"] == "driver 550.127.05 has no known HMM issue"
    assert run_module("pvetune_nvidia_hmm", dict(args, mode="disable"), check_mode=True)["changed"]


def test_hmm_fix_leaves_a_host_already_configured_alone(tmp_path):
    from modharness import run_module
    from test_lxcfix import scratch
    tree = scratch(tmp_path, host="pve-gpu02")                 # HMM off, its own modprobe.d file
    done = run_module("pvetune_nvidia_hmm", {"root": str(tree), "mode": "disable"})
    assert not done["changed"] and not done["reboot_required"] and done["loaded"] == "HMM off"
    assert "uvm_disable_hmm=1 already comes from /etc/modprobe.d/nvidia-uvm-hmm.conf" in str(done["warnings"])


def test_clocks_fix_resets_applications_clocks_and_rollback_sets_them_again(tmp_path):
    from modharness import run_module
    from test_lxcfix import calls, reset_calls, scratch
    tree = scratch(tmp_path, host="pve-gpu03")                 # GPU 3 (0000:61:00.0) left at 1410 MHz graphics
    reset_calls(tree)
    args = {"root": str(tree), "run_id": "20261204T224000Z"}
    check = run_module("pvetune_gpu_clocks", args, check_mode=True, diff=True)
    assert check["changed"] and check["gpus"] == [{"bdf": "0000:61:00.0", "before": "14001,1410",
                                                   "after": "14001,2430"}]
    assert calls(tree) == []
    done = run_module("pvetune_gpu_clocks", args)
    assert done["changed"] and calls(tree) == [["nvidia-smi", "-i", "00000000:61:00.0", "-rac"]]
    from checkcases import audit_tree
    assert audit_tree(str(tree))[1]["gpu.clocks"]["status"] == "pass"
    assert not run_module("pvetune_gpu_clocks", args)["changed"]
    back = run_module("pvetune_rollback", {"root": str(tree)})
    assert not back.get("failed"), back
    assert calls(tree)[-1] == ["nvidia-smi", "-i", "00000000:61:00.0", "-ac", "14001,1410"]
    assert audit_tree(str(tree))[1]["gpu.clocks"]["status"] == "fail"
