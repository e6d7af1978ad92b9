"""The host readers (concerns/cpufreq/checks.py, cstates.py, numa.py, nvidia.py, iommu.py; formats/cpu_list.py,
sysctl_conf.py).

Real data (sources in tests/fixtures/realdata/SOURCES.md):
  tests/fixtures/realdata/nvidia_smi/*  - nvidia-smi / nvidia-smi -q outputs, every file is parsed
  tests/fixtures/realdata/cpufreq/*     - cpupower frequency-info outputs, an amd-pstate policy `ls`,
                                          an amd-pstate-epp EPP/governor listing; turned into sysfs
                                          trees by ``cpufreq_tree()`` at run time and audited
Everything else is built in tmp_path by the tests.
"""
import errno
import os
import re

import pytest
from ansible.module_utils.pvetune import audit
from ansible.module_utils.pvetune.audit import gather
from ansible.module_utils.pvetune.concerns.cpufreq import checks as cpufreq
from ansible.module_utils.pvetune.concerns.cstates import checks as cstates
from ansible.module_utils.pvetune.concerns.iommu import checks as iommu
from ansible.module_utils.pvetune.concerns.nvidia import checks as nvidia
from ansible.module_utils.pvetune.core.fsroot import FsError, FsRoot
from ansible.module_utils.pvetune.core.policy import merge_policy
from ansible.module_utils.pvetune.formats import cpu_list, sysctl_conf
from privdrop import run_as_nobody as run_unprivileged

HERE = os.path.dirname(os.path.abspath(__file__))
REALDATA = os.path.join(os.path.dirname(HERE), "fixtures", "realdata")
SMI_DIR = os.path.join(REALDATA, "nvidia_smi")
CPUFREQ_DIR = os.path.join(REALDATA, "cpufreq")
CPU = "/sys/devices/system/cpu"

DENIED = os.strerror(errno.EACCES)


def write(root, host_path, text, mode=None):
    path = os.path.join(str(root), host_path.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    if mode is not None:
        os.chmod(path, mode)
    return path


def realdata(subdir, name):
    with open(os.path.join(REALDATA, subdir, name), "r", encoding="utf-8") as handle:
        return handle.read()


def as_reader(func):
    """Run a reader so that permission bits apply: directly when unprivileged, as nobody when root."""
    return run_unprivileged(func) if os.geteuid() == 0 else func()


def open_up(root):
    """Plain modes inside a scratch tree (directories 0755, files 0644) before single files are closed."""
    for dirpath, dirs, files in os.walk(str(root)):
        for name in dirs:
            os.chmod(os.path.join(dirpath, name), 0o755)
        for name in files:
            os.chmod(os.path.join(dirpath, name), 0o644)


# == CPU lists ==================================================================================
@pytest.mark.parametrize("text,cpus", [
    ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]),
    ("0", [0]),
    ("", []),
    ("  \n", []),
    ("0-127\n", list(range(128))),
    ("5,3,1", [5, 3, 1]),
    (" 1 , 2 ", [1, 2]),
])
def test_parse_cpu_list(text, cpus):
    assert cpu_list.parse_cpu_list(text) == cpus


@pytest.mark.parametrize("garbage", ["a", "1-a", "3-1", "1,,2", "-1", "0-", "1;2", "0x1", "0-70000", "1.5"])
def test_parse_cpu_list_garbage_raises_valueerror(garbage):
    with pytest.raises(ValueError):
        cpu_list.parse_cpu_list(garbage)


@pytest.mark.parametrize("cpus,text", [
    ([0, 1, 2, 5], "0-2,5"),
    ([], ""),
    ([7], "7"),
    ([3, 1, 2, 2, 0], "0-3"),
    ([0, 2, 4], "0,2,4"),
    (list(range(64)) + list(range(96, 128)), "0-63,96-127"),
])
def test_format_cpu_list(cpus, text):
    assert cpu_list.format_cpu_list(cpus) == text


@pytest.mark.parametrize("text", ["0-127", "0,2,4-6,9", "1", "0-3,8,10-11", "63-64"])
def test_cpu_list_round_trip(text):
    assert cpu_list.format_cpu_list(cpu_list.parse_cpu_list(text)) == text


def test_cpu_list_round_trip_from_numbers():
    cpus = [0, 1, 2, 3, 16, 17, 40, 100, 101, 102]
    assert cpu_list.parse_cpu_list(cpu_list.format_cpu_list(cpus)) == cpus


# == cstate_depth ================================================================================
@pytest.mark.parametrize("name,depth", [
    ("POLL", 0), ("poll", 0), ("C1", 1), ("C1E", 1.5), ("C2", 2), ("C3", 3), ("C6", 6), ("C10", 10),
    ("C6S", 6.5),
    # driver tags after a separator do not make a state deeper
    ("C1-SKX", 1), ("C1E-SKX", 1.5), ("C6-SKX", 6), ("C1_ACPI", 1), ("C2_ACPI", 2), ("C3_ACPI", 3),
    # unknown -> treated as deep
    ("", 99), (None, 99), ("WFI", 99), ("cpuidle", 99), ("X1", 99),
])
def test_cstate_depth(name, depth):
    assert cstates.cstate_depth(name) == depth


def test_cstate_depth_limits_as_the_check_uses_them():
    limit = 1
    assert cstates.cstate_depth("C1") <= limit
    assert cstates.cstate_depth("C1_ACPI") <= limit
    assert cstates.cstate_depth("C1E") > limit
    assert cstates.cstate_depth("C2") > limit


# == cpufreq (synthetic trees) ======================================================================
def make_policy(root, num, **files):
    """policy<num> with the given sysfs files (name=value); None values are left out."""
    pdir = "%s/cpufreq/policy%d" % (CPU, num)
    for name, value in files.items():
        if value is not None:
            write(root, "%s/%s" % (pdir, name), value + "\n")
    return pdir


def epyc_policy(root, num, **overrides):
    files = {
        "scaling_driver": "amd-pstate-epp",
        "scaling_governor": "performance",
        "scaling_available_governors": "performance powersave",
        "energy_performance_preference": "performance",
        "energy_performance_available_preferences": "default performance balance_performance balance_power power",
        "affected_cpus": str(num),
    }
    files.update(overrides)
    return make_policy(root, num, **files)


