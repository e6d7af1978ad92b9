"""CPU frequency scaling, C-states and NUMA balancing, read from the running kernel."""
import re

import pytest
from fleetlib import cpu_vendor, expected_driver, skipped

CPUFREQ = "/sys/devices/system/cpu/cpufreq/policy*/"
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")


def by_policy(values):
    return {path.split("/")[-2]: value for path, value in values.items()}


def test_scaling_driver(fleet, policy):
    skipped(policy, "cpu.scaling_driver")
    expected = expected_driver(fleet, policy)
    if expected is None:
        pytest.skip("not an AMD or Intel CPU: no P-state driver to expect")
    drivers = by_policy(fleet.grep_files(CPUFREQ + "scaling_driver"))
    if not drivers and cpu_vendor(fleet)[1]:
        pytest.skip("a virtual machine without a cpufreq driver: the hypervisor sets the frequency")
    assert drivers, "no cpufreq policy (no cpufreq driver loaded)"
    allowed = [expected] + list(policy["scaling_driver_fallback"])
    bad = sorted({d for d in drivers.values() if d not in allowed})
    assert not bad, "cpufreq driver %s on %d policies, expected %s" % (
        bad, sum(1 for d in drivers.values() if d not in allowed), allowed)
    for driver in ("amd_pstate", "intel_pstate"):
        status_file = "/sys/devices/system/cpu/%s/status" % driver
        if fleet.exists(status_file):
            status = fleet.read(status_file).strip()
            assert status == policy[driver + "_mode"], "%s status %s" % (driver, status)


def test_governor(fleet, policy):
    skipped(policy, "cpu.governor")
    governors = by_policy(fleet.grep_files(CPUFREQ + "scaling_governor"))
    if not governors:
        pytest.skip("no cpufreq policies")
    bad = {p: g for p, g in governors.items() if g != policy["governor"]}
    assert not bad, "%d of %d policies not %s: %s" % (len(bad), len(governors), policy["governor"],
                                                      sorted(set(bad.values())))


def test_epp(fleet, policy):
    skipped(policy, "cpu.epp")
    epp = by_policy(fleet.grep_files(CPUFREQ + "energy_performance_preference"))
    if not epp:
        pytest.skip("the cpufreq driver offers no EPP")
    bad = {p: e for p, e in epp.items() if e != policy["epp"]}
    assert not bad, "%d of %d policies have EPP %s, expected %s" % (len(bad), len(epp), sorted(set(bad.values())),
                                                                    policy["epp"])


def test_no_enabled_cstate_deeper_than_policy(fleet, policy):
    skipped(policy, "cpu.cstates")
    names = fleet.grep_files("/sys/devices/system/cpu/cpu*/cpuidle/state*/name")
    disabled = fleet.grep_files("/sys/devices/system/cpu/cpu*/cpuidle/state*/disable")
    if not names:
        pytest.skip("no cpuidle states (no cpuidle driver)")
    deep = set()
    for path, name in names.items():
        m = re.match(r"^C(\d+)", name)
        state_dir = path.rsplit("/", 1)[0]
        if m and int(m.group(1)) > policy["max_cstate"] and disabled.get(state_dir + "/disable", "0") == "0":
            deep.add(name)
    assert not deep, "enabled C-states deeper than C%d: %s" % (policy["max_cstate"], sorted(deep))


def test_numa_balancing_runtime(fleet, policy):
    skipped(policy, "kernel.numa_balancing")
    value = fleet.read("/proc/sys/kernel/numa_balancing").strip()
    assert value == str(policy["numa_balancing"]), "kernel.numa_balancing is %s" % value


def test_numa_balancing_persisted(fleet, policy):
    """The value systemd-sysctl sets at boot: the last assignment in *.conf by file name (/etc wins)."""
    skipped(policy, "kernel.numa_balancing")
    files = fleet.cat_files(*[d + "/*.conf" for d in SYSCTL_DIRS])
    chosen = {}
    for d in SYSCTL_DIRS:
        for path in sorted(p for p in files if p.rsplit("/", 1)[0] == d):
            chosen.setdefault(path.rsplit("/", 1)[1], path)
    value, source = None, None
    for name in sorted(chosen):
        for line in files[chosen[name]].splitlines():
            m = re.match(r"^\s*-?\s*kernel[./]numa_balancing\s*=\s*(\S+)", line)
            if m:
                value, source = m.group(1), chosen[name]
    assert value == str(policy["numa_balancing"]), (
        "kernel.numa_balancing at boot: %s (%s)" % (value, source or "no sysctl.d file sets it: kernel default"))


@pytest.mark.parametrize("key,policy_key", [("vm.swappiness", "vm_swappiness"),
                                            ("vm.zone_reclaim_mode", "vm_zone_reclaim_mode")])
def test_memory_sysctls_runtime(fleet, policy, key, policy_key):
    skipped(policy, "mem.sysctl")
    path = "/proc/sys/" + key.replace(".", "/")
    if not fleet.exists(path):
        pytest.skip("the kernel has no %s" % key)
    value = fleet.read(path).strip()
    assert value == str(policy[policy_key]), "%s is %s" % (key, value)


def test_boost_on(fleet, policy):
    """intel_pstate's no_turbo, else every policy's boost (6.6+; amd-pstate 6.11+), else the global boost file."""
    skipped(policy, "cpu.boost")
    if not policy["cpu_boost"]:
        pytest.skip("cpu_boost is off in the policy")
    no_turbo = "/sys/devices/system/cpu/intel_pstate/no_turbo"
    if fleet.exists(no_turbo):
        assert fleet.read(no_turbo).strip() == "0", "intel_pstate/no_turbo is set: turbo off"
        return
    values = by_policy(fleet.grep_files(CPUFREQ + "boost"))
    if not values and fleet.exists("/sys/devices/system/cpu/cpufreq/boost"):
        values = {"global": fleet.read("/sys/devices/system/cpu/cpufreq/boost").strip()}
    if not values:
        pytest.skip("no boost control (the cpufreq driver has none, or a virtual machine)")
    off = sorted(p for p, v in values.items() if v != "1")
    assert not off, "boost off on %d of %d: %s" % (len(off), len(values), ", ".join(off[:8]))
