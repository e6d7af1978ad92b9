"""The run check (core/runcheck.py): a run that would do nothing, or names a bad run id or policy, is refused."""
import pytest
from modharness import run_module

from ansible.module_utils.pvetune.core import runcheck
from ansible.module_utils.pvetune.core import catalogue
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
    assert list(runcheck.FIX_TAGS) == tags and runcheck.FIX_TAGS is catalogue.FIX_TAGS
    for tag in tags:
        assert run(run_tags=[tag])["hosts"] == HOSTS


def test_a_skip_tags_typo_is_warned_of_because_it_skips_nothing_and_molecules_tags_are_not():
    res = check_run("fix", "gpu_hosts", HOSTS, HOSTS, ["all"], ["kernal", "molecule-notest", "notest"])
    assert not res["refused"]
    assert res["warnings"] == ["--skip-tags kernal names nothing fix.yml does, so it skips nothing (its tags are "
                               "%s)" % ", ".join(catalogue.FIX_TAGS)]
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


# -- the play keywords' variables (pvetune_hosts, pvetune_serial, pvetune_batch): -e only --------------------------
def keywords(playbook="fix", host_vars=None, extra_vars=(), play_hosts=HOSTS + ["localhost", "other"]):
    """check_run's warnings, or RunRefused with the refusal, for host_vars as the action plugin gives them."""
    res = check_run(playbook, "gpu_hosts", HOSTS, play_hosts, ["all"], [], host_vars=host_vars or {},
                    extra_vars=list(extra_vars))
    if res["refused"]:
        raise RunRefused(res["refused"])
    return res["warnings"]


ALL = {"pvetune_batch": 10, "pvetune_serial": [1, "20%"]}  # group_vars/all: every host and localhost


def test_inventory_serial_and_batch_are_warned_of_naming_value_hosts_and_what_the_play_uses():
    batch_warning = ("pvetune_batch is 10 (hosts pve-gpu01, pve-gpu02, localhost) in the inventory, but not given "
                     "with -e: play keywords are templated before any host is known, from the extra vars only, so "
                     "fix.yml's batch play keeps serial 1 (one host at a time), though its sorting play reads the "
                     "inventory's value and sends the hosts needing no reboot to it. Give it with -e pvetune_batch=10")
    warnings = keywords(host_vars=dict.fromkeys(HOSTS + ["localhost", "other"], ALL))
    assert len(warnings) == 2 and warnings[1] == batch_warning
    assert warnings[0].startswith('pvetune_serial is [1, "20%"] (hosts pve-gpu01, pve-gpu02, localhost)')
    assert "fix.yml's rolling play keeps serial 1" in warnings[0]
    assert warnings[0].endswith("""Give it with -e '{"pvetune_serial": [1, "20%"]}'""")


def test_an_extra_var_is_what_the_plays_use_so_it_is_not_warned_of():
    assert keywords(host_vars=dict.fromkeys(HOSTS + ["localhost"], ALL), extra_vars=ALL) == []
    warnings = keywords(host_vars=dict.fromkeys(HOSTS, ALL), extra_vars=["pvetune_serial"])
    assert [w.split()[0] for w in warnings] == ["pvetune_batch"]


def test_only_the_hosts_of_the_run_and_localhost_count_for_serial_and_batch():
    assert keywords(host_vars={"other": ALL}) == []  # outside the pattern
    assert keywords(host_vars={"localhost": ALL}, play_hosts=HOSTS + ["localhost"])[0].startswith(
        'pvetune_serial is [1, "20%"] (host localhost)')
    assert keywords(host_vars={"pve-gpu02": ALL}, play_hosts=["pve-gpu01", "localhost"]) == []  # --limit


def test_the_value_the_play_uses_anyway_and_other_playbooks_are_not_warned_of():
    assert keywords(host_vars={"pve-gpu01": {"pvetune_serial": "1", "pvetune_batch": 1,
                                             "pvetune_hosts": "gpu_hosts"}}) == []
    assert keywords("audit", host_vars=dict.fromkeys(HOSTS, ALL)) == []  # its plays have no serial
    assert [w.split()[0] for w in keywords("rollback", host_vars=dict.fromkeys(HOSTS, ALL))] == ["pvetune_serial"]
    assert "rollback.yml's play keeps serial 1" in keywords("rollback", host_vars={"pve-gpu01": ALL})[0]