def test_read_cpufreq_reads_every_policy(tmp_path):
    for n in (0, 1, 2, 10):
        epyc_policy(tmp_path, n)
    write(tmp_path, CPU + "/amd_pstate/status", "active\n")
    write(tmp_path, CPU + "/online", "0-2,10\n")
    write(tmp_path, CPU + "/cpufreq/boost", "1\n")  # not a policy
    out = cpufreq.read_cpufreq(FsRoot(str(tmp_path)))
    assert list(out["policies"]) == ["policy0", "policy1", "policy2", "policy10"]  # natural order
    pol = out["policies"]["policy10"]
    assert pol == {"driver": "amd-pstate-epp", "governor": "performance",
                   "available_governors": ["performance", "powersave"], "epp": "performance",
                   "available_epp": ["default", "performance", "balance_performance", "balance_power", "power"],
                   "affected_cpus": "10"}
    assert out["amd_pstate_status"] == "active"
    assert out["online"] == "0-2,10"
    assert out["errors"] == []
    assert out["offline_policies"] == []
    assert any("amd_pstate/status = active" in e for e in out["evidence"])


def test_read_cpufreq_without_cpufreq(tmp_path):
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    out = cpufreq.read_cpufreq(FsRoot(str(tmp_path)))
    assert out["policies"] == {} and out["errors"] == []
    assert out["amd_pstate_status"] is None
    assert "no cpufreq policies" in out["evidence"][-1]


def test_read_cpufreq_offline_policy_is_not_an_error(tmp_path):
    """All CPUs of policy2 offline: empty affected_cpus, scaling files unreadable/missing (EBUSY on a host)."""
    epyc_policy(tmp_path, 0)
    epyc_policy(tmp_path, 1)
    make_policy(tmp_path, 2, affected_cpus="", related_cpus="2", cpuinfo_max_freq="3000000")
    out = cpufreq.read_cpufreq(FsRoot(str(tmp_path)))
    assert list(out["policies"]) == ["policy0", "policy1"]
    assert out["offline_policies"] == ["policy2"]
    assert out["errors"] == []
    assert any("policy2" in e and "online" in e for e in out["evidence"])
    # and the checks are not disturbed by it
    facts = {"cpu": dict(out, vendor="AuthenticAMD", model="AMD EPYC")}
    res = {r["id"]: r for r in audit.evaluate(facts, merge_policy(None),
                                                only={"cpu.scaling_driver", "cpu.governor", "cpu.epp"})}
    assert res["cpu.scaling_driver"]["status"] == "pass"
    assert res["cpu.governor"]["status"] == "pass"
    assert res["cpu.epp"]["status"] == "pass"


def test_read_cpufreq_missing_files(tmp_path):
    epyc_policy(tmp_path, 0)
    epyc_policy(tmp_path, 1, scaling_governor=None, energy_performance_preference=None)
    epyc_policy(tmp_path, 2, scaling_driver=None, affected_cpus=None)
    out = cpufreq.read_cpufreq(FsRoot(str(tmp_path)))
    p1, p2 = out["policies"]["policy1"], out["policies"]["policy2"]
    assert p1["governor"] is None and p1["epp"] is None and p1["driver"] == "amd-pstate-epp"
    assert p2["driver"] is None and p2["affected_cpus"] is None
    paths = sorted(e["path"] for e in out["errors"])
    # only driver and governor are required; EPP and affected_cpus are optional
    assert paths == [CPU + "/cpufreq/policy1/scaling_governor", CPU + "/cpufreq/policy2/scaling_driver"]
    assert all(e["error"] == os.strerror(errno.ENOENT) for e in out["errors"])
    # a policy whose driver cannot be read makes the driver check an error, naming the file
    facts = {"cpu": dict(out, vendor="AuthenticAMD", model="AMD EPYC")}
    res = cpufreq.check_scaling_driver(facts, merge_policy(None))
    assert res["status"] == "error"
    assert "(unreadable)" in res["current"]
    assert CPU + "/cpufreq/policy2/scaling_driver" in res["message"]


def test_read_cpufreq_permission_denied(public_tmp):
    epyc_policy(public_tmp, 0)
    epyc_policy(public_tmp, 1)
    open_up(public_tmp)
    os.chmod(str(public_tmp / "sys/devices/system/cpu/cpufreq/policy1/scaling_governor"), 0o000)
    os.chmod(str(public_tmp / "sys/devices/system/cpu/cpufreq/policy1/energy_performance_preference"), 0o000)
    out = as_reader(lambda: cpufreq.read_cpufreq(FsRoot(str(public_tmp))))
    assert out["errors"] == [{"path": CPU + "/cpufreq/policy1/scaling_governor", "error": DENIED}]
    assert out["policies"]["policy1"]["governor"] is None
    assert out["policies"]["policy1"]["epp"] is None
    assert out["policies"]["policy0"]["governor"] == "performance"


def test_read_cpufreq_unlistable_cpufreq_dir_raises(public_tmp):
    """An unreadable policy directory listing is a section error (gather records it), not silence."""
    epyc_policy(public_tmp, 0)
    open_up(public_tmp)
    os.chmod(str(public_tmp / "sys/devices/system/cpu/cpufreq"), 0o000)
    with pytest.raises(FsError) as info:
        as_reader(lambda: cpufreq.read_cpufreq(FsRoot(str(public_tmp))))
    assert info.value.path == CPU + "/cpufreq"


# == cpuidle ========================================================================================
def make_state(root, cpu, idx, name, latency, disable="0"):
    sdir = "%s/cpu%d/cpuidle/state%d" % (CPU, cpu, idx)
    for fname, value in (("name", name), ("latency", latency), ("disable", disable)):
        if value is not None:
            write(root, "%s/%s" % (sdir, fname), "%s\n" % value)
    return sdir


def acpi_idle_cpu(root, cpu, c2_disable="0"):
    make_state(root, cpu, 0, "POLL", 0)
    make_state(root, cpu, 1, "C1", 1)
    make_state(root, cpu, 2, "C2", 400, c2_disable)


def test_read_cpuidle_aggregates_states(tmp_path):
    for cpu in range(4):
        acpi_idle_cpu(tmp_path, cpu, c2_disable="1" if cpu == 2 else "0")
    (tmp_path / "sys/devices/system/cpu/cpu4").mkdir()  # offline CPU: no cpuidle directory
    (tmp_path / "sys/devices/system/cpu/cpuidle").mkdir()
    write(tmp_path, CPU + "/cpuidle/current_driver", "acpi_idle\n")
    write(tmp_path, CPU + "/cpuidle/current_governor_ro", "menu\n")
    write(tmp_path, "/sys/module/processor/parameters/max_cstate", "8\n")
    out = cstates.read_cpuidle(FsRoot(str(tmp_path)))
    assert out["driver"] == "acpi_idle"
    assert out["governor"] == "menu"
    assert out["max_cstate_param"] == "8"
    assert out["intel_max_cstate_param"] is None
    assert out["cpu_count"] == 5
    assert out["cpus_with_states"] == 4
    assert out["errors"] == []
    assert list(out["states"]) == ["state0", "state1", "state2"]
    assert out["states"]["state2"] == {"name": "C2", "latency_us": 400, "enabled_cpus": "0-1,3",
                                       "enabled_count": 3, "disabled_count": 1}
    assert out["states"]["state0"]["enabled_cpus"] == "0-3"


