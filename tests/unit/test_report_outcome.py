"""Hosts that could not be audited are reported apart from hosts that fail checks, and both fail the run:
write_reports, the pvetune_report module and its action plugin return failed_hosts, hosts_failing,
unaudited_hosts, unaudited ({host: reason}), host_verdicts and fleet_failed; the files say "could not be
audited" with the reason; the reports are written even when no host could be audited."""
import datetime
import importlib.util
import json
import os
import re
import types
import xml.etree.ElementTree as ET

import pytest
from ansible.module_utils.pvetune.report import write as report
from modharness import run_module
from reportutil import GENERATED_AT, TOP, facts_result, load_schema, parse_html, text_of, validate

SSH = "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.9 port 22: Connection refused"
# Registered pvetune_audit values as the audit play leaves them (ignore_unreachable / ignore_errors).
UNREACHABLE = {"unreachable": True, "changed": False, "msg": SSH}
FAILED = {"failed": True, "changed": False, "msg": "root /srv/snap/missing is not a directory"}
FILES = ["audit.html", "audit.json", "junit.xml", "pvetune.prom", "summary.md", "summary.txt"]
NOW = datetime.datetime(2026, 11, 29, 20, 6, 52, tzinfo=datetime.timezone.utc)


@pytest.fixture(scope="module")
def schema():
    return load_schema()


def write(tmp_path, audits, hosts=None, **kwargs):
    hosts = hosts if hosts is not None else sorted(audits)
    return report.write_reports(hosts, audits, str(tmp_path / "reports"), "high",
                                {"playbook": "audit.yml", "inventory": ["inventory/demo"]},
                                timestamp="20261129T200652Z", now=NOW, **kwargs)


def read(out, name):
    with open(os.path.join(out["report_dir"], name), encoding="utf-8") as handle:
        return handle.read()


def test_failing_and_unaudited_hosts_are_apart(tmp_path, schema):
    audits = {"pve-gpu01": facts_result("pve-gpu01"), "pve-gpu02": facts_result("pve-gpu02"),
              "down": UNREACHABLE, "broken": FAILED}
    out = write(tmp_path, audits, hosts=["pve-gpu01", "pve-gpu02", "down", "broken", "never-ran"])
    assert out["failed_hosts"] == ["broken", "down", "never-ran", "pve-gpu01"]  # all that fail the run
    assert out["failing_hosts"] == ["pve-gpu01"]
    assert out["host_messages"]["down"] == "down could not be audited: unreachable (%s)" % SSH
    assert out["host_messages"]["pve-gpu01"].startswith("pve-gpu01 fails checks of severity high or higher: cpu.")
    assert "pve-gpu02" not in out["host_messages"]
    assert out["hosts_failing"] == {"pve-gpu01": ["cpu.scaling_driver", "cpu.cstates", "cpu.boost",
                                                  "kernel.numa_balancing", "pcie.mrrs", "boot.cmdline",
                                                  "lxc.gpu_devices", "lxc.resources", "kernel.known_issues",
                                                  "nvidia.compute_capability"]}
    assert out["unaudited_hosts"] == ["broken", "down", "never-ran"]
    assert out["unaudited"] == {"down": "unreachable (%s)" % SSH, "broken": FAILED["msg"],
                                "never-ran": "the audit did not run on this host"}
    assert out["host_verdicts"] == {"pve-gpu01": "fail", "pve-gpu02": "pass", "down": "unaudited",
                                    "broken": "unaudited", "never-ran": "unaudited"}
    assert out["fleet_failed"] is True
    doc = json.loads(read(out, "audit.json"))
    validate(doc, schema)
    assert doc["summary"]["failed_hosts"] == out["failed_hosts"]
    assert doc["summary"]["unaudited"] == out["unaudited"]
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert hosts["down"]["reachable"] is False and hosts["down"]["error"] == SSH
    assert hosts["broken"]["reachable"] is True and hosts["broken"]["summary"]["verdict"] == "unaudited"
    assert all(hosts[h]["summary"]["failed"] for h in ("pve-gpu01", "down", "broken", "never-ran"))
    assert not hosts["pve-gpu02"]["summary"]["failed"]
    # The effective policy each audited host reported is kept; an unaudited host has none.
    assert hosts["pve-gpu01"]["policy"] == audits["pve-gpu01"]["policy"]
    assert hosts["down"]["policy"] is None


def test_unaudited_hosts_alone_fail_the_run(tmp_path):
    out = write(tmp_path, {"pve-gpu02": facts_result("pve-gpu02"), "down": UNREACHABLE})
    assert out["failed_hosts"] == ["down"] and out["failing_hosts"] == [] and out["hosts_failing"] == {}
    assert out["unaudited_hosts"] == ["down"]
    assert out["fleet_failed"] is True


