"""Tests for module_utils/pvetune/core/policy.py: defaults, merging, and rejection of every bad value.

Policy values end up on kernel command lines, in GRUB files (shell), sysctl files and setpci
arguments, so anything that is not plainly a valid value must be refused before use.
"""
import copy
import os

import pytest
import yaml
from ansible.module_utils.pvetune.core.catalogue import BY_ID
from ansible.module_utils.pvetune.core.policy import (
    DEFAULT_POLICY,
    MRRS_SIZES,
    PolicyError,
    merge_policy,
    validate_policy,
)

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

INJECTIONS = [
    "quiet; reboot", "a b", '"x"', "$(id)", "`id`", "quiet\n", "quiet\nreboot", "x=1\n", "x=$(id)", "x='y'",
    "x=a b", "x=a;b", "x=a|b", "x=a&b", "x=a>b", "x=\\", "x=\x00", "", " quiet", "quiet ", "-quiet", ".x", "x=\t1",
    "x=" + "a" * 191, "k" * 65,
]


def test_defaults_validate_and_are_not_mutated():
    before = copy.deepcopy(DEFAULT_POLICY)
    assert validate_policy(copy.deepcopy(DEFAULT_POLICY)) == before
    policy = merge_policy(None)
    assert policy == before
    policy["cmdline_required"].append("iommu=pt")
    policy["skip_checks"]["pcie.mrrs"] = "x"
    assert DEFAULT_POLICY == before  # merge_policy returns a deep copy


def test_merge_overrides_key_by_key():
    policy = merge_policy({"pcie_mrrs": 2048, "cmdline_required": ["iommu=pt"]})
    assert policy["pcie_mrrs"] == 2048
    assert policy["cmdline_required"] == ["iommu=pt"]  # lists are replaced, not merged
    assert policy["governor"] == "performance"
    assert merge_policy({}) == DEFAULT_POLICY


def test_an_explicit_cmdline_required_is_the_whole_list():
    """cmdline_required given without cmdline_cpu_args: the CPU's own boot args are not added (issue 17)."""
    assert merge_policy(None)["cmdline_cpu_args"] is True
    assert merge_policy({"cmdline_required": ["iommu=pt"]})["cmdline_cpu_args"] is False
    both = merge_policy({"cmdline_required": ["iommu=pt"], "cmdline_cpu_args": True})
    assert both["cmdline_cpu_args"] is True and both["cmdline_required"] == ["iommu=pt"]
    assert merge_policy({"pcie_mrrs": 2048})["cmdline_cpu_args"] is True


def test_overrides_are_copied():
    overrides = {"cmdline_required": ["iommu=pt"]}
    policy = merge_policy(overrides)
    policy["cmdline_required"].append("quiet")
    assert overrides == {"cmdline_required": ["iommu=pt"]}


def test_demo_inventory_policy_validates():
    with open(os.path.join(TOP, "inventory", "demo", "group_vars", "gpu_hosts.yml")) as handle:
        overrides = yaml.safe_load(handle)["pvetune_policy"]
    assert merge_policy(overrides)["kernel_series"] == "6.14"


@pytest.mark.parametrize("overrides", [["a"], "kernel_series=6.14", 5, True])
def test_overrides_must_be_a_mapping(overrides):
    with pytest.raises(PolicyError, match="must be a mapping"):
        merge_policy(overrides)


@pytest.mark.parametrize("overrides,named", [
    ({"governer": "performance"}, "governer"),
    ({"pcie_mrrs": 4096, "mrrs": 4096}, "mrrs"),
    ({"Governor": "performance"}, "Governor"),
    ({1: "x"}, "1"),                            # YAML int key: a PolicyError, not a TypeError
    ({1: "x", "zz": 2}, "1, zz"),
])
def test_unknown_keys_rejected(overrides, named):
    with pytest.raises(PolicyError) as info:
        merge_policy(overrides)
    assert "unknown key(s)" in str(info.value)
    assert named in str(info.value)
    assert "known keys: amd_pstate_mode" in str(info.value)