def test_different_values_are_grouped_and_the_hint_names_no_one_of_them():
    warnings = keywords(host_vars={"pve-gpu01": {"pvetune_batch": "25%"}, "pve-gpu02": {"pvetune_batch": 4},
                                   "localhost": {"pvetune_batch": "25%"}})
    assert warnings[0].startswith('pvetune_batch is "25%" (hosts pve-gpu01, localhost), 4 (host pve-gpu02) in')
    assert warnings[0].endswith("Give it with -e pvetune_batch=<value>")


@pytest.mark.parametrize("playbook", runcheck.PLAYBOOKS)
def test_an_inventory_host_pattern_is_refused_wherever_it_is(playbook):
    """The check read it but the plays act on gpu_hosts: refused, on any host of the play (even outside the run)."""
    with pytest.raises(RunRefused) as err:
        keywords(playbook, host_vars={"other": {"pvetune_hosts": "gpu_hosts:!pve-gpu02"}})
    assert str(err.value) == (
        'pvetune_hosts is "gpu_hosts:!pve-gpu02" (host other) in the inventory, but not given with -e: play keywords '
        "are templated before any host is known, from the extra vars only, so %s.yml's plays act on gpu_hosts "
        "(their hosts keyword) while this check and the tasks read the inventory's pattern. Give it with "
        "-e 'pvetune_hosts=gpu_hosts:!pve-gpu02' (or remove it from the inventory)" % playbook)
    assert keywords(playbook, host_vars={"other": {"pvetune_hosts": "rack7"}}, extra_vars=["pvetune_hosts"]) == []


def test_without_the_extra_vars_names_the_keywords_are_not_checked():
    """The module run without its action plugin (or in a play of one's own, play_keywords false) cannot tell."""
    res = check_run("fix", "gpu_hosts", HOSTS, HOSTS, ["all"], [], host_vars={"pve-gpu01": {"pvetune_hosts": "x"}})
    assert not res["refused"] and res["warnings"] == []


@pytest.mark.parametrize("value,option", [
    (10, "-e pvetune_batch=10"), ("25%", "-e pvetune_batch=25%"), ("a b", """-e '{"pvetune_batch": "a b"}'"""),
    (True, """-e '{"pvetune_batch": true}'"""), ([1, 2], """-e '{"pvetune_batch": [1, 2]}'""")])
def test_the_hint_gives_an_option_that_keeps_the_value(value, option):
    assert keywords(host_vars={"pve-gpu01": {"pvetune_batch": value}})[0].endswith("Give it with " + option)


# -- the action plugin: the extra vars' names and each host's values, then the module ------------------------------
def test_the_action_plugin_gives_the_call_the_extra_vars_names_and_the_hosts_values(monkeypatch):
    import importlib.util
    import os
    import types

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "action_plugins", "pvetune_run_check.py")
    spec = importlib.util.spec_from_file_location("pvetune_run_check_action", path)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    monkeypatch.setattr(plugin, "load_extra_vars", lambda loader: {"pvetune_serial": 2, "other": "x"})
    task = types.SimpleNamespace(args={"playbook": "fix", "play_hosts": ["pve-gpu01", "down"]}, check_mode=False,
                                 diff=False, async_val=0, action="pvetune_run_check")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir=None))
    action = plugin.ActionModule(task, connection, play_context=None, loader=None, templar=None,
                                 shared_loader_obj=None)
    sent = {}
    monkeypatch.setattr(plugin, "run_in_process", lambda spec, call, args, check_mode, diff: sent.update(args) or {})
    hostvars = {"pve-gpu01": {"pvetune_batch": 10, "pvetune_policy": {}}, "localhost": {"pvetune_hosts": "r7"}}
    action.run(task_vars={"hostvars": hostvars})
    assert sent["extra_vars"] == ["other", "pvetune_serial"]
    assert sent["host_vars"] == {"pve-gpu01": {"pvetune_batch": 10}, "localhost": {"pvetune_hosts": "r7"}}
    assert sent["playbook"] == "fix" and task.args == {"playbook": "fix", "play_hosts": ["pve-gpu01", "down"]}
    # A play of one's own checks no keyword: no host's variables are computed for it.
    task.args = {"playbook": "fix", "play_hosts": ["pve-gpu01"], "play_keywords": False}
    action.run(task_vars={"hostvars": hostvars})
    assert sent["host_vars"] == {}


