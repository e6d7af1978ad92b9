"""What a new operator hit (issue 15): exit codes of runs that do nothing, failures charged to the right host,
reports written whatever happens, a policy error said once, a short --check --diff."""
import json
import os

from conftest import DEMO_SNAPSHOTS, run_playbook

FAIL_TASK = "Fail the hosts that fail checks at or above the threshold, or could not be audited"
LOCAL = ("          ansible_connection: local\n"
         "          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n")


def inventory(tmp_path, hosts, group="gpu_hosts"):
    """An inventory of local hosts {name: root} in ``group``."""
    text = "all:\n  children:\n    %s:\n      hosts:\n" % group
    for name, root in hosts.items():
        text += "        %s:\n%s          pvetune_root: %s\n" % (name, LOCAL, root)
    path = tmp_path / "inv.yml"
    path.write_text(text)
    return str(path)


def failed_msgs(run):
    return [e["res"].get("msg", "") for e in run.results(event="runner_on_failed")]


def demo(host):
    return os.path.join(DEMO_SNAPSHOTS, host)


def test_an_inventory_without_gpu_hosts_exits_non_zero_saying_why(tmp_path):
    inv = inventory(tmp_path, {"pve-gpu02": demo("pve-gpu02")}, group="others")
    for playbook in ("audit.yml", "fix.yml", "rollback.yml"):
        run = run_playbook(tmp_path / playbook, playbook, inventory=inv,
                           extravars={"pvetune_report_dir": str(tmp_path / "r"), "ansible_become": False})
        assert run.rc != 0, playbook
        assert any("'gpu_hosts' matches no host of inventory" in m for m in failed_msgs(run)), playbook


def test_a_limit_outside_the_pattern_exits_non_zero(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    other:\n%s  children:\n    gpu_hosts:\n      hosts:\n        pve-gpu02:\n%s"
                   "          pvetune_root: %s\n" % (LOCAL.replace("          ", "      "), LOCAL, demo("pve-gpu02")))
    run = run_playbook(tmp_path, "audit.yml", inventory=str(inv), limit="other",
                       extravars={"pvetune_report_dir": str(tmp_path / "r"), "ansible_become": False})
    assert run.rc != 0
    assert any("--limit leaves none of the 1 host(s) of 'gpu_hosts'" in m for m in failed_msgs(run))


def test_tags_that_select_nothing_exit_non_zero_and_touch_no_host(tmp_path):
    cases = [("fix.yml", "--check --tags kernal", "--tags kernal selects nothing fix.yml does"),
             ("rollback.yml", "--check --tags lxc", "--tags lxc selects nothing rollback.yml does"),
             ("audit.yml", "--tags cpu", "--tags cpu selects nothing audit.yml does")]
    for i, (playbook, cmdline, message) in enumerate(cases):
        run = run_playbook(tmp_path / str(i), playbook, cmdline=cmdline,
                           extravars={"pvetune_report_dir": str(tmp_path / ("r%d" % i))})
        assert run.rc != 0, cmdline
        assert any(message in m for m in failed_msgs(run)), (cmdline, failed_msgs(run))
        # refused by the refusal play (any_errors_fatal), before the play that acts on the hosts started
        plays = [e["event_data"]["play"] for e in run.events if e.get("event") == "playbook_on_play_start"]
        assert plays == ["Check the run before any host is touched",
                         "Refuse the run (hosts only when the run check refused it)"], plays


def test_when_every_host_errors_the_report_is_still_written(tmp_path):
    inv = inventory(tmp_path, {"a": "/nonexistent/a", "b": "/nonexistent/b"})
    run = run_playbook(tmp_path, "audit.yml", inventory=inv,
                       extravars={"pvetune_report_dir": str(tmp_path / "r"), "ansible_become": False})
    assert run.rc != 0
    latest = tmp_path / "r" / "latest"
    for name in ("audit.json", "audit.html", "junit.xml", "summary.txt"):
        assert (latest / name).is_file(), name
    doc = json.loads((latest / "audit.json").read_text())
    assert {h["host"] for h in doc["hosts"]} == {"a", "b"}
    assert all(h["error"] for h in doc["hosts"])
    assert set(run.stats()["failures"]) == {"a", "b"}
    # each host's audit failed (kept in the play: ignore_errors) and the host is failed once, after the reports
    msgs = [e["res"]["msg"] for e in run.results(FAIL_TASK, event="runner_on_failed")]
    assert len(msgs) == 2 and all(" could not be audited: root /nonexistent/" in m for m in msgs), msgs
    assert not any("fails checks of severity" in m for m in msgs)


