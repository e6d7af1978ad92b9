"""The catalogue is the one list of checks: every concern, evaluator and fix tag is held to it here."""
import os

import pytest
from ansible.module_utils.pvetune import audit
from ansible.module_utils.pvetune.core import catalogue
from ansible.module_utils.pvetune.core.catalogue import CATALOGUE, SEVERITIES, SEVERITY_RANK, STATUSES
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.policy import merge_policy
from ansible.module_utils.pvetune.formats.kernel_version import in_series

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONCERN_DIR = os.path.join(TOP, "module_utils", "pvetune", "concerns")


def test_every_check_names_a_concern_that_evaluates_it():
    for entry in CATALOGUE:
        assert entry["concern"] in audit.BY_NAME, entry["id"]
        assert entry["id"] in audit.BY_NAME[entry["concern"]].CHECKS, entry["id"]


def test_no_concern_evaluates_a_check_the_catalogue_does_not_list():
    listed = {(e["concern"], e["id"]) for e in CATALOGUE}
    registered = {(name, cid) for name, mod in audit.BY_NAME.items() for cid in mod.CHECKS}
    assert registered == listed


def test_every_concern_package_is_gathered():
    """A concern package gather() does not loop over would be dead: each is concerns/<name>/ with checks.py."""
    names = {d for d in os.listdir(CONCERN_DIR) if os.path.isdir(os.path.join(CONCERN_DIR, d)) and d != "__pycache__"}
    assert names == set(audit.BY_NAME)
    assert all(os.path.isfile(os.path.join(CONCERN_DIR, n, "checks.py")) for n in names)


def test_section_names_are_unique():
    sections = [name for mod in audit.CONCERNS for name, _ in mod.SECTIONS]
    assert len(sections) == len(set(sections))


def test_vocabularies():
    assert SEVERITIES == ("critical", "high", "medium", "low", "info")
    assert [SEVERITY_RANK[s] for s in SEVERITIES] == [4, 3, 2, 1, 0]
    assert STATUSES == ("pass", "fail", "warn", "pending", "skip", "error")
    for entry in CATALOGUE:
        assert entry["severity"] in SEVERITIES
        assert entry["reboot"] in ("yes", "no") or entry["reboot"].startswith("when "), entry["id"]


def _demo_results():
    base = os.path.join(TOP, "demo", "snapshots")
    policy = merge_policy(None)
    for host in sorted(os.listdir(base)):
        facts = audit.gather(FsRoot(os.path.join(base, host)), None, policy)
        for res in audit.evaluate(facts, policy):
            yield host, res


def test_the_catalogue_reboot_field_agrees_with_what_the_evaluators_return():
    """'no' checks never ask for a reboot; 'yes' checks ask for one whenever they fail or are pending."""
    seen = set()
    for host, res in _demo_results():
        reboot = next(e["reboot"] for e in CATALOGUE if e["id"] == res["id"])
        if reboot == "no":
            assert not res["reboot_required"], (host, res["id"], res["message"])
        if reboot == "yes" and res["status"] in ("fail", "pending"):
            assert res["reboot_required"], (host, res["id"], res["message"])
            seen.add(res["id"])
    assert {"boot.cmdline", "kernel.version", "cpu.cstates"} <= seen  # the demo exercises the 'yes' rows


SERIES_CASES = [
    ("6.14.8-2-pve", "6.14", True),
    ("6.14", "6.14", True),
    ("6.14-1-pve", "6.14", True),
    # the three spellings the audit and the fix used to disagree on (one definition now)
    ("6.14~rc1", "6.14", True),
    ("6.14+x", "6.14", True),
    ("06.14.1", "6.14", False),
    ("6.140.1", "6.14", False),
    ("6.1.0-18-amd64", "6.14", False),
    ("", "6.14", False),
    (None, "6.14", False),
    ("6.8.12-4-pve", "6.8", True),
]


