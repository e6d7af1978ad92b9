"""The run check (core/runcheck.py): a run that would do nothing, or names a bad run id or policy, is refused."""
import pytest

from ansible.module_utils.pvetune.core import runcheck
from ansible.module_utils.pvetune.core.catalogue import CATALOGUE
from ansible.module_utils.pvetune.core.runcheck import RunRefused, check_run

HOSTS = ["pve-gpu01", "pve-gpu02"]


def run(**kw):
    """check_run's verdict; a refusal raised as RunRefused (with the hosts it is charged to) for pytest.raises."""
    args = dict(playbook="fix", pattern="gpu_hosts", pattern_hosts=HOSTS, play_hosts=HOSTS + ["localhost"],
                run_tags=["all"], skip_tags=[])
    args.update(kw)
    res = check_run(**args)
    if res["refused"]:
        raise RunRefused("%s [charged: %s]" % (res["refused"], ", ".join(res["charged"])))
    assert res["charged"] == [] and res["warnings"] == []
    return {k: res[k] for k in ("hosts", "bad_policy", "policy_message")}


def test_a_plain_run_passes_with_its_hosts():
    assert run() == {"hosts": HOSTS, "bad_policy": {}, "policy_message": ""}


def test_a_pattern_matching_nothing_is_refused_naming_the_inventory():
    with pytest.raises(RunRefused, match=r"'gpu_hosts' matches no host of inventory /x/hosts.yml"):
        run(pattern_hosts=[], inventory=["/x/hosts.yml"])


def test_a_limit_leaving_none_of_the_pattern_is_refused():
    with pytest.raises(RunRefused, match=r"--limit leaves none of the 2 host\(s\) of 'gpu_hosts'"):
        run(play_hosts=["other"])


def test_limit_selects_hosts_in_pattern_order():
    assert run(play_hosts=["pve-gpu02", "other"])["hosts"] == ["pve-gpu02"]


@pytest.mark.parametrize("tags", [["kernal"], ["always"], ["lxc", "nope"], ["always", "nope"]])
def test_fix_tags_that_select_no_fix_are_refused(tags):
    with pytest.raises(RunRefused, match="selects nothing fix.yml does .its tags are cmdline, cpu"):
        run(run_tags=tags)


def test_every_catalogue_fix_tag_is_accepted():
    tags = sorted({c["fix_tag"] for c in CATALOGUE if c.get("fix_tag")})
    assert list(runcheck.FIX_TAGS) == tags
    for tag in tags:
        assert run(run_tags=[tag])["hosts"] == HOSTS


def test_a_skip_tags_typo_is_warned_of_because_it_skips_nothing_and_molecules_tags_are_not():
    res = check_run("fix", "gpu_hosts", HOSTS, HOSTS, ["all"], ["kernal", "molecule-notest", "notest"])
    assert not res["refused"]
    assert res["warnings"] == ["--skip-tags kernal names nothing fix.yml does, so it skips nothing (its tags are "
                               "cmdline, cpu, kernel, lxc, pcie, sysctl)"]
    assert check_run("fix", "gpu_hosts", HOSTS, HOSTS, ["all"], ["molecule-notest", "notest"])["warnings"] == []


def test_tags_all_skipped_leave_no_fix():
    with pytest.raises(RunRefused, match="leaves no fix to run"):
        run(run_tags=["lxc"], skip_tags=["lxc"])


@pytest.mark.parametrize("playbook", ["audit", "rollback"])
def test_playbooks_without_tags_refuse_any(playbook):
    with pytest.raises(RunRefused, match="it has no tags: it always does the whole job"):
        run(playbook=playbook, run_tags=["cpu"])


@pytest.mark.parametrize("run_id", ["../etc", "", "a" * 65, "-x"])
def test_a_bad_run_id_is_refused_by_its_variable_name(run_id):
    with pytest.raises(RunRefused, match="pvetune_run_id_override must be"):
        run(run_id=run_id)


def test_bad_policies_are_grouped_once_by_error_with_the_variable_name():
    res = run(policies={"pve-gpu01": {"pcie_mrrs": 3000}, "pve-gpu02": {"pcie_mrrs": 3000}})
    assert sorted(res["bad_policy"]) == HOSTS
    assert res["policy_message"].count("pvetune_policy.pcie_mrrs") == 1
    assert "(hosts pve-gpu01, pve-gpu02)" in res["policy_message"]
    assert '-e \'{"pvetune_policy"' in res["policy_message"] and "replaces the inventory's" in res["policy_message"]


def test_a_policy_given_as_json_text_is_read_and_a_bad_text_reported():
    assert run(policies={"pve-gpu01": '{"pcie_mrrs": 4096}'})["bad_policy"] == {}
    res = run(policies={"pve-gpu01": "[1, 2]"})
    assert res["bad_policy"] == {"pve-gpu01": "pvetune_policy must be a mapping"}


def test_policies_of_hosts_outside_the_run_are_not_judged():
    res = run(play_hosts=["pve-gpu01"], policies={"pve-gpu02": {"nope": 1}})
    assert res["bad_policy"] == {}


def test_always_next_to_a_real_tag_is_accepted():
    assert run(run_tags=["lxc", "always"])["hosts"] == HOSTS


@pytest.mark.parametrize("pattern_hosts,play_hosts,charged", [
    (HOSTS, HOSTS + ["localhost", "other"], HOSTS + ["localhost"]),  # the hosts the run would act on
    (HOSTS, ["pve-gpu02"], ["pve-gpu02"]),  # --limit: localhost is not in the play
    ([], ["localhost", "other"], ["localhost"]),  # nothing matched: the controller
    (HOSTS, ["other"], ["other"]),  # --limit outside the pattern: what --limit left
])
def test_a_refusal_is_charged_to_the_hosts_it_concerns(pattern_hosts, play_hosts, charged):
    res = check_run("fix", "gpu_hosts", pattern_hosts, play_hosts, ["kernal"], [])
    assert res["refused"] and res["charged"] == charged


def test_a_policy_as_key_value_text_is_read_as_the_modules_read_it():
    res = run(policies={"pve-gpu01": "pcie_mrrs=4096"})
    assert "pvetune_policy.pcie_mrrs" in res["bad_policy"]["pve-gpu01"]  # k=v gives the string "4096"