def test_read_cpuidle_many_states_natural_order_and_max_latency(tmp_path):
    for idx in range(12):
        make_state(tmp_path, 0, idx, "C%d" % idx if idx else "POLL", idx * 10)
    make_state(tmp_path, 1, 3, "C3", 55)
    out = cstates.read_cpuidle(FsRoot(str(tmp_path)))
    assert list(out["states"])[:3] == ["state0", "state1", "state2"]
    assert list(out["states"])[-2:] == ["state10", "state11"]
    assert out["states"]["state3"]["latency_us"] == 55  # the worst CPU's latency


def test_read_cpuidle_bad_values_are_recorded_and_skipped(tmp_path):
    acpi_idle_cpu(tmp_path, 0)
    make_state(tmp_path, 1, 0, "POLL", 0)
    make_state(tmp_path, 1, 1, "C1", "fast")        # non-numeric latency
    make_state(tmp_path, 1, 2, "C2", 400, "maybe")  # disable garbage
    make_state(tmp_path, 2, 0, "POLL", 0)
    make_state(tmp_path, 2, 1, None, 1)             # missing name
    make_state(tmp_path, 2, 2, "C2", 400, None)     # missing disable
    out = cstates.read_cpuidle(FsRoot(str(tmp_path)))
    errors = {e["path"]: e["error"] for e in out["errors"]}
    assert errors == {
        CPU + "/cpu1/cpuidle/state1/latency": "not a number",
        CPU + "/cpu1/cpuidle/state2/disable": "unexpected value 'maybe'",
        CPU + "/cpu2/cpuidle/state1/name": os.strerror(errno.ENOENT),
        CPU + "/cpu2/cpuidle/state2/disable": os.strerror(errno.ENOENT),
    }
    # the good readings still count
    assert out["states"]["state0"]["enabled_count"] == 3
    assert out["states"]["state2"]["enabled_count"] == 1
    assert out["states"]["state2"]["enabled_cpus"] == "0"


def test_read_cpuidle_without_cpuidle(tmp_path):
    (tmp_path / "sys/devices/system/cpu/cpu0").mkdir(parents=True)
    out = cstates.read_cpuidle(FsRoot(str(tmp_path)))
    assert out["states"] == {} and out["cpus_with_states"] == 0 and out["cpu_count"] == 1
    assert out["driver"] is None and out["governor"] is None


def test_read_cpuidle_permission_denied(public_tmp):
    acpi_idle_cpu(public_tmp, 0)
    acpi_idle_cpu(public_tmp, 1)
    open_up(public_tmp)
    os.chmod(str(public_tmp / "sys/devices/system/cpu/cpu1/cpuidle/state2/disable"), 0o000)
    out = as_reader(lambda: cstates.read_cpuidle(FsRoot(str(public_tmp))))
    assert out["errors"] == [{"path": CPU + "/cpu1/cpuidle/state2/disable", "error": DENIED}]
    assert out["states"]["state2"]["enabled_cpus"] == "0"


# == sysctl.d precedence ================================================================================
KEY = "kernel.numa_balancing"


def persisted(tmp_path, keys=(KEY,)):
    return sysctl_conf.read_sysctl_persisted(FsRoot(str(tmp_path)), list(keys))


def test_sysctl_same_basename_etc_wins_over_usr_lib(tmp_path):
    write(tmp_path, "/usr/lib/sysctl.d/50-numa.conf", "kernel.numa_balancing = 1\n")
    write(tmp_path, "/etc/sysctl.d/50-numa.conf", "kernel.numa_balancing = 0\n")
    out = persisted(tmp_path)
    assert out["values"][KEY] == {"value": "0", "file": "/etc/sysctl.d/50-numa.conf", "line": 1}
    assert out["files"] == ["/etc/sysctl.d/50-numa.conf"]  # the shadowed vendor file is not read at all


def test_sysctl_same_basename_run_beats_usr_lib_and_etc_beats_run(tmp_path):
    write(tmp_path, "/usr/lib/sysctl.d/60-x.conf", "kernel.numa_balancing = 1\n")
    write(tmp_path, "/run/sysctl.d/60-x.conf", "kernel.numa_balancing = 0\n")
    assert persisted(tmp_path)["values"][KEY]["file"] == "/run/sysctl.d/60-x.conf"
    write(tmp_path, "/etc/sysctl.d/60-x.conf", "# masked\n")
    out = persisted(tmp_path)
    assert out["values"][KEY] is None  # the /etc file shadows both and sets nothing
    assert out["files"] == ["/etc/sysctl.d/60-x.conf"]


def test_sysctl_later_basename_wins_across_directories(tmp_path):
    write(tmp_path, "/etc/sysctl.d/10-early.conf", "kernel.numa_balancing = 0\n")
    write(tmp_path, "/usr/lib/sysctl.d/99-late.conf", "kernel.numa_balancing = 1\n")
    write(tmp_path, "/usr/local/lib/sysctl.d/50-mid.conf", "kernel.numa_balancing = 0\n")
    out = persisted(tmp_path)
    assert out["files"] == ["/etc/sysctl.d/10-early.conf", "/usr/local/lib/sysctl.d/50-mid.conf",
                            "/usr/lib/sysctl.d/99-late.conf"]
    assert out["values"][KEY] == {"value": "1", "file": "/usr/lib/sysctl.d/99-late.conf", "line": 1}


def test_sysctl_later_line_in_the_same_file_wins(tmp_path):
    write(tmp_path, "/etc/sysctl.d/90-x.conf", "kernel.numa_balancing = 1\n\nkernel.numa_balancing=0\n")
    assert persisted(tmp_path)["values"][KEY] == {"value": "0", "file": "/etc/sysctl.d/90-x.conf", "line": 3}