@pytest.mark.parametrize("version, series, expected", SERIES_CASES)
def test_kernel_series_membership(version, series, expected):
    assert in_series(version, series) is expected


@pytest.mark.parametrize("version, series, expected", [c for c in SERIES_CASES if c[0] is not None])
def test_the_audit_and_the_fix_share_the_series_rule(version, series, expected):
    """The fix picks the kernels the audit counts as the series: by behaviour, not by import."""
    from ansible.module_utils.pvetune.concerns.kernel import checks as kernel
    from ansible.module_utils.pvetune.concerns.kernel import fix as kernel_fix
    assert kernel.in_series is in_series
    assert (version in kernel_fix.series_kernels([version, "5.15.0-1-pve"], series)) is expected


def test_every_entry_has_the_fields_an_operator_reads():
    for entry in CATALOGUE:
        for key in ("id", "concern", "summary", "title", "severity", "expected", "rationale", "remediation",
                    "fix_tag", "reboot"):
            assert isinstance(entry.get(key), str), (entry["id"], key)
        assert entry["summary"] and "\n" not in entry["summary"], entry["id"]


def test_the_catalogue_is_each_concerns_entries_in_the_one_order():
    """Every concern's catalogue.py entry is in ORDER exactly once, carries its package as its concern, and an id
    missing from ORDER, left over in it or in two concerns is refused by name."""
    assert [c["id"] for c in CATALOGUE] == list(catalogue.ORDER)
    for module in catalogue.CONCERN_CATALOGUES:
        concern = module.__name__.split(".")[-2]
        assert concern in audit.BY_NAME
        for row in module.ENTRIES:
            assert "concern" not in row and catalogue.BY_ID[row["id"]]["concern"] == concern
    mods = catalogue.CONCERN_CATALOGUES
    with pytest.raises(ValueError, match="differ: %s" % catalogue.ORDER[-1]):
        catalogue.build_catalogue(mods, catalogue.ORDER[:-1])
    with pytest.raises(ValueError, match="differ: no.such"):
        catalogue.build_catalogue(mods, catalogue.ORDER + ("no.such",))
    with pytest.raises(ValueError, match="an id twice in ORDER"):
        catalogue.build_catalogue(mods, catalogue.ORDER + ("gpu.clocks",))
    with pytest.raises(ValueError, match="check gpu.power_limit is in the catalogue twice"):
        catalogue.build_catalogue(mods + (mods[3],), catalogue.ORDER)


def test_an_opt_in_is_a_boolean_policy_key_of_a_fixable_check_and_evaluate_honours_it():
    """The catalogue's opt_in names the policy key without which fix.yml leaves the check alone: a boolean key that
    documents the check, on a check with a fix tag. Without it a failing result has no fix_tag (audit.evaluate)."""
    from ansible.module_utils.pvetune.core.policy import BY_KEY
    opted = {c["id"]: c["opt_in"] for c in CATALOGUE if c.get("opt_in")}
    assert set(opted) == {"gpu.power_limit", "gpu.clocks", "nvidia.uvm_hmm", "pcie.aspm", "storage.zfs_arc"}
    for cid, key in opted.items():
        assert BY_KEY[key].default is False and cid in BY_KEY[key].checks and catalogue.BY_ID[cid]["fix_tag"], cid
    facts = {"zfs": {"loaded": True, "params": {"zfs_arc_max": 0}, "configured": {}, "errors": [], "evidence": [],
                     "arcstats": {"c_max": 256 << 30, "c_min": 16 << 30, "size": 1 << 30}},
             "memory": {"meminfo": {"MemTotal": 512 << 20}}, "ct_runtime": {"cts": []}}
    for fix, tag in ((False, ""), (True, "zfs")):
        (res,) = audit.evaluate(facts, merge_policy({"zfs_arc_fix": fix}), only={"storage.zfs_arc"})
        assert (res["status"], res["fix_tag"]) == ("warn", tag)