def test_the_module_warns_through_ansible_and_skips_the_keywords_in_a_play_of_ones_own():
    args = {"playbook": "fix", "pattern": "gpu_hosts", "pattern_hosts": HOSTS, "play_hosts": HOSTS,
            "extra_vars": [], "host_vars": {"pve-gpu01": {"pvetune_serial": 5}}}
    res = run_module("pvetune_run_check", args)
    assert not res["refused"]
    assert res["warnings"][0]["event"]["msg"].startswith("pvetune_serial is 5 (host pve-gpu01)")
    assert "warnings" not in run_module("pvetune_run_check", dict(args, play_keywords=False))


# -- the report directories (issue 33: a record that cannot be written must not follow a change) -----------------
def test_report_dirs_that_cannot_take_the_records_refuse_the_run_by_name(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert runcheck.report_dir_problem(str(reports)) == ""
    assert runcheck.report_dir_problem(str(tmp_path / "new" / "deeper")) == ""   # created by the run
    assert runcheck.report_dir_problem("/").startswith("is the root directory")
    assert runcheck.report_dir_problem(str(tmp_path / ".." / ".." / ".." / ".." / ".." / ".." / "..")) \
        .startswith("is the root directory")
    assert runcheck.report_dir_problem(str(afile)) == 'cannot be created: "%s" is not a directory' % afile
    assert runcheck.report_dir_problem(str(afile / "sub")) == 'cannot be created: "%s" is not a directory' % afile
    assert runcheck.report_dir_problem("") == "is empty"
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert runcheck.report_dir_problem(str(loop))  # a symlink loop is no directory
    verdict = check_run("fix", "gpu_hosts", ["a", "b"], ["a", "b", "localhost"], ["all"], [],
                        report_dirs={"a": str(reports), "b": str(afile), "localhost": str(reports), "z": "/"})
    assert verdict["refused"] == ('pvetune_report_dir "%s" cannot be created: "%s" is not a directory (host b). '
                                  "Give a writable directory (-e pvetune_report_dir=/path)" % (afile, afile))
    assert verdict["charged"] == ["a", "b", "localhost"]
    # Hosts outside the run (z) are not judged; without report_dirs nothing is checked.
    assert check_run("fix", "gpu_hosts", ["a"], ["a"], ["all"], [], report_dirs={"a": str(reports), "z": "/"})[
        "refused"] == ""
    assert check_run("audit", "gpu_hosts", ["a"], ["a"], ["all"], [])["refused"] == ""


def test_a_read_only_report_dir_is_refused(tmp_path, monkeypatch):
    reports = tmp_path / "reports"
    reports.mkdir()
    # As root every mode bit is writable; a read-only mount is what os.access reports as not writable.
    monkeypatch.setattr(runcheck.os, "access", lambda path, mode: path != str(reports))
    assert runcheck.report_dir_problem(str(reports / "fix")) == \
        'cannot be written: "%s" is read-only (file system or permissions)' % reports


def test_the_refusal_play_gets_exactly_the_hosts_to_fail_and_the_audit_the_hosts_to_audit():
    """playbooks/shared/run_check.yml's refusal play runs on the verdict's ``refuse`` and audit.yml's audit play on
    ``act_on``: a run that may go on refuses nobody, so it costs no task per host."""
    args = dict(pattern="gpu_hosts", pattern_hosts=HOSTS, play_hosts=HOSTS + ["localhost"], run_tags=["all"],
                skip_tags=[])
    bad = {"pve-gpu01": {"pcie_mrrs": 3000}}
    fine = check_run(playbook="audit", **args)
    assert fine["refuse"] == {} and fine["act_on"] == HOSTS
    audit = check_run(playbook="audit", policies=bad, **args)
    assert audit["refuse"] == {} and audit["act_on"] == ["pve-gpu02"]
    fix = check_run(playbook="fix", policies=bad, **args)
    assert fix["refuse"] == {"pve-gpu01": "pvetune refuses this run: pve-gpu01's pvetune_policy is invalid "
                                          "(said above)"}
    refused = check_run(playbook="audit", **dict(args, run_tags=["cpu"]))
    assert list(refused["refuse"]) == HOSTS + ["localhost"] and refused["act_on"] == []
    assert all(m == "pvetune refuses this run: " + refused["refused"] for m in refused["refuse"].values())