def test_sysctl_conf_is_read_last(tmp_path):
    write(tmp_path, "/etc/sysctl.d/99-zzz.conf", "kernel.numa_balancing = 0\n")
    write(tmp_path, "/etc/sysctl.conf", "kernel.numa_balancing = 1\n")
    out = persisted(tmp_path)
    assert out["files"][-1] == "/etc/sysctl.conf"
    assert out["values"][KEY]["file"] == "/etc/sysctl.conf"


def test_sysctl_conf_linked_as_99_sysctl_is_not_read_twice(tmp_path):
    """Debian: /etc/sysctl.d/99-sysctl.conf -> ../sysctl.conf; it sorts by its sysctl.d name."""
    write(tmp_path, "/etc/sysctl.conf", "kernel.numa_balancing = 1\n")
    (tmp_path / "etc/sysctl.d").mkdir()
    os.symlink("../sysctl.conf", str(tmp_path / "etc/sysctl.d/99-sysctl.conf"))
    write(tmp_path, "/usr/lib/sysctl.d/99-zz-vendor.conf", "kernel.numa_balancing = 0\n")
    out = persisted(tmp_path)
    assert "/etc/sysctl.conf" not in out["files"]
    assert out["files"] == ["/etc/sysctl.d/99-sysctl.conf", "/usr/lib/sysctl.d/99-zz-vendor.conf"]
    assert out["values"][KEY]["value"] == "0"


def test_sysctl_syntax(tmp_path):
    write(tmp_path, "/etc/sysctl.d/10-a.conf", "\n".join([
        "# kernel.numa_balancing = 7",
        "; kernel.numa_balancing = 8",
        "   # indented comment kernel.numa_balancing = 9",
        "kernel.numa_balancing",                  # no '=': ignored
        "-kernel.numa_balancing = 0",             # '-' prefix: ignore errors
        "vm/swappiness=10",                       # '/' separators
        "  net.core.somaxconn   =   4096   ",
        "",
    ]))
    write(tmp_path, "/etc/sysctl.d/README", "kernel.numa_balancing = 5\n")  # not *.conf
    out = persisted(tmp_path, keys=(KEY, "vm.swappiness", "net.core.somaxconn", "kernel.pid_max"))
    assert out["values"][KEY] == {"value": "0", "file": "/etc/sysctl.d/10-a.conf", "line": 5}
    assert out["values"]["vm.swappiness"]["value"] == "10"
    assert out["values"]["net.core.somaxconn"]["value"] == "4096"
    assert out["values"]["kernel.pid_max"] is None
    assert out["files"] == ["/etc/sysctl.d/10-a.conf"]


def test_parse_sysctl_text_line_numbers():
    assert sysctl_conf.parse_sysctl_text("a=1\n# x\n;y\nb = 2\n-c/d = 3\n") == [
        (1, "a", "1"), (4, "b", "2"), (5, "c.d", "3")]


def test_sysctl_unreadable_file_is_an_error_and_others_still_count(tmp_path):
    write(tmp_path, "/etc/sysctl.d/10-a.conf", "kernel.numa_balancing = 0\n")
    (tmp_path / "etc/sysctl.d/50-dir.conf").mkdir()
    out = persisted(tmp_path)
    assert out["errors"] == [{"path": "/etc/sysctl.d/50-dir.conf", "error": os.strerror(errno.EISDIR)}]
    assert out["values"][KEY]["value"] == "0"


def test_sysctl_permission_denied(public_tmp):
    write(public_tmp, "/etc/sysctl.d/10-a.conf", "kernel.numa_balancing = 0\n")
    write(public_tmp, "/etc/sysctl.d/20-b.conf", "kernel.numa_balancing = 1\n")
    open_up(public_tmp)
    os.chmod(str(public_tmp / "etc/sysctl.d/20-b.conf"), 0o000)
    out = as_reader(lambda: persisted(public_tmp))
    assert out["errors"] == [{"path": "/etc/sysctl.d/20-b.conf", "error": DENIED}]
    assert out["values"][KEY]["file"] == "/etc/sysctl.d/10-a.conf"


def test_sysctl_path():
    assert sysctl_conf.sysctl_path("kernel.numa_balancing") == "/proc/sys/kernel/numa_balancing"


# == NVIDIA =============================================================================================
@pytest.mark.parametrize("text,expected", [
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B03-4-3)"
     "  Tue Sep 23 09:52:45 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
     {"version": "580.95.05", "open": True}),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.59  Wed Jul 19 23:53:34 PDT 2017\n",
     {"version": "384.59", "open": False}),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  550.54.14  Release Build\n",
     {"version": "550.54.14", "open": True}),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104\n", {"version": "535.104", "open": False}),
    ("", None),
    (None, None),
    ("GCC version: gcc 12.2.0\n", None),
    ("NVRM version: garbage\n", None),
])
def test_parse_nvidia_version(text, expected):
    assert nvidia.parse_nvidia_version(text) == expected


def _bus(*buses):
    return ["00000000:%s:00.0" % b for b in buses]


