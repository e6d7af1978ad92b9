"""audit.evaluate (module_utils/pvetune/audit.py and the concerns' evaluators): every evaluator on hand-built facts.

``good_facts()`` is a host that passes every check (AMD EPYC, amd-pstate-epp, two GPUs at
MaxReadReq 4096, kernel 6.14, systemd-boot).  Each scenario changes a few facts and states the
status (and part of the message) the check must give; every catalogue check has scenarios here (a test holds
that, from the catalogue).
"""
import copy

import pytest
from ansible.module_utils.pvetune import audit
from ansible.module_utils.pvetune.audit import evaluate
from ansible.module_utils.pvetune.concerns.bootargs.checks import boot_arg_state
from ansible.module_utils.pvetune.core.catalogue import BY_ID, CATALOGUE, STATUSES
from ansible.module_utils.pvetune.core.policy import merge_policy
from ansible.module_utils.pvetune.core.result import summarize
from checkcases import (
    DEFAULT,
    RESULT_KEYS,
    all_scenarios,
    assert_scenario,
    by_id,
    run_check,
    scenario_id,
    setv,
)

GPU_BDFS = ("0000:01:00.0", "0000:21:00.0")


def _policy(n, **over):
    pol = {"driver": "amd-pstate-epp", "governor": "performance", "available_governors": ["performance", "powersave"],
           "epp": "performance",
           "available_epp": ["default", "performance", "balance_performance", "balance_power", "power"],
           "affected_cpus": str(n)}
    pol.update(over)
    return pol


def _state(name, latency, enabled, disabled):
    return {"name": name, "latency_us": latency, "enabled_cpus": "0-%d" % (enabled - 1) if enabled else "",
            "enabled_count": enabled, "disabled_count": disabled}


# The two GPUs sit behind one PCIe switch (root port 00:01.1, upstream port 0a:00.0, downstream ports 0b:08.0/10.0).
DSPS = ("0000:0b:08.0", "0000:0b:10.0")


def _gpu(bdf, **over):
    i = GPU_BDFS.index(bdf) if bdf in GPU_BDFS else 0
    gpu = {"bdf": bdf, "is_gpu": True, "driver": "nvidia", "error": None, "mrrs": 4096, "mps": 256,
           "devcap_mps": 256, "lnkcap_speed": "32GT/s", "lnkcap_width": 16, "lnksta_speed": "32GT/s",
           "lnksta_width": 16, "model": "NVIDIA Corporation GB202GL [RTX PRO 6000 Blackwell Server Edition]",
           "host": "pci0000:00", "chain": ["0000:00:01.1", "0000:0a:00.0", DSPS[i], bdf], "numa_node": 0,
           "socket": 0, "iommu_group": "3%d" % i, "bar1": {"size": 128 << 30, "start": 0x20000000000},
           "bar1_error": None, "rebar": {"offset": 0xBB0, "bars": {1: {"current": 128 << 30, "max": 128 << 30,
                                                                        "supported": [64 << 20, 128 << 30]}}},
           "rebar_error": None, "sriov_totalvfs": 16, "sriov_numvfs": 0}
    gpu.update(over)
    return gpu


def _dsp(bdf, ctrl=0x0011):
    return {"bdf": bdf, "model": "PLX Technology, Inc. PEX 8747", "pcie_type_name": "Downstream Port",
            "driver": "pcieport", "error": None, "acs_error": None,
            "acs": {"offset": 0xF24, "cap": 0x7F, "ctrl": ctrl, "redirect": ctrl & 0x2C,
                    "cap_text": "", "ctrl_text": "ctrl %04x" % ctrl}}