def test_a_clean_fleet_passes(tmp_path):
    out = write(tmp_path, {"pve-gpu02": facts_result("pve-gpu02")})
    assert (out["failed_hosts"], out["unaudited_hosts"], out["unaudited"]) == ([], [], {})
    assert out["host_verdicts"] == {"pve-gpu02": "pass"}
    assert out["fleet_failed"] is False


def test_a_host_with_an_invalid_policy_is_reported_not_audited_with_the_reason(tmp_path):
    """audit.yml does not audit those hosts; the run check's bad_policy reaches the report as not_audited."""
    why = "pvetune_policy.pcie_mrrs must be one of 128, 256, 512, 1024, 2048, 4096"
    out = write(tmp_path, {"pve-gpu02": facts_result("pve-gpu02")}, hosts=["pve-gpu02", "bad"],
                not_audited={"bad": why})
    assert out["unaudited"] == {"bad": why} and out["host_verdicts"] == {"pve-gpu02": "pass", "bad": "unaudited"}
    assert out["host_messages"] == {"bad": "bad could not be audited: its pvetune_policy is invalid (said once above; "
                                           "the reason is in the report)"}
    host = {h["host"]: h for h in json.loads(read(out, "audit.json"))["hosts"]}["bad"]
    assert host["policy_invalid"] is True and host["error"] == why


def test_an_unreachable_result_without_a_message_says_unreachable():
    entry = report.entry_from_audit("h", {"unreachable": True})
    assert report.unaudited_reason(entry) == "unreachable"
    assert report.unaudited_reason(report.entry_from_audit("h", facts_result("pve-gpu02"))) is None


def test_reports_are_written_when_no_host_could_be_audited(tmp_path, schema):
    audits = {"down": UNREACHABLE, "broken": FAILED, "also-down": dict(UNREACHABLE, msg="timed out\nafter 10s")}
    out = write(tmp_path, audits)
    assert sorted(os.path.basename(f) for f in out["files"]) == FILES
    assert all(os.path.isfile(f) for f in out["files"])
    assert os.path.realpath(str(tmp_path / "reports" / "latest")) == out["report_dir"]
    assert out["failed_hosts"] == out["unaudited_hosts"] == ["also-down", "broken", "down"]
    assert out["failing_hosts"] == []
    assert out["fleet_failed"] is True

    doc = json.loads(read(out, "audit.json"))
    validate(doc, schema)
    assert doc["summary"]["counts"] == dict.fromkeys(report.STATUS_ORDER, 0)
    assert doc["summary"]["unaudited"]["also-down"] == "unreachable (timed out after 10s)"

    root = ET.fromstring(read(out, "junit.xml").encode("utf-8"))
    assert [s.get("name") for s in root.findall("testsuite")] == ["also-down", "broken", "down"]
    assert (root.get("tests"), root.get("errors"), root.get("failures")) == ("3", "3", "0")
    errors = {s.get("name"): s.find("testcase/error") for s in root.findall("testsuite")}
    assert errors["broken"].get("message") == "could not be audited: " + FAILED["msg"]
    assert errors["down"].get("message") == "could not be audited: unreachable (%s)" % SSH

    page = parse_html(read(out, "audit.html"))
    assert [i for i in page.ids if i.startswith("host-")] == ["host-also-down", "host-broken", "host-down"]
    text = "".join(page.text)
    assert "could not be audited: " + FAILED["msg"] in text

    lines = read(out, "summary.txt").splitlines()
    assert lines[-1] == "3 hosts, 0 failing: none; 3 could not be audited: also-down, broken, down"
    assert "could not be audited: unreachable (timed out after 10s)" in lines[1]  # one line, whitespace folded


def _columns(header):
    """End offsets of the count columns and the start of the last column of the table's header."""
    ends = [m.end() for m in re.finditer(r"\S+", header)]
    return ends[1:7], header.index("FAILING")


