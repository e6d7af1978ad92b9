"""core/scope.py: which checks a fix run's gates judge, from the catalogue's fix tags and the run's tags."""
import pytest
from modharness import run_module

from ansible.module_utils.pvetune.core.catalogue import BY_ID, CATALOGUE, FIX_TAGS, fix_tags
from ansible.module_utils.pvetune.core.scope import run_scope, selected_tags

MULTI = [c["id"] for c in CATALOGUE if len(fix_tags(c["id"])) > 1]


def result(check_id, status="fail", reboot=False, fix_tag=None):
    return {"id": check_id, "status": status, "message": "%s is %s" % (check_id, status), "reboot_required": reboot,
            "fix_tag": BY_ID[check_id]["fix_tag"] if fix_tag is None else fix_tag}


def test_all_selects_every_fix_tag_and_skip_tags_take_some_out():
    assert selected_tags(["all"]) == sorted(FIX_TAGS) == selected_tags([])
    assert selected_tags(["all"], ["cmdline"]) == sorted(set(FIX_TAGS) - {"cmdline"})
    assert selected_tags(["cpu", "always", "nope"]) == ["cpu"]


def test_the_catalogue_has_checks_whose_fix_needs_two_tags():
    assert "cpu.scaling_driver" in MULTI and fix_tags("cpu.scaling_driver") == ["cpu", "cmdline"]


@pytest.mark.parametrize("check_id", MULTI)
def test_a_check_the_run_fixes_only_in_part_is_out_of_scope_never_bad(check_id):
    needs = fix_tags(check_id)
    scope = run_scope([result(check_id, reboot=True)], [needs[0]])
    assert scope["in_scope"] == [] and scope["bad"] == [] and scope["reboots"] == []
    assert scope["out_of_scope"] == [{"id": check_id, "needs": needs[1:]}]
    # the same check with every tag its fix needs is judged
    scope = run_scope([result(check_id, reboot=True)], needs)
    assert scope["in_scope"] == [check_id] and scope["reboots"] == [check_id] and scope["out_of_scope"] == []
    assert scope["bad"] == [{"id": check_id, "message": "%s is fail" % check_id}]


def test_the_lxc_then_cpu_sequence_judges_only_the_cpu_checks_it_can_fix():
    results = [result("cpu.scaling_driver", reboot=True), result("cpu.governor", "pass"),
               result("lxc.gpu_devices", "fail"), result("kernel.numa_balancing", "fail")]
    scope = run_scope(results, ["cpu"])
    assert scope["in_scope"] == ["cpu.governor"]
    assert scope["bad"] == [] and scope["reboots"] == []
    assert scope["out_of_scope"] == [{"id": "cpu.scaling_driver", "needs": ["cmdline"]}]


def test_statuses_sort_into_bad_pending_and_reboots():
    results = [result("kernel.numa_balancing", "error"), result("kernel.version", "pending", reboot=True),
               result("pcie.mrrs", "pass"), result("lxc.gpu_devices", "warn")]
    scope = run_scope(results, ["all"])
    assert [b["id"] for b in scope["bad"]] == ["kernel.numa_balancing"]
    assert [p["id"] for p in scope["pending"]] == ["kernel.version"]
    assert scope["reboots"] == ["kernel.version"]
    assert scope["in_scope"] == ["kernel.numa_balancing", "kernel.version", "pcie.mrrs", "lxc.gpu_devices"]


def test_a_result_pvetune_does_not_fix_here_is_never_in_scope():
    # lxc.resources says its problems are the operator's by an empty fix_tag on the result
    scope = run_scope([result("lxc.resources", fix_tag=""), result("nvidia.driver")], ["all"])
    assert scope == {"tags": sorted(FIX_TAGS), "in_scope": [], "out_of_scope": [], "bad": [], "pending": [],
                     "reboots": [], "ct_restarts": []}


def test_the_facts_module_returns_the_scope_only_when_asked(tmp_path):
    import os

    from conftest import TOP

    root = os.path.join(TOP, "demo", "snapshots", "pve-gpu01")
    plain = run_module("pvetune_facts", {"root": root})
    assert "scope" not in plain
    out = run_module("pvetune_facts", {"root": root, "run_tags": ["cpu"], "skip_tags": []})
    assert out["scope"] == run_scope(out["results"], ["cpu"])
    assert {"id": "cpu.scaling_driver", "needs": ["cmdline"]} in out["scope"]["out_of_scope"]
    assert all(b["id"] != "cpu.scaling_driver" for b in out["scope"]["bad"])


def test_ct_restarts_are_the_cts_pending_items_name_whatever_the_tags():
    results = [
        {"id": "lxc.gpu_devices", "fix_tag": "lxc", "status": "pending",
         "items": [{"name": "CT 101", "status": "pending"}, {"name": "CT 102", "status": "pass"}]},
        {"id": "lxc.resources", "fix_tag": "", "status": "fail",
         "items": [{"name": "CT 103", "status": "pending"}, {"name": "CT x", "status": "pending"},
                   {"name": "0000:01:00.0", "status": "pending"}]},
    ]
    for tags in (["cpu"], ["all"]):
        assert run_scope(results, tags)["ct_restarts"] == [101, 103]
    assert run_scope([{"id": "cpu.governor", "fix_tag": "cpu", "status": "fail"}], ["all"])["ct_restarts"] == []