# A GPU CT whose allow lines cover the host's current majors (nvidia-uvm = 511).
CT_101 = ("arch: amd64\n"
          "lxc.cgroup2.devices.allow: c 195:* rwm\n"
          "lxc.cgroup2.devices.allow: c 511:* rwm\n"
          + "".join("lxc.mount.entry: /dev/%s dev/%s none bind,optional,create=file\n" % (n, n)
                    for n in ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"))
          + "cores: 8\nmemory: 32768\nswap: 0\n")


# What Proxmox wrote to /var/lib/lxc/101/config when CT 101 started while nvidia-uvm had major 509.
STARTED_509 = ("lxc.arch = amd64\nlxc.cgroup2.devices.allow = c 195:* rwm\nlxc.cgroup2.devices.allow = c 509:* rwm\n"
               + "".join("lxc.mount.entry = /dev/%s dev/%s none bind,optional,create=file\n" % (n, n)
                         for n in ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")))


def _node(path, major, minor):
    return {"path": path, "type": "c", "major": major, "minor": minor, "mode": "crw-rw-rw-"}


def good_facts():
    cmdline = ["BOOT_IMAGE=/vmlinuz-6.14.8-2-pve", "root=ZFS=rpool/ROOT/pve-1", "boot=zfs", "amd_pstate=active",
               "processor.max_cstate=1", "iommu=pt"]
    return {
        "schema": 1, "root": "/", "errors": [],
        "host": {"hostname": "pve-test", "snapshot": None, "live": True},
        "cpu": {"vendor": "AuthenticAMD", "model": "AMD EPYC 9335 32-Core Processor", "family": 26, "model_id": 2,
                "amd_pstate_status": "active",
                "online": "0-3", "policies": {"policy%d" % n: _policy(n) for n in range(4)},
                "offline_policies": [], "errors": [], "evidence": ["/proc/cpuinfo: AMD EPYC"]},
        "cpuidle": {"driver": "acpi_idle", "governor": "menu", "max_cstate_param": "1", "intel_max_cstate_param": None,
                    "states": {"state0": _state("POLL", 0, 4, 0), "state1": _state("C1", 1, 4, 0),
                               "state2": _state("C2", 400, 0, 4)},
                    "cpu_count": 4, "cpus_with_states": 4, "errors": [], "evidence": ["cpuidle"]},
        "cmdline": {"raw": " ".join(cmdline), "args": list(cmdline)},
        "boot": {"loader": "systemd-boot", "rule": "pbt-status", "config_path": "/etc/kernel/cmdline",
                 "configured_args": list(cmdline[1:]), "evidence": ["boot loader: systemd-boot"]},
        "sysctl": {"kernel.numa_balancing": {"runtime": "0",
                                             "persisted": {"value": "0", "file": "/etc/sysctl.d/90-pvetune.conf",
                                                           "line": 2},
                                             "files": ["/etc/sysctl.d/90-pvetune.conf"]},
                   "errors": []},
        "pci": {"functions": [_gpu(b) for b in GPU_BDFS], "bridges": {b: _dsp(b) for b in DSPS}, "vfio": [],
                "evidence": ["2 functions"]},
        "kernel": {"running": "6.14.8-2-pve", "installed": ["6.8.12-4-pve", "6.14.8-2-pve"],
                   "next_boot_kernel": "6.14.8-2-pve", "next_boot_rule": "pin", "evidence": ["uname"]},
        "lxc": {"present": True, "host_majors": {"nvidia": 195, "nvidia-uvm": 511}, "known_majors": {},
                "cgroup_version": 2, "skipped": [],
                "cts": [{"ctid": "101", "path": "/etc/pve/lxc/101.conf", "config": CT_101},
                        {"ctid": "102", "path": "/etc/pve/lxc/102.conf", "config": "arch: amd64\n"}],
                "evidence": ["/etc/pve/lxc/*.conf: 2 CT configs"]},
        "nvidia": {"version": {"version": "580.95.05", "open": True},
                   "majors": {"nvidia": 195, "nvidia-uvm": 511}, "char_majors": [1, 195, 511],
                   "devices": {"char": {1: ["mem"], 195: ["nvidia"], 511: ["nvidia-uvm"]}, "block": {}},
                   "nodes": [_node("/dev/nvidia0", 195, 0), _node("/dev/nvidiactl", 195, 255),
                             _node("/dev/nvidia-uvm", 511, 0), _node("/dev/nvidia-uvm-tools", 511, 1)],
                   "nodes_source": "stat", "gpu_minors": {GPU_BDFS[0]: 0, GPU_BDFS[1]: 1},
                   "smi": {"driver": "580.95.05", "format": "csv",
                           "gpus": [{"bus_id": "00000000:%s" % b[5:], "persistence": True} for b in GPU_BDFS]},
                   "smi_reason": None, "evidence": ["/proc/driver/nvidia/version: 580.95.05"],
                   "persistenced": {"pid": 2187, "running": True},
                   "hmm": {"disabled": True, "configured": True, "configured_in": "/etc/modprobe.d/nvidia-uvm-hmm.conf",
                           "error": None}},
        "numa": {"nodes": [{"node": 0, "cpus": list(range(8)), "socket": 0},
                           {"node": 1, "cpus": list(range(8, 16)), "socket": 1}], "errors": [],
                 "evidence": ["2 nodes"]},
        "ct_runtime": {"cts": [{"ctid": "101", "running": True, "cgroup_dir": "/sys/fs/cgroup/lxc/101",
                                "cgroup": {"cpuset.cpus.effective": "0-7", "cpuset.cpus": "", "cpu.max": "max 100000",
                                           "cpu.weight": "100", "memory.max": str(32768 << 20),
                                           "memory.swap.max": "0"},
                                "init_pid": 4127,
                                "libs": {"root": "/proc/4127/root", "reason": None,
                                         "dirs": ["/usr/lib/x86_64-linux-gnu"],
                                         "versions": {"libcuda.so": ["580.95.05"], "libnvidia-ml.so": ["580.95.05"]},
                                         "links": {"libcuda.so.1": "libcuda.so.580.95.05"}}}],
                       "evidence": ["1 GPU CTs"]},
        "iommu": {"units": ["ivhd0"], "groups": 40, "default_domain_type": "identity",
                  "group_types": {"30": "identity", "31": "identity"}, "evidence": ["iommu"]},
    }


def all_policies(key, value):
    def apply(facts):
        for pol in facts["cpu"]["policies"].values():
            pol[key] = value
    return apply


def args(effective=None, configured=None):
    """Replace /proc/cmdline args and/or the boot loader's configured args."""
    def apply(facts):
        if effective is not None:
            facts["cmdline"] = {"raw": " ".join(effective), "args": list(effective)}
        if configured is not None:
            facts["boot"]["configured_args"] = None if configured == "unknown" else list(configured)
    return apply


def gpus(*overrides):
    """GPU i gets overrides[i] (dicts)."""
    def apply(facts):
        for gpu, over in zip(facts["pci"]["functions"], overrides):
            gpu.update(over)
    return apply


INTEL_EFF = ["BOOT_IMAGE=/vmlinuz-6.14.8-2-pve", "root=/dev/mapper/pve-root", "ro", "intel_idle.max_cstate=1"]


def ct101_line(line):
    """Add a line to CT 101's config (main section)."""
    def apply(facts):
        ct = facts["lxc"]["cts"][0]
        ct["config"] = ct["config"].replace("swap: 0\n", "swap: 0\n%s\n" % line)
    return apply


def add_node(node):
    def apply(facts):
        facts["nvidia"]["nodes"].append(node)
    return apply


def intel(epp="performance", status="active", driver="intel_pstate"):
    """An Intel Xeon host (values as in tests/fixtures/realdata/intel: intel_pstate, intel_idle) that passes the CPU
    checks: intel_pstate active with HWP (EPP), governor performance, intel_idle.max_cstate=1 effective."""
    def apply(facts):
        facts["cpu"].update(vendor="GenuineIntel", model="INTEL(R) XEON(R) PLATINUM 8592+", amd_pstate_status=None,
                            intel_pstate_status=status)
        for pol in facts["cpu"]["policies"].values():
            pol.update(driver=driver, epp=epp)
        facts["cpuidle"].update(driver="intel_idle", max_cstate_param="9", intel_max_cstate_param="1",
                                states={"state0": _state("POLL", 0, 4, 0), "state1": _state("C1", 1, 4, 0)})
        facts["cmdline"] = {"raw": " ".join(INTEL_EFF), "args": list(INTEL_EFF)}
        facts["boot"]["configured_args"] = list(INTEL_EFF[1:])
    return apply


SECTION_ERROR = "/some/path: Permission denied"
BASE_EFF = ["BOOT_IMAGE=/vmlinuz", "root=ZFS=rpool/ROOT/pve-1", "iommu=pt"]
BASE_CONF = ["root=ZFS=rpool/ROOT/pve-1", "iommu=pt"]

# (check id, status, [mutations], policy overrides, message fragment, reboot_required or None)
SCENARIOS = [
    # -- cpu.scaling_driver ----------------------------------------------------------------------------------
    ("cpu.scaling_driver", "pass", [], None, "every policy uses amd-pstate-epp", False),
    ("cpu.scaling_driver", "skip", [setv(("cpu", "vendor"), "CentaurHauls"),
                                    setv(("cpu", "model"), "ZHAOXIN KaiXian KX-7000"),
                                    all_policies("driver", "acpi-cpufreq")], None,
     "not an AMD or Intel CPU (ZHAOXIN KaiXian KX-7000): pvetune has no P-state or C-state settings for it", False),
    # Intel hosts (issue 17): intel_pstate on their own terms, never amd_pstate.
    ("cpu.scaling_driver", "pass", [intel()], None, "every policy uses intel_pstate", False),
    ("cpu.scaling_driver", "fail", [intel(epp=None, status="passive", driver="intel_cpufreq")], None,
     "intel_pstate is loaded in passive mode; switch at runtime with 'echo active > "
     "/sys/devices/system/cpu/intel_pstate/status' and pvetune-cpufreq.service re-applies it at boot", False),
    ("cpu.scaling_driver", "warn", [intel(epp=None)], None,
     "every policy uses intel_pstate, but without HWP (no energy_performance_preference): HWP is off or not "
     "supported", False),
    ("cpu.scaling_driver", "warn", [intel(epp=None), args(INTEL_EFF + ["intel_pstate=no_hwp"])], None,
     "intel_pstate=no_hwp is on /proc/cmdline: remove it and reboot", False),
    ("cpu.scaling_driver", "fail", [intel(epp=None, status=None, driver="acpi-cpufreq")], None,
     "driver is acpi-cpufreq; add intel_pstate=active to the kernel command line and reboot", True),
    ("cpu.scaling_driver", "skip", [intel(), setv(("cpu", "hypervisor"), True), setv(("cpu", "policies"), {}),
                                    setv(("cpu", "intel_pstate_status"), None)], None,
     "no cpufreq driver is loaded and the CPU reports the hypervisor flag", False),
    ("cpu.scaling_driver", "error", [setv(("cpu",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    ("cpu.scaling_driver", "fail", [all_policies("driver", "acpi-cpufreq"), setv(("cpu", "amd_pstate_status"), None),
                                    args(BASE_EFF, BASE_CONF)], None,
     "driver is acpi-cpufreq; add amd_pstate=active to the kernel command line and reboot", True),
    ("cpu.scaling_driver", "fail", [all_policies("driver", "acpi-cpufreq"), setv(("cpu", "amd_pstate_status"), None)],
     None, "amd_pstate=active is on /proc/cmdline but the driver is acpi-cpufreq: amd_pstate did not load "
           "(is CPPC enabled in the BIOS?)", True),
    ("cpu.scaling_driver", "pending", [all_policies("driver", "acpi-cpufreq"),
                                       setv(("cpu", "amd_pstate_status"), None),
                                       args(BASE_EFF, BASE_CONF + ["amd_pstate=active"])], None,
     "amd_pstate=active is configured in the boot loader but not on /proc/cmdline yet: reboot", True),
    ("cpu.scaling_driver", "fail", [all_policies("driver", "amd-pstate"), setv(("cpu", "amd_pstate_status"), "passive"),
                                    args(BASE_EFF + ["amd_pstate=passive"], BASE_CONF + ["amd_pstate=passive"])], None,
     "amd_pstate is loaded in passive mode; switch at runtime with 'echo active > "
     "/sys/devices/system/cpu/amd_pstate/status' and configure amd_pstate=active for the next boot", True),
    # runtime-switchable, and amd_pstate=active already effective: no reboot needed for the switch
    ("cpu.scaling_driver", "fail", [all_policies("driver", "amd-pstate"), setv(("cpu", "amd_pstate_status"), "guided")],
     None, "amd_pstate is loaded in guided mode", False),
    ("cpu.scaling_driver", "warn", [all_policies("driver", "acpi-cpufreq"), setv(("cpu", "amd_pstate_status"), None)],
     {"scaling_driver_fallback": ["acpi-cpufreq"]},
     "acpi-cpufreq is accepted by this host's policy (scaling_driver_fallback) instead of amd-pstate-epp; "
     "amd_pstate=active is on /proc/cmdline but amd_pstate did not load (no CPPC in the firmware?)", False),
    ("cpu.scaling_driver", "warn", [all_policies("driver", "acpi-cpufreq"), setv(("cpu", "amd_pstate_status"), None),
                                    args(BASE_EFF, BASE_CONF)],
     {"scaling_driver_fallback": ["acpi-cpufreq"]},
     "instead of amd-pstate-epp; amd_pstate=active is not on the kernel command line", False),
    ("cpu.scaling_driver", "fail", [setv(("cpu", "policies"), {}), setv(("cpu", "amd_pstate_status"), None)], None,
     "no cpufreq driver is active; expected amd-pstate-epp", True),
    ("cpu.scaling_driver", "fail", [setv(("cpu", "policies", "policy3", "driver"), "acpi-cpufreq")], None,
     "driver is acpi-cpufreq, amd-pstate-epp", True),
    # -- cpu.governor ----------------------------------------------------------------------------------------
    ("cpu.governor", "pass", [], None, "all 4 policies use performance", False),
    ("cpu.governor", "fail", [setv(("cpu", "policies", "policy2", "governor"), "powersave")], None,
     "1 of 4 policies are not on performance", False),
    ("cpu.governor", "fail", [all_policies("governor", "powersave")], {"governor": "schedutil"},
     "4 of 4 policies are not on schedutil; schedutil is not offered by the driver on policy0, policy1, policy2, "
     "policy3", False),
    ("cpu.governor", "fail", [setv(("cpu", "policies", "policy1", "governor"), None)], None,
     "1 of 4 policies are not on performance", False),
    ("cpu.governor", "skip", [setv(("cpu", "policies"), {})], None, "no cpufreq policies", False),
    ("cpu.governor", "error", [setv(("cpu",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    ("cpu.governor", "fail", [intel(epp="balance_performance"), all_policies("governor", "powersave")], None,
     "4 of 4 policies are not on performance", False),
    ("cpu.governor", "skip", [setv(("cpu", "vendor"), "CentaurHauls")], None, "not an AMD or Intel CPU", False),
    # -- cpu.epp ---------------------------------------------------------------------------------------------
    ("cpu.epp", "pass", [], None, "all 4 policies prefer performance", False),
    ("cpu.epp", "fail", [all_policies("epp", "balance_power")], None, "4 of 4 policies do not prefer performance",
     False),
    ("cpu.epp", "skip", [all_policies("epp", None), all_policies("driver", "acpi-cpufreq")], None,
     "the cpufreq driver (acpi-cpufreq) offers no energy_performance_preference", False),
    ("cpu.epp", "error", [setv(("cpu",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    ("cpu.epp", "fail", [intel(epp="balance_performance")], None, "4 of 4 policies do not prefer performance", False),
    ("cpu.epp", "skip", [intel(epp=None)], None,
     "the cpufreq driver (intel_pstate) offers no energy_performance_preference (EPP needs intel_pstate in "
     "active mode with HWP)", False),
    # -- cpu.cstates -----------------------------------------------------------------------------------------
    ("cpu.cstates", "pass", [], None, "processor.max_cstate=1 effective; nothing deeper than C1 enabled", False),
    ("cpu.cstates", "fail", [setv(("cpuidle", "states", "state2"), _state("C2", 400, 4, 0))], None,
     "enabled states deeper than C1: C2 (400us)", True),
    ("cpu.cstates", "fail", [setv(("cpuidle", "max_cstate_param"), "8")], None,
     "processor module max_cstate is 8", True),
    ("cpu.cstates", "fail", [args(BASE_EFF, BASE_CONF)], None, "processor.max_cstate=1 is not on /proc/cmdline", True),
    ("cpu.cstates", "fail", [args(BASE_EFF + ["processor.max_cstate=1"], BASE_CONF)], None,
     "processor.max_cstate=1 is on /proc/cmdline but not configured in the boot loader: lost at the next boot", True),
    ("cpu.cstates", "pending", [args(BASE_EFF, BASE_CONF + ["processor.max_cstate=1"]),
                                setv(("cpuidle", "max_cstate_param"), "8"),
                                setv(("cpuidle", "states", "state2"), _state("C2", 400, 4, 0))], None,
     "processor.max_cstate=1 is configured in the boot loader; effective after reboot", True),
    ("cpu.cstates", "fail", [setv(("cpuidle", "states", "state1"), _state("C1E", 2, 4, 0))], None,
     "enabled states deeper than C1: C1E (2us)", True),
    ("cpu.cstates", "pass", [setv(("cpuidle", "states", "state2"), _state("C2", 400, 4, 0)),
                             setv(("cpuidle", "max_cstate_param"), "2"),
                             args(BASE_EFF + ["processor.max_cstate=2"], BASE_CONF + ["processor.max_cstate=2"])],
     {"max_cstate": 2}, "processor.max_cstate=2 effective; nothing deeper than C2 enabled", False),
    # intel_idle names its ACPI C1 "C1_ACPI": that is C1, not deeper
    ("cpu.cstates", "pass", [setv(("cpuidle", "states", "state1"), _state("C1_ACPI", 1, 4, 0))], None,
     "nothing deeper than C1 enabled", False),
    ("cpu.cstates", "error", [setv(("cpuidle",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    # Intel: the limit of intel_idle, which ignores processor.max_cstate (issue 17).
    ("cpu.cstates", "pass", [intel()], None, "intel_idle.max_cstate=1 effective; nothing deeper than C1 enabled",
     False),
    ("cpu.cstates", "fail", [intel(), setv(("cpuidle", "intel_max_cstate_param"), "9"),
                             setv(("cpuidle", "states", "state3"), _state("C6", 290, 4, 0)),
                             args(BASE_EFF + ["processor.max_cstate=1"], BASE_CONF + ["processor.max_cstate=1"])],
     None, "intel_idle.max_cstate=1 is not on /proc/cmdline; intel_idle module max_cstate is 9; enabled states "
           "deeper than C1: C6 (290us)", True),
    ("cpu.cstates", "pending", [intel(), setv(("cpuidle", "intel_max_cstate_param"), "9"),
                                args(BASE_EFF, BASE_CONF + ["intel_idle.max_cstate=1"])],
     None, "intel_idle.max_cstate=1 is configured in the boot loader; effective after reboot", True),
    ("cpu.cstates", "skip", [setv(("cpuidle", "driver"), "none"), setv(("cpuidle", "states"), {}),
                             setv(("cpu", "hypervisor"), True)], None,
     "no cpuidle driver is in use (/sys/devices/system/cpu/cpuidle/current_driver: none), as in many virtual "
     "machines: there is no C-state limit to set", False),
    ("cpu.cstates", "skip", [setv(("cpuidle", "driver"), "haltpoll")], None,
     "the idle driver in use is haltpoll, which no max_cstate boot argument limits", False),
    # The C-state limit depends on the idle driver alone: an unreadable /proc/cpuinfo leaves it known.
    ("cpu.cstates", "pass", [setv(("cpu",), {"error": SECTION_ERROR})], None, "processor.max_cstate=1 effective",
     False),
    ("cpu.cstates", "error", [setv(("cmdline",), {"error": "/proc/cmdline: No such file or directory"})], None,
     "cannot tell whether processor.max_cstate=1 is effective: /proc/cmdline: No such file or directory", False),
    ("cpu.cstates", "fail", [setv(("cmdline",), {"error": "/proc/cmdline: No such file or directory"}),
                             setv(("cpuidle", "states", "state2"), _state("C2", 400, 4, 0))], None,
     "enabled states deeper than C1: C2 (400us); (/proc/cmdline unreadable", True),
    # -- kernel.numa_balancing -------------------------------------------------------------------------------
    ("kernel.numa_balancing", "pass", [], None, "numa_balancing is 0 and persisted", False),
    ("kernel.numa_balancing", "fail", [setv(("sysctl", "kernel.numa_balancing", "persisted"), None)], None,
     "numa_balancing is 0 now but not persisted: it returns to the kernel default at the next boot", False),
    ("kernel.numa_balancing", "fail", [setv(("sysctl", "kernel.numa_balancing", "runtime"), "1"),
                                       setv(("sysctl", "kernel.numa_balancing", "persisted"), None)], None,
     "numa_balancing is 1 at runtime", False),
    ("kernel.numa_balancing", "fail", [setv(("sysctl", "kernel.numa_balancing", "runtime"), "1")], None,
     "numa_balancing is 1 at runtime, not 0, although 0 is persisted (set it at runtime: sysctl -w "
     "kernel.numa_balancing=0)", False),
    ("kernel.numa_balancing", "pass", [setv(("sysctl", "kernel.numa_balancing", "persisted"), None),
                                       args(BASE_EFF + ["numa_balancing=disable"],
                                            BASE_CONF + ["numa_balancing=disable"])],
     None, "numa_balancing is 0 and persisted", False),
    ("kernel.numa_balancing", "pass", [setv(("sysctl", "kernel.numa_balancing", "runtime"), "1"),
                                       setv(("sysctl", "kernel.numa_balancing", "persisted"),
                                            {"value": "1", "file": "/etc/sysctl.conf", "line": 1})],
     {"numa_balancing": 1}, "numa_balancing is 1 and persisted", False),
    ("kernel.numa_balancing", "skip", [setv(("sysctl", "kernel.numa_balancing", "runtime"), None)], None,
     "/proc/sys/kernel/numa_balancing does not exist", False),
    ("kernel.numa_balancing", "error", [setv(("sysctl",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    # -- pcie.mrrs -------------------------------------------------------------------------------------------
    ("pcie.mrrs", "pass", [], None, "all 2 GPUs at MaxReadReq 4096", False),
    ("pcie.mrrs", "fail", [gpus({"mrrs": 512}, {"mrrs": 512})], None,
     "2 of 2 GPUs below MaxReadReq 4096: 0000:01:00.0, 0000:21:00.0", False),
    ("pcie.mrrs", "fail", [gpus({"mrrs": 512}, {"mrrs": None, "error": "cfg: short"})], None,
     "1 of 2 GPUs below MaxReadReq 4096: 0000:01:00.0", False),
    ("pcie.mrrs", "error", [gpus({}, {"mrrs": None, "error": "/sys/bus/pci/devices/0000:21:00.0/config: short"})],
     None, "could not read 1 GPU config spaces: /sys/bus/pci/devices/0000:21:00.0/config: short", False),
    ("pcie.mrrs", "error", [gpus({}, {"mrrs": None})], None, "no PCI Express capability found", False),
    ("pcie.mrrs", "skip", [setv(("pci", "functions"), [])], None, "no NVIDIA GPU (vendor 0x10de, class 0x03xx) found",
     False),
    ("pcie.mrrs", "error", [setv(("pci",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    # -- pcie.link -------------------------------------------------------------------------------------------
    ("pcie.link", "pass", [], None, "all 2 GPU links at capability", False),
    ("pcie.link", "fail", [gpus({"lnksta_width": 8})], None, "1 GPU links narrower than their capability", False),
    ("pcie.link", "warn", [gpus({"lnksta_speed": "2.5GT/s"})], None,
     "1 of 2 GPUs below capable speed at full width", False),
    ("pcie.link", "fail", [gpus({"lnksta_speed": "2.5GT/s"}, {"lnksta_width": 4, "lnksta_speed": "2.5GT/s"})], None,
     "1 GPU links narrower", False),
    ("pcie.link", "error", [gpus({"error": "/sys/bus/pci/devices/0000:01:00.0/config: 64 bytes"})], None,
     "could not read 1 GPU links: /sys/bus/pci/devices/0000:01:00.0/config: 64 bytes", False),
    ("pcie.link", "skip", [setv(("pci", "functions"), [])], None, "no NVIDIA GPU found", False),
    ("pcie.link", "error", [setv(("pci",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    # -- kernel.version --------------------------------------------------------------------------------------
    ("kernel.version", "pass", [], None, "running 6.14.8-2-pve", False),
    ("kernel.version", "warn", [setv(("kernel", "next_boot_kernel"), "6.8.12-4-pve"),
                                setv(("kernel", "next_boot_rule"), "newest-installed")], None,
     "running 6.14.8-2-pve but the next boot would start 6.8.12-4-pve (newest-installed)", False),
    ("kernel.version", "pending", [setv(("kernel", "running"), "6.8.12-4-pve")], None,
     "6.14.8-2-pve is pinned; running 6.8.12-4-pve until the next reboot", True),
    ("kernel.version", "pending", [setv(("kernel", "running"), "6.8.12-4-pve"),
                                   setv(("kernel", "next_boot_rule"), "newest-installed")], None,
     "6.14.8-2-pve is the default; running 6.8.12-4-pve", True),
    ("kernel.version", "fail", [setv(("kernel", "running"), "6.8.12-4-pve"),
                                setv(("kernel", "next_boot_kernel"), "6.8.12-4-pve")], None,
     "running 6.8.12-4-pve; 6.14.8-2-pve installed but not pinned (next boot: 6.8.12-4-pve)", True),
    ("kernel.version", "fail", [setv(("kernel", "running"), "6.8.12-4-pve"),
                                setv(("kernel", "installed"), ["6.8.12-4-pve"]),
                                setv(("kernel", "next_boot_kernel"), "6.8.12-4-pve")], None,
     "running 6.8.12-4-pve; no 6.14 kernel installed (install proxmox-kernel-6.14)", True),
    ("kernel.version", "fail", [setv(("kernel", "running"), "6.140.1-1-pve"), setv(("kernel", "installed"), []),
                                setv(("kernel", "next_boot_kernel"), None)], None, "no 6.14 kernel installed", True),
    ("kernel.version", "skip", [], {"kernel_series": ""}, "kernel_series is empty in the policy", False),
    ("kernel.version", "error", [setv(("kernel",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    # -- boot.cmdline ----------------------------------------------------------------------------------------
    ("boot.cmdline", "pass", [], None, "all required args configured in /etc/kernel/cmdline and effective", False),
    ("boot.cmdline", "pending", [args(BASE_EFF, BASE_CONF + ["amd_pstate=active", "processor.max_cstate=1"])], None,
     "configured in /etc/kernel/cmdline; effective after the next reboot", True),
    ("boot.cmdline", "fail", [args(BASE_EFF, BASE_CONF)], None,
     "amd_pstate=active: not configured in /etc/kernel/cmdline; processor.max_cstate=1: not configured", True),
    ("boot.cmdline", "fail", [args(BASE_EFF + ["amd_pstate=active", "processor.max_cstate=1"],
                                   BASE_CONF + ["processor.max_cstate=1"])], None,
     "amd_pstate=active: on /proc/cmdline but not configured in /etc/kernel/cmdline: lost at next boot", True),
    ("boot.cmdline", "fail", [args(BASE_EFF + ["amd_pstate=passive", "processor.max_cstate=1"],
                                   BASE_CONF + ["amd_pstate=passive", "processor.max_cstate=1"])], None,
     "amd_pstate=active: not configured in /etc/kernel/cmdline (found conflicting amd_pstate=passive)", True),
    ("boot.cmdline", "fail", [], {"cmdline_forbidden": ["iommu=pt"]}, "no iommu=pt: remove it from /etc/kernel/cmdline",
     True),
    ("boot.cmdline", "pass", [], {"cmdline_forbidden": ["nomodeset", "iommu=off"]},
     "all required args configured", False),
    ("boot.cmdline", "pass", [args(configured="unknown")], None, "all required args configured", False),
    ("boot.cmdline", "error", [setv(("boot",), {"error": "/etc/default/grub:3: cannot evaluate $(...)"})], None,
     "/etc/default/grub:3: cannot evaluate", False),
    ("boot.cmdline", "error", [setv(("cmdline",), {"error": "/proc/cmdline: No such file or directory"})], None,
     "cannot tell which args are effective: /proc/cmdline: No such file or directory", False),
    # The CPU's own args (issue 17): an Intel host is asked for intel_idle's limit, never for amd_pstate=active.
    ("boot.cmdline", "pass", [intel()], None, "all required args configured in /etc/kernel/cmdline and effective",
     False),
    ("boot.cmdline", "fail", [intel(), args(BASE_EFF + ["processor.max_cstate=1"],
                                            BASE_CONF + ["processor.max_cstate=1"])], None,
     "intel_idle.max_cstate=1: not configured in /etc/kernel/cmdline", True),
    # An explicit cmdline_required is the whole list: nothing of the CPU's is added.
    ("boot.cmdline", "pass", [args(BASE_EFF, BASE_CONF)], {"cmdline_required": ["iommu=pt"]},
     "all required args configured", False),
    ("boot.cmdline", "fail", [args(BASE_EFF, BASE_CONF)],
     {"cmdline_required": ["iommu=pt"], "cmdline_cpu_args": True},
     "amd_pstate=active: not configured in /etc/kernel/cmdline; processor.max_cstate=1: not configured", True),
    ("boot.cmdline", "error", [setv(("cpu",), {"error": SECTION_ERROR})], None,
     "cannot tell which CPU boot args this host needs: " + SECTION_ERROR, False),
    ("boot.cmdline", "pass", [setv(("cpu",), {"error": SECTION_ERROR})], {"cmdline_required": ["iommu=pt"]},
     "all required args configured", False),
    # -- lxc.gpu_devices -------------------------------------------------------------------------------------
    ("lxc.gpu_devices", "pass", [], None, "1 GPU CTs allow the current NVIDIA majors", False),
    ("lxc.gpu_devices", "fail", [setv(("lxc", "cts", 0, "config"), CT_101.replace("c 511:* rwm", "c 509:* rwm"))],
     None, "CT 101: line 3 'lxc.cgroup2.devices.allow: c 509:* rwm': stale", False),
    # Config fixed, CT still running with the rules of its last start (Proxmox's /var/lib/lxc/101/config): pending.
    ("lxc.gpu_devices", "pending", [setv(("lxc", "cts", 0, "started_config"), STARTED_509)], None,
     "CT 101: runs with the device rules of its last start (/var/lib/lxc/101/config), which do not cover "
     "/dev/nvidia-uvm (511:0), /dev/nvidia-uvm-tools (511:1): restart it (pct reboot 101)", False),
    ("lxc.gpu_devices", "pass", [setv(("lxc", "cts", 0, "started_config"), STARTED_509.replace("509", "511"))],
     None, "1 GPU CTs allow the current NVIDIA majors", False),
    ("lxc.gpu_devices", "pass", [setv(("lxc", "cts", 0, "started_config"), STARTED_509),
                                 setv(("ct_runtime", "cts", 0, "running"), False)], None,
     "1 GPU CTs allow the current NVIDIA majors", False),  # a stopped CT starts with the config as it is now
    ("lxc.gpu_devices", "error", [setv(("lxc", "cts", 0), {"ctid": "101", "path": "/etc/pve/lxc/101.conf",
                                                            "error": "/etc/pve/lxc/101.conf: Is a directory"})], None,
     "CT 101: /etc/pve/lxc/101.conf: Is a directory", False),
    ("lxc.gpu_devices", "warn", [setv(("nvidia", "nodes"), None)], None,
     "CT 101: host NVIDIA device nodes unknown", False),
    ("lxc.gpu_devices", "skip", [], {"lxc_check": False}, "lxc_check is off in the policy", False),
    ("lxc.gpu_devices", "skip", [setv(("lxc",), {"present": False, "cts": [], "evidence": []})], None,
     "no /etc/pve/lxc directory", False),
    ("lxc.gpu_devices", "skip", [setv(("lxc", "cts", 0, "config"), "arch: amd64\n")], None,
     "no CT config passes NVIDIA devices", False),
    ("lxc.gpu_devices", "error", [setv(("lxc",), {"error": "/proc/devices: NVIDIA device state unavailable"})], None,
     "/proc/devices: NVIDIA device state unavailable", False),
    # -- nvidia.driver ---------------------------------------------------------------------------------------
    ("nvidia.driver", "pass", [], None, "driver 580.95.05 loaded", False),
    ("nvidia.driver", "fail", [setv(("nvidia", "version"), None)], None,
     "/proc/driver/nvidia/version is missing: the NVIDIA driver is not loaded", False),
    ("nvidia.driver", "error", [setv(("nvidia", "version"), None), setv(("nvidia", "driver_loaded"), True)], None,
     "no NVRM version line", False),
    ("nvidia.driver", "skip", [setv(("pci", "functions"), [])], None, "no NVIDIA GPU found", False),
    ("nvidia.driver", "skip", [gpus({"driver": "vfio-pci"}, {"driver": "vfio-pci"})], None,
     "all NVIDIA GPUs are bound to vfio-pci", False),
    ("nvidia.driver", "error", [setv(("nvidia",), {"error": "/proc/devices: Permission denied"})], None,
     "/proc/devices: Permission denied", False),
    # -- nvidia.persistence ----------------------------------------------------------------------------------
    ("nvidia.persistence", "pass", [], None, "nvidia-persistenced holds persistence mode on every GPU", False),
    ("nvidia.persistence", "fail", [setv(("nvidia", "smi", "gpus", 1, "persistence"), False)], None,
     "persistence mode off on 1 GPUs", False),
    ("nvidia.persistence", "warn", [setv(("nvidia", "persistenced"), {"pid": None, "running": False})], None,
     "the legacy mode (nvidia-smi -pm 1) NVIDIA deprecates", False),
    ("nvidia.persistence", "warn", [setv(("nvidia", "persistenced"), {"pid": 4242, "running": False})], None,
     "nvidia-persistenced does not run", False),
    ("nvidia.persistence", "skip", [setv(("nvidia", "smi"), None),
                                    setv(("nvidia", "smi_reason"), "nvidia-smi not installed")],
     None, "persistence mode not read (nvidia-smi not installed)", False),
    ("nvidia.persistence", "skip", [setv(("nvidia", "smi", "gpus", 1, "persistence"), False)],
     {"nvidia_persistence": False}, "policy nvidia_persistence is false", False),
    ("nvidia.persistence", "skip", [setv(("nvidia", "version"), None)], None, "the NVIDIA driver is not loaded",
     False),
    ("nvidia.persistence", "error", [setv(("nvidia",), {"error": "/proc/devices: Permission denied"})], None,
     "/proc/devices: Permission denied", False),
    # -- nvidia.uvm_hmm (580 is in the HMM issues table) -----------------------------------------------------
    ("nvidia.uvm_hmm", "pass", [], None, "HMM is off", False),
    ("nvidia.uvm_hmm", "warn", [setv(("nvidia", "hmm"), {"disabled": False, "configured": None,
                                                         "configured_in": None})], None,
     "HMM is on with driver 580.95.05 (cuInit returns CUDA_ERROR_NOT_INITIALIZED", True),
    ("nvidia.uvm_hmm", "fail", [setv(("nvidia", "hmm"), {"disabled": False, "configured": False,
                                                         "configured_in": "/etc/modprobe.d/x.conf"}),
                                setv(("nvidia", "version", "version"), "550.127.05")], {"nvidia_uvm_hmm": "disable"},
     "policy nvidia_uvm_hmm is disable", True),
    ("nvidia.uvm_hmm", "pass", [setv(("nvidia", "hmm", "disabled"), False),
                                setv(("nvidia", "version", "version"), "550.127.05")], None,
     "no known HMM issue in branch 550", False),
    ("nvidia.uvm_hmm", "pass", [setv(("nvidia", "hmm", "disabled"), False), setv(("nvidia", "version", "open"), False)],
     None, "HMM is not in use (proprietary kernel modules)", False),
    ("nvidia.uvm_hmm", "pending", [setv(("nvidia", "hmm"), {"disabled": False, "configured": True,
                                                            "configured_in": "/etc/modprobe.d/nvidia-uvm-hmm.conf"})],
     None, "uvm_disable_hmm=1 is set in /etc/modprobe.d/nvidia-uvm-hmm.conf but the loaded nvidia_uvm still runs HMM",
     True),
    ("nvidia.uvm_hmm", "skip", [setv(("nvidia", "hmm", "disabled"), None)], None, "nvidia_uvm is not loaded", False),
    ("nvidia.uvm_hmm", "error", [setv(("nvidia", "hmm", "error"), "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm: "
                                                                  "'maybe' is not Y or N")], None,
     "'maybe' is not Y or N", False),
    ("nvidia.uvm_hmm", "skip", [setv(("nvidia", "hmm", "disabled"), False)], {"nvidia_uvm_hmm": "any"},
     "policy nvidia_uvm_hmm is any", False),
    ("nvidia.uvm_hmm", "error", [setv(("nvidia",), {"error": "/proc/devices: Permission denied"})], None,
     "/proc/devices: Permission denied", False),
    # -- iommu.mode (informational: pass unless unreadable) --------------------------------------------------
    ("iommu.mode", "pass", [], None, "no host-owned GPU in a translated domain", False),
    ("iommu.mode", "fail", [setv(("iommu", "group_types"), {"30": "DMA-FQ", "31": "identity"}),
                            args(BASE_EFF[:2], BASE_CONF[:1])], None,
     "1 host-owned GPUs in a translated IOMMU domain (DMA-FQ): 0000:01:00.0", True),
    ("iommu.mode", "pending", [setv(("iommu", "group_types"), {"30": "DMA", "31": "DMA"}),
                               args(BASE_EFF[:2], BASE_CONF)], None,
     "iommu=pt is configured but not yet effective: 2 GPUs stay translated", True),
    ("iommu.mode", "pass", [setv(("iommu", "group_types"), {"30": "DMA", "31": "DMA"}), gpus({"driver": "vfio-pci"},
                                                                                          {"driver": "vfio-pci"})],
     None, "no host-owned GPU in a translated domain", False),
    ("iommu.mode", "pass", [setv(("iommu", "group_types"), {"30": "DMA", "31": "DMA"})], {"iommu_passthrough": False},
     "policy iommu_passthrough is false", False),
    ("iommu.mode", "pass", [setv(("iommu", "units"), []), setv(("iommu", "groups"), 0)], None, "IOMMU off", False),
    ("iommu.mode", "error", [setv(("iommu",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    # -- pcie.topology, pcie.acs, pcie.bar1, pcie.sriov ----------------------------------------------------------
    ("pcie.topology", "pass", [], None, "2 GPUs: PIX 1 of 1 GPU pairs", False),
    ("pcie.topology", "skip", [setv(("pci", "functions"), [_gpu("0000:01:00.0")])], None, "one GPU", False),
    ("pcie.topology", "error", [setv(("pci",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    ("pcie.acs", "pass", [], None, "peer traffic between GPUs behind a switch stays in the switch", False),
    ("pcie.acs", "fail", [setv(("pci", "bridges", DSPS[1]), _dsp(DSPS[1], 0x001D))], None,
     "ACS redirects GPU peer traffic to the root complex on 0000:0b:10.0; affected GPU pairs: 01:00.0-21:00.0", False),
    ("pcie.acs", "skip", [setv(("pci", "bridges", DSPS[1]), _dsp(DSPS[1], 0x001D)),
                          gpus({}, {"driver": "vfio-pci"})], None,
     "1 of 2 ports keep ACS redirect: a vfio-pci device is in their switch (0000:0b:10.0)", False),
    ("pcie.acs", "skip", [], {"gpu_p2p": "ignore"}, "policy gpu_p2p is ignore", False),
    ("pcie.acs", "skip", [gpus({}, {"chain": ["0000:00:03.1", "0000:21:00.0"]})], None,
     "no two GPUs share a PCIe switch", False),
    ("pcie.acs", "error", [setv(("pci", "bridges", DSPS[0], "acs_error"), "/sys/x/config: loops")], None,
     "could not read ACS of 1 ports: /sys/x/config: loops", False),
    ("pcie.bar1", "pass", [], None, "every GPU maps the BAR1 its capability allows", False),
    ("pcie.bar1", "warn", [gpus({"bar1": {"size": 256 << 20, "start": 0xD0000000}})], None,
     "1 of 2 GPUs map only part of what they support: 0000:01:00.0", False),
    ("pcie.bar1", "error", [gpus({}, {"bar1_error": "/sys/x/resource: No such file"})], None,
     "could not read BAR1 of 1 GPUs: /sys/x/resource: No such file", False),
    ("pcie.bar1", "skip", [setv(("pci", "functions"), [])], None, "no NVIDIA GPU found", False),
    ("pcie.sriov", "pass", [], None, "2 of 2 GPUs offer SR-IOV virtual functions", False),
    ("pcie.sriov", "skip", [gpus({"sriov_totalvfs": None}, {"sriov_totalvfs": 0})], None, "no GPU offers SR-IOV",
     False),
    ("pcie.sriov", "error", [setv(("pci",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    ("numa.gpu_locality", "pass", [], None, "2 GPUs on 1 NUMA nodes", False),
    ("numa.gpu_locality", "pass", [setv(("numa", "nodes"), [{"node": 0, "cpus": [0, 1], "socket": 0}]),
                                   gpus({"numa_node": -1}, {"numa_node": -1})], None, "one NUMA node", False),
    ("numa.gpu_locality", "warn", [gpus({"numa_node": -1})], None,
     "1 of 2 GPUs without a NUMA node on a 2-node host: 0000:01:00.0", False),
    ("numa.gpu_locality", "skip", [setv(("pci", "functions"), [])], None, "no NVIDIA GPU found", False),
    ("numa.gpu_locality", "error", [setv(("numa", "errors"), ["/sys/devices/system/node/node1/cpulist: 'x'"])],
     None, "node1/cpulist", False),
    ("lxc.resources", "pass", [], None, "1 GPU CTs: CPUs on their GPUs' nodes", False),
    ("lxc.resources", "fail", [setv(("ct_runtime", "cts", 0, "cgroup", "cpu.max"), "400000 100000")], None,
     "CPU quota: cpulimit unset, effective 4 CPUs: remove cpulimit", False),
    ("lxc.resources", "fail", [setv(("ct_runtime", "cts", 0, "cgroup", "cpuset.cpus.effective"), "8-15")], None,
     "CPUs 8-15 (node 1), none on its GPUs' node 0: set lxc.cgroup2.cpuset.cpus: 0-7", False),
    ("lxc.resources", "warn", [gpus({}, {"numa_node": 1}),
                               ct101_line("lxc.mount.entry: /dev/nvidia1 dev/nvidia1 none bind,optional,create=file"),
                               add_node(_node("/dev/nvidia1", 195, 1))], {"lxc_min_cpus_per_gpu": 2},
     "CPUs 0-7 (node 0), none on node 1 of its GPUs: set lxc.cgroup2.cpuset.cpus: 0-15", False),
    ("lxc.resources", "pending", [ct101_line("lxc.cgroup2.cpuset.cpus: 0-7"),
                                  setv(("ct_runtime", "cts", 0, "cgroup", "cpuset.cpus.effective"), "8-15")], None,
     "cpuset configured 0-7 (node 0), effective 8-15 until the CT restarts", False),
    ("lxc.resources", "skip", [setv(("ct_runtime", "cts"), [])], None, "no CT config passes NVIDIA devices", False),
    ("lxc.resources", "error", [setv(("ct_runtime", "cts", 0, "cgroup", "memory.max"), "lots")], None,
     "/sys/fs/cgroup/lxc/101/memory.max", False),
    ("nvidia.stack", "pass", [], None, "driver 580.95.05 fits the GPUs", False),
    ("nvidia.stack", "fail", [setv(("ct_runtime", "cts", 0, "libs", "links"),
                                   {"libcuda.so.1": "libcuda.so.580.82.09"})],
     None, "point to 580.82.09, the host's kernel module is 580.95.05", False),
    ("nvidia.stack", "fail", [setv(("nvidia", "version"), {"version": "580.95.05", "open": False})], None,
     "GPUs need the open kernel modules", False),
    ("nvidia.stack", "warn", [setv(("ct_runtime", "cts", 0, "libs"), {"root": "/proc/4127/root", "reason": None,
                                                                         "dirs": [], "versions": {}, "links": {}})],
     None, "CUDA cannot start in this CT", False),
    ("nvidia.stack", "skip", [setv(("nvidia", "version"), None)], None, "the NVIDIA driver is not loaded", False),
    ("nvidia.stack", "error", [setv(("nvidia",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
    ("kernel.known_issues", "pass", [], None, "no known issue", False),
    ("kernel.known_issues", "fail", [setv(("kernel", "running"), "6.8.12-4-pve"),
                                     setv(("kernel", "next_boot_kernel"), "6.8.12-4-pve"),
                                     args(["BOOT_IMAGE=/vmlinuz-6.8.12-4-pve"], ["root=/dev/pve/root"])], None,
     "boot with acpi-cpufreq, not amd-pstate", True),
    ("kernel.known_issues", "pending", [setv(("kernel", "running"), "6.8.12-4-pve")], None,
     "the next boot's kernel has no such problem", True),
    ("kernel.known_issues", "warn", [setv(("kernel", "running"), "6.11.0-1-pve"),
                                     setv(("kernel", "next_boot_kernel"), "6.11.0-1-pve")], None,
     "does not know family 1Ah", False),
    ("kernel.known_issues", "error", [setv(("kernel",), {"error": SECTION_ERROR})], None, SECTION_ERROR, False),
]

@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario_id(s) for s in SCENARIOS])
def test_scenario(scenario):
    assert_scenario(good_facts(), scenario)


def test_every_check_has_a_passing_and_an_error_scenario():
    """Derived from the catalogue, no list of checks: each check has scenarios here or in its concern's own test
    file (checkcases.all_scenarios), at least one passing and one for a section that could not be read (or does
    not apply)."""
    seen = {}
    tables = all_scenarios()
    assert tables["test_checks"] is SCENARIOS
    for scenarios in tables.values():
        for check_id, status, *_ in scenarios:
            seen.setdefault(check_id, set()).add(status)
    assert set(seen) == set(BY_ID)
    for check_id, statuses in seen.items():
        assert "pass" in statuses and statuses & {"error", "skip"}, (check_id, statuses)


def test_good_facts_pass_everything_they_are_the_base_of():
    """good_facts() passes every check whose scenarios are in this file (a check tested in its concern's own file
    passes on that file's good facts: its pass scenario)."""
    here = [c["id"] for c in CATALOGUE if c["id"] in {s[0] for s in SCENARIOS}]
    results = evaluate(good_facts(), DEFAULT, only=set(here))
    assert [r["id"] for r in results] == here
    assert {r["id"]: r["status"] for r in results} == dict.fromkeys(here, "pass")
    assert summarize(results) == {"counts": dict(dict.fromkeys(STATUSES, 0), **{"pass": len(here)}),
                                  "failing": [], "reboot_required": False}


def test_results_carry_the_catalogue_texts_with_policy_values():
    policy = merge_policy({"pcie_mrrs": 2048, "max_cstate": 2, "cmdline_required": ["iommu=pt"]})
    res = by_id(evaluate(good_facts(), policy))
    assert res["pcie.mrrs"]["title"] == "PCIe Max Read Request Size 2048 on every NVIDIA GPU"
    assert res["pcie.mrrs"]["status"] == "fail"  # 4096 != 2048: the check wants exactly the policy value
    assert res["cpu.cstates"]["expected"].startswith("processor.max_cstate=2 on /proc/cmdline")
    assert res["boot.cmdline"]["expected"].startswith("iommu=pt configured")
    for r in res.values():
        entry = BY_ID[r["id"]]
        assert r["severity"] == entry["severity"] and r["fix_tag"] == entry["fix_tag"]
        assert r["rationale"] == entry["rationale"]
        assert "{" not in r["title"] + r["expected"] + r["remediation"]


# -- item details --------------------------------------------------------------------------------------------
def test_mrrs_items_name_every_gpu():
    facts = good_facts()
    gpus({"mrrs": 512}, {})(facts)
    res = run_check(facts, None, "pcie.mrrs")
    label = " NVIDIA Corporation GB202GL [RTX PRO 6000 Blackwell Server Edition] (NUMA node 0)"
    assert [(i["name"], i["status"]) for i in res["items"]] == [("0000:01:00.0" + label, "fail"),
                                                                ("0000:21:00.0" + label, "pass")]
    assert res["items"][0]["current"] == "MaxReadReq 512, MaxPayload 256 (cap 256)"
    assert res["current"] == "MaxReadReq 512/4096 on 2 GPUs"


def test_mrrs_error_item_expected_is_text_like_the_others():
    facts = good_facts()
    gpus({"mrrs": None, "error": "x"})(facts)
    res = run_check(facts, None, "pcie.mrrs")
    assert [i["expected"] for i in res["items"]] == ["MaxReadReq 4096", "MaxReadReq 4096"]


def test_link_items():
    facts = good_facts()
    gpus({"lnksta_width": 8}, {"lnksta_speed": "16GT/s"})(facts)
    res = run_check(facts, None, "pcie.link")
    assert [(i["status"], i["current"], i["expected"]) for i in res["items"]] == [
        ("fail", "32GT/s x8", "32GT/s x16"), ("warn", "16GT/s x16", "32GT/s x16")]
    assert res["items"][0]["message"] == "link trained at x8 of x16 lanes"


def test_link_width_missing_in_lnksta_is_an_error_not_a_crash():
    facts = good_facts()
    gpus({"lnksta_width": None})(facts)
    res = run_check(facts, None, "pcie.link")
    assert res["status"] == "error"
    # the evaluator raised, evaluate() turned it into an error result
    assert res["message"].startswith("internal error evaluating pcie.link: TypeError")


def test_cstates_items():
    facts = good_facts()
    setv(("cpuidle", "states", "state2"), _state("C2", 400, 3, 1))(facts)
    res = run_check(facts, None, "cpu.cstates")
    assert [(i["name"], i["status"], i["expected"]) for i in res["items"]] == [
        ("state0 POLL", "pass", "allowed"), ("state1 C1", "pass", "allowed"), ("state2 C2", "fail", "disabled")]
    assert res["items"][2]["current"] == "latency 400us, enabled on 3 CPUs (0-2)"


def test_scaling_driver_items_per_driver():
    facts = good_facts()
    facts["cpu"]["policies"] = {"policy%d" % n: _policy(n, driver="acpi-cpufreq" if n >= 2 else "amd-pstate-epp")
                                for n in range(12)}
    res = run_check(facts, None, "cpu.scaling_driver")
    items = {i["name"]: i for i in res["items"]}
    assert items["amd-pstate-epp"]["status"] == "pass"
    assert items["amd-pstate-epp"]["message"] == "policies: policy0,policy1"
    assert items["acpi-cpufreq"]["status"] == "fail"
    assert items["acpi-cpufreq"]["message"].endswith(" …")  # 10 policies, 8 listed
    assert res["current"].startswith("acpi-cpufreq (10 policies), amd-pstate-epp (2 policies)")


def test_governor_items_group_values():
    facts = good_facts()
    setv(("cpu", "policies", "policy1", "governor"), "powersave")(facts)
    setv(("cpu", "policies", "policy3", "governor"), "powersave")(facts)
    setv(("cpu", "policies", "policy2", "governor"), None)(facts)
    res = run_check(facts, None, "cpu.governor")
    assert [(i["name"], i["message"]) for i in res["items"]] == [
        ("governor=(unreadable)", "1 policies: policy2"), ("governor=powersave", "2 policies: policy1, policy3")]
    assert res["current"] == "(unreadable) (1), powersave (2)"


def test_cmdline_items():
    facts = good_facts()
    args(BASE_EFF + ["processor.max_cstate=1"], BASE_CONF + ["amd_pstate=active"])(facts)
    overrides = {"cmdline_forbidden": ["quiet"],
                 "cmdline_required": ["amd_pstate=active", "processor.max_cstate=1", "iommu=pt"]}
    res = run_check(facts, overrides, "boot.cmdline")
    assert [(i["name"], i["status"]) for i in res["items"]] == [
        ("amd_pstate=active", "pending"), ("processor.max_cstate=1", "fail"), ("iommu=pt", "pass"),
        ("no quiet", "pass")]
    assert res["status"] == "fail"  # a fail outranks a pending


def test_cmdline_forbidden_key_matches_any_value():
    facts = good_facts()
    args(BASE_EFF + ["amd_pstate=active", "processor.max_cstate=1", "processor.max_cstate=5"],
         BASE_CONF + ["amd_pstate=active", "processor.max_cstate=1"])(facts)
    res = run_check(facts, {"cmdline_forbidden": ["quiet", "processor.max-cstate"]}, "boot.cmdline")
    forbidden = res["items"][-1]
    assert forbidden["name"] == "no processor.max-cstate"
    assert forbidden["status"] == "fail"
    assert forbidden["current"] == "processor.max_cstate=1 processor.max_cstate=5"


def test_lxc_items_only_gpu_cts():
    res = run_check(good_facts(), None, "lxc.gpu_devices")
    assert [i["name"] for i in res["items"]] == ["CT 101"]
    assert res["current"] == "host majors: nvidia=195, nvidia-uvm=511"


# -- boot_arg_state ----------------------------------------------------------------------------------------------
def facts_with(effective, configured):
    facts = good_facts()
    args(effective, configured)(facts)
    return facts


@pytest.mark.parametrize("effective,configured,state", [
    (["amd_pstate=active"], ["amd_pstate=active"], "effective"),
    (["amd_pstate=passive", "amd_pstate=active"], ["amd_pstate=passive", "amd_pstate=active"], "effective"),
    (["amd_pstate=active", "amd_pstate=passive"], ["amd_pstate=active"], "pending"),       # last one wins on cmdline
    (["amd_pstate=active"], ["amd_pstate=active", "amd_pstate=passive"], "transient"),     # last one wins in config
    ([], ["amd_pstate=active"], "pending"),
    (["amd_pstate=active"], [], "transient"),
    ([], [], "missing"),
    (["amd_pstate=guided"], ["amd_pstate=guided"], "missing"),
    (["amd_pstate=active"], "unknown", "effective"),    # configuration unknown: only the cmdline counts
    ([], "unknown", "missing"),
    # "-" and "_" are the same character in parameter names (kernel/params.c, bootcfg.plan_args)
    (["amd-pstate=active"], ["amd_pstate=active"], "effective"),
    (["amd_pstate=active"], ["amd-pstate=active"], "effective"),
    (['amd_pstate="active"'], ["amd_pstate=active"], "effective"),  # quotes are not part of the value
    (["amd_pstate=Active"], ["amd_pstate=Active"], "missing"),      # values are case-sensitive
])
def test_arg_state(effective, configured, state):
    assert boot_arg_state(facts_with(effective, configured), "amd_pstate=active")[0] == state


def test_arg_state_detail_names_the_conflicting_args():
    assert boot_arg_state(facts_with(["a=1"], ["a=2", "a=3"]), "a=1") == ("transient", ["a=2", "a=3"])
    assert boot_arg_state(facts_with(["a=2"], ["a=3"]), "a=1") == ("missing", ["a=3"])
    assert boot_arg_state(facts_with(["a=2"], []), "a=1") == ("missing", ["a=2"])
    assert boot_arg_state(facts_with(["a_b=2"], ["a-b=1"]), "a_b=1") == ("pending", ["a_b=2"])
    assert boot_arg_state(facts_with(["a_b=1"], ["a-b=1"]), "a_b=1") == ("effective", ["a_b=1"])


# -- evaluate() ----------------------------------------------------------------------------------------------
def test_skip_checks_policy():
    policy = merge_policy({"skip_checks": {"pcie.mrrs": "GPUs are passed through to VMs", "kernel.version": "lab"}})
    facts = good_facts()
    gpus({"mrrs": 512})(facts)
    res = by_id(evaluate(facts, policy))
    assert res["pcie.mrrs"]["status"] == "skip"
    assert res["pcie.mrrs"]["message"] == "skipped by policy: GPUs are passed through to VMs"
    assert res["kernel.version"]["status"] == "skip"
    assert res["pcie.link"]["status"] == "pass"
    assert len(res) == len(CATALOGUE)


def test_only_evaluates_the_named_checks_in_catalogue_order():
    results = evaluate(good_facts(), DEFAULT, only={"iommu.mode", "cpu.epp", "pcie.mrrs"})
    assert [r["id"] for r in results] == ["cpu.epp", "pcie.mrrs", "iommu.mode"]


def test_a_raising_evaluator_becomes_error_and_the_rest_still_run(monkeypatch):
    def boom(facts, policy):
        raise RuntimeError("boom")

    monkeypatch.setitem(audit.BY_NAME["cpufreq"].CHECKS, "cpu.governor", boom)
    results = evaluate(good_facts(), DEFAULT)
    res = by_id(results)
    assert len(results) == len(CATALOGUE)
    assert res["cpu.governor"]["status"] == "error"
    assert res["cpu.governor"]["message"] == "internal error evaluating cpu.governor: RuntimeError: boom"
    assert set(res["cpu.governor"]) == RESULT_KEYS
    here = {s[0] for s in SCENARIOS}  # the checks good_facts() is the base of
    assert all(r["status"] == "pass" for cid, r in res.items() if cid != "cpu.governor" and cid in here)


def test_empty_facts_never_raise():
    """Facts without any section (never produced by gather) still give one result per check, none passing."""
    results = evaluate({"errors": []}, DEFAULT)
    assert [r["id"] for r in results] == [c["id"] for c in CATALOGUE]
    for r in results:
        assert set(r) == RESULT_KEYS
        assert r["status"] in ("error", "skip", "fail") or r["id"] == "iommu.mode", r  # iommu: informational


def test_every_section_erroring_gives_error_results():
    facts = good_facts()
    for section in [name for concern in audit.CONCERNS for name, _ in concern.SECTIONS]:
        facts[section] = {"error": "/x/%s: Input/output error" % section}
    res = by_id(evaluate(facts, DEFAULT))
    assert {cid: r["status"] for cid, r in res.items()} == {c["id"]: "error" for c in CATALOGUE}
    assert res["pcie.mrrs"]["message"] == "/x/pci: Input/output error"


# -- summarize() ---------------------------------------------------------------------------------------------
def _res(cid, status, reboot=False):
    return {"id": cid, "status": status, "severity": BY_ID[cid]["severity"], "reboot_required": reboot}


RESULTS = [
    _res("lxc.gpu_devices", "fail"),            # critical
    _res("pcie.mrrs", "error"),                 # high
    _res("cpu.cstates", "pending", True),       # high, pending is not failing
    _res("kernel.version", "fail"),             # medium
    _res("nvidia.driver", "warn"),              # medium
    _res("iommu.mode", "pass"),                 # medium
    _res("cpu.epp", "skip"),                    # medium
]


@pytest.mark.parametrize("fail_on,failing", [
    ("critical", ["lxc.gpu_devices"]),
    ("high", ["lxc.gpu_devices", "pcie.mrrs"]),
    ("medium", ["lxc.gpu_devices", "pcie.mrrs", "kernel.version"]),
    ("low", ["lxc.gpu_devices", "pcie.mrrs", "kernel.version"]),
    ("info", ["lxc.gpu_devices", "pcie.mrrs", "kernel.version"]),
])
def test_summarize_thresholds(fail_on, failing):
    out = summarize(RESULTS, fail_on)
    assert out["failing"] == failing
    assert out["counts"] == {"pass": 1, "fail": 2, "warn": 1, "pending": 1, "skip": 1, "error": 1}
    assert out["reboot_required"] is True


def test_summarize_info_failure_counts_only_at_info():
    results = [_res("pcie.topology", "fail")]
    assert summarize(results, "low")["failing"] == []
    assert summarize(results, "info")["failing"] == ["pcie.topology"]
    assert summarize(results, "info")["reboot_required"] is False


def test_summarize_rejects_unknown_threshold():
    with pytest.raises(KeyError):
        summarize(RESULTS, "severe")


def test_good_facts_are_not_shared_between_scenarios():
    a = good_facts()
    b = copy.deepcopy(a)
    gpus({"mrrs": 512})(a)
    assert b["pci"]["functions"][0]["mrrs"] == 4096