SMI_EXPECTED = {
    # file: (format, driver, bus ids, persistence of every GPU)
    "eler_gtx1080ti_driver384_persistence_disabled_smi_q_gpu0.txt": ("query", "384.59", _bus("04"), False),
    "thamada_A100SXMx4_smi_nvidia-smi-q.txt": ("query", "555.42.02", _bus("68", "9e", "c2", "d4"), True),
    "thamada_A100SXMx4_smi_nvidia-smi.txt": ("table", "555.42.02", _bus("68", "9e", "c2", "d4"), True),
    "thamada_A40x10_smi_nvidia-smi-q.txt": (
        "query", "550.127.05", _bus("4f", "52", "53", "56", "57", "ce", "d1", "d2", "d5", "d6"), True),
    "thamada_A40x10_smi_nvidia-smi.txt": (
        "table", "550.127.05", _bus("4f", "52", "53", "56", "57", "ce", "d1", "d2", "d5", "d6"), True),
    "thamada_H100NVLx2_smi_nvidia-smi-q.txt": ("query", "550.54.14", _bus("ad", "ae"), True),
    "thamada_H100NVLx2_smi_nvidia-smi.txt": ("table", "550.54.14", _bus("ad", "ae"), True),
    "thamada_H100SXMx8_smi_nvidia-smi-q.txt": (
        "query", "565.57.01", _bus("18", "2a", "3a", "5d", "9a", "ab", "ba", "db"), True),
    "thamada_H100SXMx8_smi_nvidia-smi.txt": (
        "table", "565.57.01", _bus("18", "2a", "3a", "5d", "9a", "ab", "ba", "db"), True),
    "thamada_L40S_smi_nvidia-smi-q.txt": ("query", "550.127.05", _bus("a1"), True),
    "thamada_L40S_smi_nvidia-smi.txt": ("table", "550.127.05", _bus("a1"), True),
    "thamada_L4_smi_nvidia-smi-q.txt": ("query", "550.90.07", _bus("01"), True),
    "thamada_L4_smi_nvidia-smi.txt": ("table", "550.90.07", _bus("01"), True),
    "thamada_RTX2000Ada_smi_nvidia-smi-q.txt": ("query", "550.54.15", _bus("02"), True),
    "thamada_RTX2000Ada_smi_nvidia-smi.txt": ("table", "550.54.15", _bus("02"), True),
    "thamada_RTX3090_smi_nvidia-smi-q.txt": ("query", "560.35.03", _bus("41", "81"), True),
    "thamada_RTX3090_smi_nvidia-smi.txt": ("table", "560.35.03", _bus("41", "81"), True),
    "thamada_RTX4000Ada_smi_nvidia-smi-q.txt": ("query", "550.90.07", _bus("81"), True),
    "thamada_RTX4000Ada_smi_nvidia-smi.txt": ("table", "550.90.07", _bus("81"), True),
    "thamada_RTX4060Ti_smi_nvidia-smi-q.txt": ("query", "550.54.14", _bus("03", "09"), False),
    "thamada_RTX4060Ti_smi_nvidia-smi.txt": ("table", "550.54.14", _bus("03", "09"), False),
    "thamada_RTX4090_smi_nvidia-smi-q.txt": (
        "query", "550.127.05", _bus("01", "25", "41", "61", "81", "a1", "c1", "e1"), True),
    "thamada_RTX4090_smi_nvidia-smi.txt": (
        "table", "550.127.05", _bus("01", "25", "41", "61", "81", "a1", "c1", "e1"), True),
    "thamada_RTX6000Ada_x8_smi_nvidia-smi-q.txt": (
        "query", "550.127.05", _bus("01", "25", "41", "61", "81", "a1", "c1", "e1"), True),
    "thamada_RTX6000Ada_x8_smi_nvidia-smi.txt": (
        "table", "550.127.05", _bus("01", "25", "41", "61", "81", "a1", "c1", "e1"), True),
    "zmarty_rtxpro6000_ws_580.95.05_nvidia-smi.txt": ("table", "580.95.05", _bus("01"), True),
}


def test_every_nvidia_smi_file_has_an_expectation():
    assert sorted(os.listdir(SMI_DIR)) == sorted(SMI_EXPECTED)


@pytest.mark.parametrize("name", sorted(SMI_EXPECTED))
def test_parse_nvidia_smi_real_files(name):
    fmt, driver, buses, persistence = SMI_EXPECTED[name]
    out = nvidia.parse_nvidia_smi(realdata("nvidia_smi", name))
    assert out["format"] == fmt
    assert out["driver"] == driver
    assert [g["bus_id"] for g in out["gpus"]] == buses
    assert [g["persistence"] for g in out["gpus"]] == [persistence] * len(buses)


@pytest.mark.parametrize("name", sorted(n for n in SMI_EXPECTED if n.endswith("_nvidia-smi-q.txt")))
def test_nvidia_smi_q_gpu_count_matches_attached_gpus(name):
    text = realdata("nvidia_smi", name)
    attached = int(re.search(r"^Attached GPUs\s*:\s*(\d+)", text, re.M).group(1))
    assert len(nvidia.parse_nvidia_smi(text)["gpus"]) == attached


def test_eler_excerpt_has_one_of_four_gpus_with_persistence_disabled():
    """The eler file is an excerpt up to the end of GPU 0 (Attached GPUs: 4): only what it shows is reported."""
    text = realdata("nvidia_smi", "eler_gtx1080ti_driver384_persistence_disabled_smi_q_gpu0.txt")
    assert re.search(r"^Attached GPUs\s*:\s*4", text, re.M)
    out = nvidia.parse_nvidia_smi(text)
    assert out["gpus"] == [{"bus_id": "00000000:04:00.0", "persistence": False, "index": 0,
                            "name": "GeForce GTX 1080 Ti", "fb_total": 11172, "bar1_total": 256}]


def test_smi_q_gives_index_name_and_the_fb_and_bar1_totals_of_each_gpu():
    """RTX 6000 Ada x8 (thamada): 48 GB of framebuffer behind a 256 MiB BAR1 on every GPU, in -q's index order."""
    out = nvidia.parse_nvidia_smi(realdata("nvidia_smi", "thamada_RTX6000Ada_x8_smi_nvidia-smi-q.txt"))
    assert [g["index"] for g in out["gpus"]] == list(range(8))
    assert out["gpus"][0]["bus_id"] == "00000000:01:00.0"
    assert {(g["name"], g["fb_total"], g["bar1_total"]) for g in out["gpus"]} == {
        ("NVIDIA RTX 6000 Ada Generation", 49140, 256)}


THAMADA_PAIRS = sorted({n.rsplit("_nvidia-smi", 1)[0] for n in SMI_EXPECTED if n.startswith("thamada")})


@pytest.mark.parametrize("pair", THAMADA_PAIRS)
def test_nvidia_smi_table_and_query_agree(pair):
    table = nvidia.parse_nvidia_smi(realdata("nvidia_smi", pair + "_nvidia-smi.txt"))
    query = nvidia.parse_nvidia_smi(realdata("nvidia_smi", pair + "_nvidia-smi-q.txt"))
    assert [(g["bus_id"], g["persistence"]) for g in table["gpus"]] == \
        [(g["bus_id"], g["persistence"]) for g in query["gpus"]]
    assert table["driver"] == query["driver"]