def test_a_bad_policy_is_said_once_by_its_variable_name(tmp_path):
    hosts = {"pve-gpu02": demo("pve-gpu02"), "pve-gpu03": demo("pve-gpu03")}
    inv = inventory(tmp_path, hosts)
    bad = {"pvetune_policy": {"pcie_mrrs": 3000}, "pvetune_report_dir": str(tmp_path / "r"), "ansible_become": False}
    audit = run_playbook(tmp_path / "audit", "audit.yml", inventory=inv, extravars=bad)
    assert audit.rc != 0
    # in the task results (the fleet summary table, a report, names each host's reason in its row)
    said = [json.dumps(e["event_data"]["res"]) for e in audit.events
            if e.get("event") in ("runner_on_ok", "runner_on_failed") and e["event_data"].get("task") != "Fleet summary"
            and "pvetune_policy.pcie_mrrs" in json.dumps(e["event_data"].get("res", {}).get("msg", ""))]
    assert len(said) == 1, said
    assert "hosts pve-gpu02, pve-gpu03" in said[0] and "argument 'policy'" not in said[0]
    # the hosts are reported as not audited, with the reason, and each is failed by its own result
    doc = json.loads((tmp_path / "r" / "latest" / "audit.json").read_text())
    assert all("pvetune_policy.pcie_mrrs" in h["error"] and h["policy_invalid"] for h in doc["hosts"])
    assert {h for h, n in audit.stats()["failures"].items() if n} == set(hosts)
    fix = run_playbook(tmp_path / "fix", "fix.yml", inventory=inv, cmdline="--check", extravars=bad)
    assert fix.rc != 0
    msgs = failed_msgs(fix)
    assert sorted(msgs) == ["pvetune refuses this run: %s's pvetune_policy is invalid (said above)" % h
                            for h in sorted(hosts)], msgs
    assert not fix.results("Check every input of this run before anything is changed")


def test_a_refusal_is_charged_to_the_hosts_it_concerns_under_limit(tmp_path):
    """A bad policy on one host of two --limit'ed hosts fails that host only; the run stops before any fix."""
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  children:\n    gpu_hosts:\n      hosts:\n"
                   "        pve-gpu02:\n%s          pvetune_root: %s\n"
                   "        pve-gpu03:\n%s          pvetune_root: %s\n          pvetune_policy: {pcie_mrrs: 3000}\n"
                   % (LOCAL, demo("pve-gpu02"), LOCAL, demo("pve-gpu03")))
    fix = run_playbook(tmp_path, "fix.yml", inventory=str(inv), cmdline="--check", limit="pve-gpu02,pve-gpu03",
                       extravars={"pvetune_report_dir": str(tmp_path / "r"), "ansible_become": False})
    assert fix.rc != 0
    assert {h for h, n in fix.stats()["failures"].items() if n} == {"pve-gpu03"}
    assert not fix.results("Take the host's pvetune lock (one fix run at a time)")


def test_the_reports_name_the_real_run(tmp_path):
    """fix commands, JUnit properties and time, HTML links and policy, from a real audit run's files."""
    inv = inventory(tmp_path, {"pve-gpu01": demo("pve-gpu01")})
    run = run_playbook(tmp_path, "audit.yml", inventory=inv,
                       extravars={"pvetune_report_dir": str(tmp_path / "r"), "ansible_become": False,
                                  "pvetune_junit_warn_as_failure": True, "pvetune_fix_inventory": ["inventory/prod"]})
    assert run.rc == 2
    latest = tmp_path / "r" / "latest"
    doc = json.loads((latest / "audit.json").read_text())
    [host] = doc["hosts"]
    checks = {c["id"]: c for c in host["checks"]}
    # a snapshot root: the command names the live inventory, not the snapshot's (it would fix the tree)
    assert checks["pcie.mrrs"]["fix_command"] == (
        "ansible-playbook -i '<inventory of the live host>' fix.yml -l pve-gpu01 --tags pcie")
    assert host["duration"] > 0 and host["policy"]["pcie_mrrs"] == 4096
    import xml.etree.ElementTree as ET
    suite = ET.parse(str(latest / "junit.xml")).getroot().find("testsuite")
    assert float(suite.get("time")) > 0 and suite.get("timestamp")
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in suite.iter("testcase")}
    assert props["pcie.mrrs"]["pvetune.status"] == "fail"
    warns = [c for c in suite.iter("testcase") if props[c.get("name")].get("pvetune.status") == "warn"]
    assert warns  # pve-gpu01's pcie.link (idle downclock) is a warn
    assert all(c.find("failure") is not None and c.find("failure").get("type") == "warn" for c in warns)
    html = (latest / "audit.html").read_text()
    assert 'href="#check-pve-gpu01::pcie.mrrs"' in html and 'id="check-pve-gpu01::pcie.mrrs"' in html
    assert ">None<" not in html and "effective policy" in html