BAD_VALUES = {
    "amd_pstate_mode": ["ACTIVE", "disable", "", None, 1, "active\n", "act ive", ["active"]],
    "intel_pstate_mode": ["guided", "off", "ACTIVE", "", None, 1, "active\n", ["active"]],
    "scaling_driver": ["amd pstate", "Amd-pstate", None, "x" * 40, "amd-pstate\n", "$(id)", 1],
    "scaling_driver_fallback": ["acpi-cpufreq", ["acpi cpufreq"], [1], ["ACPI"], ["acpi-cpufreq\n"], None, {}],
    "governor": ["Performance", "perf ormance", "", "performance\n", "performance;reboot", 0, None, "-performance"],
    "epp": ["balance power", "", "performance\n", None, 3, "POWER"],
    "max_cstate": [0, -1, 10, "1", 1.0, True, False, None, [1]],
    "numa_balancing": [2, -1, "0", 0.0, 1.0, True, False, None],
    "pcie_mrrs": [4095, 8192, 0, "4096", 4096.0, 512.0, True, None, 64],
    "pcie_vendor": ["10de", "0x10DE", "0x10de0", "0x10d", "0x10de\n", "0xzzzz", 0x10de, None],
    "pcie_class_prefix": ["03", "0x", "0x0", "0x03\n", "0X03", "0x0300000", 3, None, "0x03;"],
    "kernel_series": ["6", "6.14.1", "v6.14", "6.14\n", "6.1234", 6.14, None, "6.14 ", "\uff16.14", "6.\u0661\u0664"],
    "kernel_package": ["", "p", "Proxmox-kernel", "proxmox kernel", "proxmox-kernel-6.14\n", "-x", "pkg;reboot",
                       "$(id)", None, "a" * 90],
    "cmdline_required": ["amd_pstate=active", [1], None, {"a": 1},
                         # forty valid 194-character arguments: 7,800 bytes, cut at boot past 2047
                         ["k%02d=%s" % (i, "v" * 190) for i in range(40)]] + [[bad] for bad in INJECTIONS],
    "cmdline_forbidden": ["quiet", [None], ["quiet; reboot"], [["quiet"]], ["nomodeset\n"], ["$(id)"]],
    "lxc_check": [1, 0, "yes", "true", None],
    "cmdline_cpu_args": [1, 0, "yes", None],
    "nvidia_persistence": [1, "false", None],
    "gpu_p2p": ["AUTO", "off", "", None, True, "auto\n", ["auto"]],
    "pcie_acs_fix": [1, "true", "yes", None],
    "iommu_passthrough": [0, "false", None],
    "lxc_min_cpus_per_gpu": [-1, 257, 4.0, "4", True, None],
    "lxc_min_memory_per_gpu": [-1, 4194305, 16384.0, "16G", False],
    "lxc_numa_pin": [1, "true", None],
    "skip_checks": [["pcie.mrrs"], "pcie.mrrs", {"pcie.mrrs": 1}, {"pcie.mrrs": None}, {1: "x"},
                    {"pcie.mrr": "typo"}, {"no.such.check": "x"}, None],
}


def test_every_key_has_bad_value_cases():
    assert set(BAD_VALUES) == set(DEFAULT_POLICY)


@pytest.mark.parametrize("key,value", [(k, v) for k, values in sorted(BAD_VALUES.items()) for v in values],
                         ids=lambda x: repr(x)[:40])
def test_bad_values_rejected(key, value):
    with pytest.raises(PolicyError) as info:
        merge_policy({key: value})
    assert str(info.value).startswith("pvetune_policy.%s:" % key)


@pytest.mark.parametrize("arg", INJECTIONS, ids=lambda x: repr(x)[:30])
def test_cmdline_injection_strings_rejected_with_the_arg_named(arg):
    for key in ("cmdline_required", "cmdline_forbidden"):
        with pytest.raises(PolicyError) as info:
            merge_policy({key: ["quiet", arg]})
        assert "is not a plain kernel argument" in str(info.value)
        assert repr(arg) in str(info.value)