def test_nvidia_smi_table_rows_carry_index_and_name():
    out = nvidia.parse_nvidia_smi(realdata("nvidia_smi", "thamada_H100SXMx8_smi_nvidia-smi.txt"))
    assert [g["index"] for g in out["gpus"]] == list(range(8))
    assert {g["name"] for g in out["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    zmarty = nvidia.parse_nvidia_smi(realdata("nvidia_smi", "zmarty_rtxpro6000_ws_580.95.05_nvidia-smi.txt"))
    assert zmarty["gpus"][0]["name"] == "NVIDIA RTX PRO 6000 Blac..."
    # the process table below the GPU table (pid 5635, gnome-shell) is not a GPU row
    assert len(zmarty["gpus"]) == 1


def test_parse_nvidia_smi_csv():
    """--query-gpu=pci.bus_id,persistence_mode,driver_version --format=csv,noheader (what gather runs live)."""
    text = "00000000:01:00.0, Enabled, 580.95.05\n00000000:21:00.0, Disabled, 580.95.05\n"
    out = nvidia.parse_nvidia_smi(text)
    assert out["format"] == "csv"
    assert out["driver"] == "580.95.05"
    assert out["gpus"] == [{"bus_id": "00000000:01:00.0", "persistence": True},
                           {"bus_id": "00000000:21:00.0", "persistence": False}]


def test_parse_nvidia_smi_csv_with_the_index():
    """--query-gpu=pci.bus_id,persistence_mode,driver_version,index (the stand-in and nvidia-smi print the fields in
    the order asked); gather runs -q live, the text a snapshot carries too."""
    out = nvidia.parse_nvidia_smi("00000000:21:00.0, Enabled, 580.95.05, 1\n00000000:01:00.0, Enabled, 580.95.05, 0\n")
    assert [(g["bus_id"], g["index"]) for g in out["gpus"]] == [("00000000:21:00.0", 1), ("00000000:01:00.0", 0)]
    assert nvidia.SMI_ARGS == ["-q"]


def test_parse_nvidia_smi_csv_two_columns_and_upper_case():
    out = nvidia.parse_nvidia_smi("00000000:C1:00.0, On\n")
    assert out["gpus"] == [{"bus_id": "00000000:c1:00.0", "persistence": True}]
    assert out["driver"] is None


@pytest.mark.parametrize("text", ["", None, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                                  "driver. Make sure that the latest NVIDIA driver is installed and running.\n",
                                  "No devices were found\n"])
def test_parse_nvidia_smi_without_gpus(text):
    out = nvidia.parse_nvidia_smi(text)
    assert out["gpus"] == [] and out["format"] == "unknown"


@pytest.mark.parametrize("name,status", [
    ("thamada_H100SXMx8_smi_nvidia-smi-q.txt", "pass"),
    ("thamada_RTX4060Ti_smi_nvidia-smi.txt", "fail"),
    ("eler_gtx1080ti_driver384_persistence_disabled_smi_q_gpu0.txt", "fail"),
    ("zmarty_rtxpro6000_ws_580.95.05_nvidia-smi.txt", "pass"),
])
def test_real_nvidia_smi_through_the_driver_check(name, status):
    smi = nvidia.parse_nvidia_smi(realdata("nvidia_smi", name))
    facts = {"pci": {"functions": [{"bdf": "0000:01:00.0", "is_gpu": True, "driver": "nvidia"}]},
             "nvidia": {"version": {"version": smi["driver"], "open": False}, "smi": smi, "evidence": []}}
    facts["nvidia"]["persistenced"] = {"pid": 2187, "running": True}
    res = nvidia.check_persistence(facts, merge_policy(None))
    assert res["status"] == status
    assert len(res["items"]) == len(smi["gpus"])
    if status == "fail":
        assert res["message"].startswith("persistence mode off on %d GPUs" % len(smi["gpus"]))


# == IOMMU ==================================================================================================
def test_read_iommu_amd(tmp_path):
    for unit in ("ivhd0", "ivhd1"):
        (tmp_path / "sys/class/iommu" / unit).mkdir(parents=True)
    for group, kind in (("10", "identity"), ("2", "DMA-FQ"), ("0", "DMA-FQ")):
        write(tmp_path, "/sys/kernel/iommu_groups/%s/type" % group, kind + "\n")
    out = iommu.read_iommu(FsRoot(str(tmp_path)))
    assert out["units"] == ["ivhd0", "ivhd1"]
    assert out["groups"] == 3
    assert out["default_domain_type"] == "DMA-FQ"  # group 0, the first in natural order
    assert "/sys/class/iommu (2 units)" in out["evidence"]


def test_read_iommu_natural_order_first_group(tmp_path):
    for group, kind in (("10", "DMA"), ("2", "identity")):
        write(tmp_path, "/sys/kernel/iommu_groups/%s/type" % group, kind + "\n")
    assert iommu.read_iommu(FsRoot(str(tmp_path)))["default_domain_type"] == "identity"


def test_read_iommu_off(tmp_path):
    out = iommu.read_iommu(FsRoot(str(tmp_path)))
    assert out == {"units": [], "groups": 0, "default_domain_type": None, "group_types": {},
                   "evidence": ["/sys/class/iommu (0 units)", "/sys/kernel/iommu_groups (0 groups, type None)"]}


# == cpufreq real data -> sysfs trees -> audit ======================================================================
_FREQ = re.compile(r"([\d.]+)\s*(GHz|MHz|kHz)")


def _khz(text):
    value, unit = _FREQ.match(text.strip()).groups()
    return int(round(float(value) * {"GHz": 1000000, "MHz": 1000, "kHz": 1}[unit]))


def parse_cpupower(text):
    """What a `cpupower frequency-info` output states about the analysed CPU's policy."""
    def find(pattern):
        match = re.search(pattern, text, re.M)
        return match.group(1).strip() if match else None

    out = {
        "cpu": int(find(r"^analyzing CPU (\d+):")),
        "driver": find(r"^\s*driver: (\S+)"),
        "related_cpus": find(r"CPUs which run at the same hardware frequency: (.+)$"),
        "affected_cpus": find(r"CPUs which need to have their frequency coordinated by software: (.+)$"),
        "available_governors": find(r"available cpufreq governors: (.+)$"),
        "governor": find(r'The governor "([^"]+)" may decide'),
    }
    limits = re.search(r"hardware limits: ([\d.]+ \w?Hz) - ([\d.]+ \w?Hz)", text)
    out["cpuinfo_min_freq"], out["cpuinfo_max_freq"] = (_khz(limits.group(1)), _khz(limits.group(2)))
    latency = find(r"maximum transition latency:\s+(\d+) us")
    out["cpuinfo_transition_latency"] = int(latency) * 1000 if latency else None  # sysfs says ns
    cur = re.search(r"current CPU frequency: ([\d.]+ \w?Hz) \(asserted", text)
    out["scaling_cur_freq"] = _khz(cur.group(1)) if cur else None
    return out


def parse_ls_columns(text):
    """File names from `ls` output in columns."""
    return sorted(name for line in text.splitlines() for name in line.split())


def parse_epp_listing(text):
    """The Manjaro forum listing: per-CPU EPP choices and available governors (16 CPUs each)."""
    section = None
    out = {"available_epp": [], "available_governors": []}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if line.startswith("cat ") and "energy_performance_available_preferences" in line:
            section = "available_epp"
        elif line.startswith("cat ") and "scaling_available_governors" in line:
            section = "available_governors"
        elif section and line and set(line.split()) <= {"default", "performance", "balance_performance",
                                                        "balance_power", "power", "powersave"}:
            out[section].append(line.strip())
        else:
            section = None
    return out


def cpufreq_tree(root, policies, amd_pstate_status=None, cmdline="BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve ro quiet",
                 grub_default="quiet"):
    """A host tree whose cpufreq sysfs holds ``policies`` ({num: {file: value}}); AMD CPU, GRUB boot.

    Values of None are written as empty files (the file exists, the source does not state its value).
    Each cpuN/cpufreq is a relative symlink to ../cpufreq/policyN, as in sysfs.
    """
    write(root, "/proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD Ryzen (model not "
                                 "stated by the source)\n\n")
    write(root, "/proc/cmdline", cmdline + "\n")
    write(root, "/etc/default/grub", 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="%s"\nGRUB_CMDLINE_LINUX=""\n'
          % grub_default)
    if amd_pstate_status is not None:
        write(root, CPU + "/amd_pstate/status", amd_pstate_status + "\n")
    nums = sorted(policies)
    write(root, CPU + "/online", cpu_list.format_cpu_list(nums) + "\n")
    for num in nums:
        for name, value in policies[num].items():
            write(root, "%s/cpufreq/policy%d/%s" % (CPU, num, name), "" if value is None else "%s\n" % value)
        os.makedirs(os.path.join(str(root), CPU.lstrip("/"), "cpu%d" % num), exist_ok=True)
        os.symlink("../cpufreq/policy%d" % num, os.path.join(str(root), CPU.lstrip("/"), "cpu%d" % num, "cpufreq"))
    return FsRoot(str(root))


def cpupower_policy(info, file_set=None):
    """{file: value} for the analysed CPU's policy; with ``file_set`` exactly those files."""
    files = {
        "scaling_driver": info["driver"],
        "scaling_governor": info["governor"],
        "scaling_available_governors": info["available_governors"],
        "affected_cpus": info["affected_cpus"],
        "related_cpus": info["related_cpus"],
        "cpuinfo_min_freq": info["cpuinfo_min_freq"],
        "cpuinfo_max_freq": info["cpuinfo_max_freq"],
        "cpuinfo_transition_latency": info["cpuinfo_transition_latency"],
        "scaling_cur_freq": info["scaling_cur_freq"],
    }
    files = {k: v for k, v in files.items() if v is not None}
    if file_set is not None:
        files = {name: files.get(name) for name in file_set}
    return files


def audit_cpu(fsroot, policy=None, ids=("cpu.scaling_driver", "cpu.governor", "cpu.epp")):
    policy = policy or merge_policy(None)
    facts = gather(fsroot, None, policy)
    assert facts["cpu"].get("error") is None, facts["cpu"]
    return facts, {r["id"]: r for r in audit.evaluate(facts, policy, only=set(ids))}


def test_realdata_cpufreq_files_are_all_used():
    assert sorted(os.listdir(CPUFREQ_DIR)) == sorted([
        "cpupower_acpi-cpufreq_zenstates1.txt", "cpupower_amd-pstate-epp_tlp764.txt",
        "cpupower_amd-pstate_passive_frogging78.txt", "manjaro_forum_amd-pstate-epp_sysfs_prefs_governors.txt",
        "sysfs_policy_ls_amd-pstate_frogging78.txt"])


def test_parse_cpupower_states_what_the_files_say():
    acpi = parse_cpupower(realdata("cpufreq", "cpupower_acpi-cpufreq_zenstates1.txt"))
    assert (acpi["cpu"], acpi["driver"], acpi["governor"]) == (0, "acpi-cpufreq", "ondemand")
    assert acpi["available_governors"].split() == ["conservative", "userspace", "powersave", "ondemand",
                                                   "performance", "schedutil"]
    assert (acpi["cpuinfo_min_freq"], acpi["cpuinfo_max_freq"]) == (2200000, 3400000)
    assert acpi["cpuinfo_transition_latency"] is None
    epp = parse_cpupower(realdata("cpufreq", "cpupower_amd-pstate-epp_tlp764.txt"))
    assert (epp["cpu"], epp["driver"], epp["governor"]) == (12, "amd-pstate-epp", "powersave")
    assert epp["available_governors"] == "performance powersave"
    assert epp["scaling_cur_freq"] == 399000
    passive = parse_cpupower(realdata("cpufreq", "cpupower_amd-pstate_passive_frogging78.txt"))
    assert (passive["cpu"], passive["driver"], passive["governor"]) == (0, "amd-pstate", "schedutil")
    assert passive["cpuinfo_transition_latency"] == 131000
    assert (passive["cpuinfo_min_freq"], passive["cpuinfo_max_freq"]) == (550000, 5080000)


def test_acpi_cpufreq_host_fails_the_driver_check(tmp_path):
    info = parse_cpupower(realdata("cpufreq", "cpupower_acpi-cpufreq_zenstates1.txt"))
    fs = cpufreq_tree(tmp_path, {info["cpu"]: cpupower_policy(info)})  # no amd_pstate directory at all
    facts, res = audit_cpu(fs)
    pol = facts["cpu"]["policies"]["policy0"]
    assert (pol["driver"], pol["governor"]) == ("acpi-cpufreq", "ondemand")
    drv = res["cpu.scaling_driver"]
    assert drv["status"] == "fail"
    assert drv["reboot_required"] is True
    assert drv["message"] == "driver is acpi-cpufreq; add amd_pstate=active to the kernel command line and reboot"
    assert drv["items"] == [{"name": "acpi-cpufreq", "status": "fail", "current": "acpi-cpufreq",
                             "expected": "amd-pstate-epp", "message": "policies: policy0"}]
    gov = res["cpu.governor"]
    assert gov["status"] == "fail" and gov["current"] == "ondemand (1)"
    assert "not offered" not in gov["message"]  # performance is in the file's governor list
    assert res["cpu.epp"]["status"] == "skip"
    # a site that accepts acpi-cpufreq (no CPPC in firmware) gets a warning instead
    _, res = audit_cpu(fs, merge_policy({"scaling_driver_fallback": ["acpi-cpufreq"]}))
    assert res["cpu.scaling_driver"]["status"] == "warn"


def test_amd_pstate_epp_powersave_fails_the_governor_check(tmp_path):
    info = parse_cpupower(realdata("cpufreq", "cpupower_amd-pstate-epp_tlp764.txt"))
    fs = cpufreq_tree(tmp_path, {info["cpu"]: cpupower_policy(info)}, amd_pstate_status="active")
    facts, res = audit_cpu(fs)
    assert list(facts["cpu"]["policies"]) == ["policy12"]
    assert res["cpu.scaling_driver"]["status"] == "pass"
    gov = res["cpu.governor"]
    assert gov["status"] == "fail"
    assert gov["message"] == "1 of 1 policies are not on performance"
    assert gov["items"][0]["name"] == "governor=powersave"
    assert gov["items"][0]["message"] == "1 policies: policy12"


def _passive_policy():
    info = parse_cpupower(realdata("cpufreq", "cpupower_amd-pstate_passive_frogging78.txt"))
    file_set = parse_ls_columns(realdata("cpufreq", "sysfs_policy_ls_amd-pstate_frogging78.txt"))
    return info, file_set, cpupower_policy(info, file_set)


def test_amd_pstate_policy_file_set_from_ls(tmp_path):
    info, file_set, files = _passive_policy()
    assert len(file_set) == 15 and "energy_performance_preference" not in file_set
    fs = cpufreq_tree(tmp_path, {0: files}, amd_pstate_status="passive")
    assert fs.listdir(CPU + "/cpufreq/policy0") == file_set
    assert fs.read_value(CPU + "/cpu0/cpufreq/scaling_driver") == "amd-pstate"  # through the cpu0 link
    out = cpufreq.read_cpufreq(fs)
    assert out["errors"] == []
    assert out["policies"]["policy0"] == {
        "driver": "amd-pstate", "governor": "schedutil",
        "available_governors": ["conservative", "ondemand", "userspace", "powersave", "performance", "schedutil"],
        "epp": None, "available_epp": None, "affected_cpus": "0"}


def test_amd_pstate_passive_fails_with_the_runtime_switch_hint(tmp_path):
    _, _, files = _passive_policy()
    fs = cpufreq_tree(tmp_path, {0: files}, amd_pstate_status="passive")
    _, res = audit_cpu(fs)
    drv = res["cpu.scaling_driver"]
    assert drv["status"] == "fail"
    assert "amd_pstate is loaded in passive mode" in drv["message"]
    assert "echo active > /sys/devices/system/cpu/amd_pstate/status" in drv["message"]
    assert "configure amd_pstate=active for the next boot" in drv["message"]
    assert drv["reboot_required"] is True
    assert drv["current"] == "amd-pstate (1 policies); amd_pstate/status=passive"
    assert res["cpu.governor"]["status"] == "fail"
    epp = res["cpu.epp"]
    assert epp["status"] == "skip" and "(amd-pstate)" in epp["message"]


def test_amd_pstate_passive_is_pending_when_grub_has_active(tmp_path):
    _, _, files = _passive_policy()
    fs = cpufreq_tree(tmp_path, {0: files}, amd_pstate_status="passive",
                      cmdline="BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve ro quiet amd_pstate=passive",
                      grub_default="quiet amd_pstate=active")
    facts, res = audit_cpu(fs)
    assert facts["boot"]["configured_args"] == ["quiet", "amd_pstate=active"]
    drv = res["cpu.scaling_driver"]
    assert drv["status"] == "pending"
    assert drv["reboot_required"] is True
    assert drv["message"].startswith("amd_pstate=active is configured in the boot loader but not on /proc/cmdline")
    assert "(or switch now: echo active > /sys/devices/system/cpu/amd_pstate/status)" in drv["message"]


def test_amd_pstate_passive_with_active_effective_but_not_configured(tmp_path):
    """amd_pstate=active typed at the boot prompt: transient, so still a fail (with the switch hint)."""
    _, _, files = _passive_policy()
    fs = cpufreq_tree(tmp_path, {0: files}, amd_pstate_status="passive",
                      cmdline="BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve ro quiet amd_pstate=active")
    _, res = audit_cpu(fs)
    assert res["cpu.scaling_driver"]["status"] == "fail"
    assert res["cpu.scaling_driver"]["reboot_required"] is True


def _manjaro_policies(governor, epp):
    listing = parse_epp_listing(realdata("cpufreq", "manjaro_forum_amd-pstate-epp_sysfs_prefs_governors.txt"))
    assert len(listing["available_epp"]) == len(listing["available_governors"]) == 16
    return {num: {"scaling_driver": "amd-pstate-epp", "scaling_governor": governor,
                  "scaling_available_governors": listing["available_governors"][num],
                  "energy_performance_preference": epp,
                  "energy_performance_available_preferences": listing["available_epp"][num],
                  "affected_cpus": str(num)} for num in range(16)}


def test_amd_pstate_epp_listing_values(tmp_path):
    fs = cpufreq_tree(tmp_path, _manjaro_policies("performance", "performance"), amd_pstate_status="active")
    out = cpufreq.read_cpufreq(fs)
    assert len(out["policies"]) == 16
    for pol in out["policies"].values():
        assert pol["available_epp"] == ["default", "performance", "balance_performance", "balance_power", "power"]
        assert pol["available_governors"] == ["performance", "powersave"]
    _, res = audit_cpu(fs)
    assert [res[c]["status"] for c in ("cpu.scaling_driver", "cpu.governor", "cpu.epp")] == ["pass"] * 3


@pytest.mark.parametrize("epp", ["balance_power", "power", "balance_performance", "default"])
def test_amd_pstate_epp_listing_non_performance_epp_fails(tmp_path, epp):
    fs = cpufreq_tree(tmp_path, _manjaro_policies("powersave", epp), amd_pstate_status="active")
    _, res = audit_cpu(fs)
    assert res["cpu.epp"]["status"] == "fail"
    assert res["cpu.epp"]["message"] == "16 of 16 policies do not prefer performance"
    assert res["cpu.epp"]["items"][0]["name"] == "epp=%s" % epp
    assert res["cpu.governor"]["status"] == "fail"


def test_amd_pstate_epp_listing_governor_not_offered(tmp_path):
    """The listing offers only performance/powersave: a policy asking for schedutil says so."""
    fs = cpufreq_tree(tmp_path, _manjaro_policies("powersave", "performance"), amd_pstate_status="active")
    _, res = audit_cpu(fs, merge_policy({"governor": "schedutil"}))
    gov = res["cpu.governor"]
    assert gov["status"] == "fail"
    assert "schedutil is not offered by the driver on policy0, policy1" in gov["message"]
    assert gov["message"].endswith("and 8 more")