def test_the_table_keeps_its_columns_for_a_host_that_could_not_be_audited(tmp_path):
    audits = {"pve-gpu01": facts_result("pve-gpu01"), "pve-gpu02": facts_result("pve-gpu02"),
              "a-long-host-name-that-was-down": UNREACHABLE, "broken": FAILED}
    text = write(tmp_path, audits)["summary_text"]
    lines = text.splitlines()
    ends, last = _columns(lines[0])
    rows = lines[1:5]
    assert [r.split()[0] for r in rows] == sorted(audits)
    for row in rows:
        cells = [row[end - 7:end].strip() for end in ends]
        assert all(re.fullmatch(r"\d+|-", c) for c in cells), row  # each count right-aligned under its header
        assert row[last - 2:last] == "  " and row[last] != " ", row  # the last column starts under FAILING
    unaudited = {r.split()[0]: r for r in rows if "could not be audited" in r}
    assert set(unaudited) == {"a-long-host-name-that-was-down", "broken"}
    for name, row in unaudited.items():
        assert [row[end - 7:end].strip() for end in ends] == ["-"] * 6
        assert row[last:] == "could not be audited: %s" % report.unaudited_reason(report.entry_from_audit(
            name, audits[name]))


# -- the action plugin and the module -----------------------------------------------------------------
def _action_plugin():
    path = os.path.join(TOP, "action_plugins", "pvetune_report.py")
    spec = importlib.util.spec_from_file_location("pvetune_report_action", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_action(args, check_mode=False):
    plugin = _action_plugin()
    task = types.SimpleNamespace(args=args, check_mode=check_mode, diff=False, async_val=0, action="pvetune_report")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir="/nonexistent"))
    action = plugin.ActionModule(task, connection, play_context=None, loader=None, templar=None,
                                 shared_loader_obj=None)
    return action.run(task_vars={})


def test_action_plugin_returns_the_verdicts(tmp_path):
    audits = {"pve-gpu01": facts_result("pve-gpu01"), "pve-gpu02": facts_result("pve-gpu02"), "down": UNREACHABLE}
    out = run_action({"hosts": sorted(audits), "audits": audits, "dest": str(tmp_path / "r"),
                      "run": {"inventory": ["inventory/demo"]}, "junit_warn_as_failure": "yes"})
    assert not out.get("failed"), out.get("msg")
    assert out["failing_hosts"] == ["pve-gpu01"] and out["failed_hosts"] == ["down", "pve-gpu01"]
    assert out["unaudited"] == {"down": "unreachable (%s)" % SSH}
    assert out["host_verdicts"] == {"down": "unaudited", "pve-gpu01": "fail", "pve-gpu02": "pass"}
    assert out["fleet_failed"] is True
    # "yes" is a bool to the plugin as to the module's type=bool: pcie.link's warn became a JUnit failure.
    root = ET.parse(os.path.join(out["report_dir"], "junit.xml")).getroot()
    assert root.find("testsuite[@name='pve-gpu01']/testcase[@name='pcie.link']/failure").get("type") == "warn"


@pytest.mark.parametrize("args,msg", [
    ({"junit_warn_as_failure": "sometimes"}, "argument 'junit_warn_as_failure' is of type str and we were unable to "
                                             "convert to bool"),
    ({"surprise": 1}, "Unsupported parameters: surprise. Supported parameters include: audits, dest"),
])
def test_action_plugin_rejects_bad_arguments(tmp_path, args, msg):
    out = run_action(dict({"hosts": ["h"], "dest": str(tmp_path / "r")}, **args))
    assert out["failed"] is True and msg in out["msg"]
    assert not (tmp_path / "r").exists()


def test_action_plugin_takes_the_module_options():
    from conftest import load_library_module

    assert _action_plugin().ARGUMENT_SPEC is load_library_module("pvetune_report").ARGUMENT_SPEC


def test_module_returns_the_verdicts(tmp_path):
    audits = {"pve-gpu02": facts_result("pve-gpu02"), "broken": FAILED}
    out = run_module("pvetune_report", {"hosts": sorted(audits), "audits": audits, "dest": str(tmp_path / "r"),
                                        "timestamp": "20261129T200652Z"})
    assert not out.get("failed"), out.get("msg")
    assert out["host_verdicts"] == {"broken": "unaudited", "pve-gpu02": "pass"}
    assert out["unaudited_hosts"] == out["failed_hosts"] == ["broken"] and out["fleet_failed"] is True
    junit = ET.parse(os.path.join(out["report_dir"], "junit.xml")).getroot()
    assert junit.find("testsuite[@name='pve-gpu02']/testcase[@name='pcie.link']/failure") is None


def test_html_header_counts_both(tmp_path):
    out = write(tmp_path, {"pve-gpu01": facts_result("pve-gpu01"), "down": UNREACHABLE})
    page = parse_html(read(out, "audit.html"))
    (header,) = [attrs for tag, attrs, inside in page.elements if tag == "p" and inside[-1][0] == "header"]
    assert text_of(header) == ("%s · 2 hosts · 1 failing (severity ≥ high) · 1 could not be audited · schema v1"
                               % GENERATED_AT)