GOOD_VALUES = {
    "amd_pstate_mode": ["active", "passive", "guided"],
    "intel_pstate_mode": ["active", "passive"],
    "scaling_driver": ["", "amd-pstate-epp", "amd-pstate", "acpi-cpufreq", "intel_pstate", "intel_cpufreq"],
    "scaling_driver_fallback": [[], ["acpi-cpufreq"], ["acpi-cpufreq", "amd-pstate"]],
    "governor": ["performance", "schedutil", "powersave"],
    "epp": ["performance", "balance_performance", "power"],
    "max_cstate": [1, 2, 9],
    "numa_balancing": [0, 1],
    "pcie_mrrs": list(MRRS_SIZES),
    "pcie_vendor": ["0x10de", "0x1002"],
    "pcie_class_prefix": ["0x03", "0x0302", "0x030200"],
    "kernel_series": ["", "6.14", "6.8", "10.123"],
    "kernel_package": ["proxmox-kernel-6.14", "proxmox-default-kernel", "pve-kernel-6.2", "linux-image-6.1+x"],
    "cmdline_required": [[], ["amd_pstate=active", "processor.max_cstate=1", "iommu=pt"], ["quiet"],
                         ["pcie_aspm=off"], ["video=efifb:off"],
                         ["nvidia-drm.modeset=1"], ["isolcpus=2-15,18-31"], ["console=ttyS0,115200n8"],
                         ["x=@a+b/c:d"]],
    "cmdline_forbidden": [[], ["nomodeset"], ["processor.max_cstate=5"]],
    "lxc_check": [True, False],
    "cmdline_cpu_args": [True, False],
    "nvidia_persistence": [True, False],
    "gpu_p2p": ["auto", "ignore"],
    "pcie_acs_fix": [True, False],
    "iommu_passthrough": [True, False],
    "lxc_min_cpus_per_gpu": [0, 4, 256],
    "lxc_min_memory_per_gpu": [0, 16384, 4194304],
    "lxc_numa_pin": [True, False],
    "skip_checks": [{}, {"pcie.mrrs": "VFIO host"}, dict.fromkeys(BY_ID, "")],
}


def test_every_key_has_good_value_cases():
    assert set(GOOD_VALUES) == set(DEFAULT_POLICY)


@pytest.mark.parametrize("key,value", [(k, v) for k, values in sorted(GOOD_VALUES.items()) for v in values],
                         ids=lambda x: repr(x)[:40])
def test_good_values_accepted(key, value):
    assert merge_policy({key: value})[key] == value


def test_skip_checks_unknown_id_names_it():
    with pytest.raises(PolicyError) as info:
        merge_policy({"skip_checks": {"pcie.mrr": "typo", "pcie.mrrs": "ok"}})
    assert "pcie.mrr" in str(info.value) and "known: boot.cmdline" in str(info.value)


def test_validate_policy_needs_every_key():
    partial = copy.deepcopy(DEFAULT_POLICY)
    del partial["governor"]
    with pytest.raises(KeyError):
        validate_policy(partial)


def test_policy_error_is_a_value_error():
    assert issubclass(PolicyError, ValueError)


def test_a_command_line_too_long_to_boot_is_refused_with_its_length():
    with pytest.raises(PolicyError) as info:
        merge_policy({"cmdline_required": ["k%02d=%s" % (i, "v" * 190) for i in range(40)]})
    assert "the arguments take 7799 bytes, more than the 1919" in str(info.value)
    # Exactly at the limit: accepted; one byte more: refused.
    nine = ["k%02d=%s" % (i, "v" * 190) for i in range(9)]
    merge_policy({"cmdline_required": nine + ["x=" + "v" * 162]})
    with pytest.raises(PolicyError) as info:
        merge_policy({"cmdline_required": nine + ["x=" + "v" * 163]})
    assert "the arguments take 1920 bytes" in str(info.value)
