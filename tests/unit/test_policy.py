"""Tests for module_utils/pvetune/core/policy.py: defaults, merging, and rejection of every bad value.

Policy values end up on kernel command lines, in GRUB files (shell), sysctl files and setpci
arguments, so anything that is not plainly a valid value must be refused before use.
"""
import copy
import os

import pytest
import yaml
from ansible.module_utils.pvetune.core.policy import (
    DEFAULT_POLICY,
    POLICY_KEYS,
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


# Each key's refused values are in its POLICY_KEYS entry; the shell and boot loader injections and a command line
# too long to boot are tried on top.
BAD_VALUES = {key.name: list(key.bad) for key in POLICY_KEYS}
BAD_VALUES["cmdline_required"] += [["k%02d=%s" % (i, "v" * 190) for i in range(40)]] + [[bad] for bad in INJECTIONS]


def test_every_key_has_values_it_refuses_and_accepts():
    assert [key.name for key in POLICY_KEYS if not key.bad or not key.good] == []
    assert list(DEFAULT_POLICY) == [key.name for key in POLICY_KEYS]


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


GOOD_VALUES = {key.name: list(key.good) for key in POLICY_KEYS}


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
