"""audit.yml on the demo fleet, driven through ansible-runner; assertions on events and reports."""
import json
import os
import xml.etree.ElementTree as ET

import demo_fleet
import pytest
from ansible.module_utils.pvetune.core.catalogue import CATALOGUE
from conftest import DEMO_SNAPSHOTS, TOP, run_playbook, tree_digest
from scratch_host import make_scratch
from treeinventory import write_inventory

FACTS_TASK = "Gather and evaluate every pvetune check in one read-only pass"


def statuses(checks):
    return {c["id"]: c["status"] for c in checks}


@pytest.fixture(scope="module")
def demo_audit(tmp_path_factory):
    """audit.yml --diff on the demo fleet, once (test_demo_fleet_audit, and the direct audit the collect test
    compares with), with the snapshot trees' digest from before it."""
    base = tmp_path_factory.mktemp("demo-audit")
    digest = tree_digest(DEMO_SNAPSHOTS)
    run = run_playbook(base, "audit.yml", extravars={"pvetune_report_dir": str(base / "reports")}, cmdline="--diff")
    return run, base / "reports", digest


@pytest.fixture(scope="module")
def broken_hosts_audit(tmp_path_factory):
    """audit.yml on a good host, one whose root is missing and one that is unreachable, once
    (test_unreachable_and_broken_hosts_are_reported_not_hidden and
    test_a_failing_host_charges_no_other read it)."""
    base = tmp_path_factory.mktemp("broken-hosts")
    inv = base / "inv.yml"
    inv.write_text(
        "all:\n  children:\n    gpu_hosts:\n      hosts:\n"
        "        good:\n          ansible_connection: local\n"
        "          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
        "          pvetune_root: %s/pve-gpu02\n"
        "        missing-root:\n          ansible_connection: local\n"
        "          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
        "          pvetune_root: /nonexistent/pvetune\n"
        "        down:\n          ansible_host: 127.0.0.1\n          ansible_port: 9\n"
        "          ansible_user: nobody\n" % DEMO_SNAPSHOTS)
    run = run_playbook(base, "audit.yml", inventory=str(inv),
                       extravars={"pvetune_report_dir": str(base / "r"), "ansible_become": False})
    return run, base / "r"


def test_demo_fleet_audit(demo_audit):
    run, reports, demo_digest = demo_audit
    # Exit status: pve-gpu01, pve-gpu04 (ACS) and pve-gpu05 fail high-severity checks.
    assert run.rc == 2, run.stdout[-2000:]
    assert run.status == "failed"

    # One read-only facts call per host, in check mode, nothing changed.
    facts = run.results(FACTS_TASK)
    assert sorted(e["host"] for e in facts) == ["pve-gpu01", "pve-gpu02", "pve-gpu03", "pve-gpu04", "pve-gpu05"]
    for ev in facts:
        assert ev["res"]["changed"] is False
    stats = run.stats()
    for host in ("pve-gpu01", "pve-gpu02", "pve-gpu03", "pve-gpu04", "pve-gpu05"):
        assert stats["changed"].get(host, 0) == 0  # the reports are written on the controller, not a change
    changed_tasks = [e["task"] for e in run.results() if e["res"].get("changed")]
    assert changed_tasks == []
    # Exactly the failing hosts are marked failed, each by its own task result (issue 15: no run_once charge).
    failed = run.results(event="runner_on_failed")
    name = "Fail the hosts that fail checks at or above the threshold, or could not be audited"
    assert sorted((e["task"], e["host"]) for e in failed) == [(name, "pve-gpu01"), (name, "pve-gpu04"),
                                                               (name, "pve-gpu05")]
    assert "fails checks of severity high or higher: " in failed[0]["res"]["msg"]
    assert {h: n for h, n in stats["failures"].items() if n} == {"pve-gpu01": 1, "pve-gpu04": 1, "pve-gpu05": 1}

    # The snapshot trees are byte-identical before and after.
    assert tree_digest(DEMO_SNAPSHOTS) == demo_digest

    by_host = {e["host"]: statuses(e["res"]["results"]) for e in facts}
    gpu01 = by_host["pve-gpu01"]
    for cid in ("cpu.scaling_driver", "cpu.cstates", "kernel.numa_balancing", "pcie.mrrs", "kernel.version",
                "boot.cmdline", "lxc.gpu_devices"):
        assert gpu01[cid] == "fail", cid
    assert "fail" not in by_host["pve-gpu02"].values()
    assert "error" not in by_host["pve-gpu02"].values()
    assert by_host["pve-gpu03"]["boot.cmdline"] == "pending"
    # The Intel host fails on its own terms (powersave, intel_idle C1E/C6) and is never asked for amd_pstate.
    gpu05 = {e["host"]: e["res"]["results"] for e in facts}["pve-gpu05"]
    # (what demo_fleet.HOSTS builds it to show: the playbook's audit gives exactly that)
    assert statuses(gpu05) == demo_fleet.expected_statuses("pve-gpu05", list(statuses(gpu05)))
    texts = json.dumps(gpu05)
    assert "amd_pstate=active" not in texts and "processor.max_cstate=1" not in texts
    assert "intel_idle.max_cstate=1" in {c["id"]: c for c in gpu05}["boot.cmdline"]["message"]

    # Reports: latest link, JSON schema basics, JUnit, HTML.
    latest = reports / "latest"
    assert latest.is_symlink()
    doc = json.loads((latest / "audit.json").read_text())
    assert doc["schema_version"] == 1
    assert doc["summary"]["failed_hosts"] == ["pve-gpu01", "pve-gpu04", "pve-gpu05"]
    host04 = {c["id"]: c for c in [h for h in doc["hosts"] if h["host"] == "pve-gpu04"][0]["checks"]}
    assert host04["pcie.acs"]["status"] == "fail" and "0000:02:08.0, 0000:02:10.0" in host04["pcie.acs"]["message"]
    assert "affected GPU pairs: 03:00.0-04:00.0" in host04["pcie.acs"]["message"]
    assert host04["pcie.bar1"]["status"] == "warn" and "0000:84:00.0" in host04["pcie.bar1"]["message"]
    assert host04["iommu.mode"]["status"] == "fail"
    host01 = [h for h in doc["hosts"] if h["host"] == "pve-gpu01"][0]
    mrrs = [c for c in host01["checks"] if c["id"] == "pcie.mrrs"][0]
    assert len(mrrs["items"]) == 8
    for item in mrrs["items"]:
        assert item["status"] == "fail" and "MaxReadReq 512" in item["current"]
    for key in ("id", "status", "severity", "current", "expected", "reboot_required", "remediation", "evidence"):
        assert key in mrrs
    junit = ET.parse(str(latest / "junit.xml")).getroot()
    cases = junit.findall(".//testcase")
    assert len(cases) == len(doc["hosts"]) * len(CATALOGUE) == 5 * len(CATALOGUE)
    failures = [c for c in cases if c.find("failure") is not None]
    # a JUnit failure is any failing check, whatever its severity: pve-gpu03's leftover applications clocks (medium)
    assert {c.get("classname") for c in failures} == {"pve-gpu01", "pve-gpu03", "pve-gpu04", "pve-gpu05"}
    html = (latest / "audit.html").read_text()
    # Every host has eight GPUs: one topology matrix each, with the GPUs' model names.
    assert html.count('<table class="topo">') == 5 and ">PIX<" in html
    assert "RTX PRO 6000 Blackwell Server Edition" in html
    assert html.startswith("<!DOCTYPE html>") and "pve-gpu03" in html
    assert html.count("<script") == 1 and "<script src" not in html  # the filter's inline script, nothing fetched
    assert "pve-gpu01" in (latest / "summary.txt").read_text()


def test_check_mode_cannot_be_switched_off(tmp_path):
    """Even with check mode variables, the facts task runs in check mode; and --check still writes the reports
    (controller files, not host state)."""
    run = run_playbook(tmp_path, "audit.yml", limit="pve-gpu02", cmdline="--check",
                       extravars={"pvetune_report_dir": str(tmp_path / "r"), "ansible_check_mode": False})
    assert (tmp_path / "r" / "latest" / "audit.json").is_file()
    facts = run.results(FACTS_TASK)
    assert len(facts) == 1
    assert facts[0]["res"]["invocation"]["module_args"]["root"].endswith("pve-gpu02")
    # pve-gpu02 passes every check: the run succeeds.
    assert run.rc == 0, run.stdout[-2000:]


def test_severity_threshold_decides_the_exit_status(tmp_path):
    run = run_playbook(tmp_path, "audit.yml", limit="pve-gpu03",
                       extravars={"pvetune_report_dir": str(tmp_path / "r")})
    assert run.rc == 0  # pending is not failing
    run = run_playbook(tmp_path, "audit.yml", limit="pve-gpu01",
                       extravars={"pvetune_report_dir": str(tmp_path / "r2"), "pvetune_fail_on": "critical"})
    assert run.rc == 2  # lxc.gpu_devices is critical
    doc = json.loads((tmp_path / "r2" / "latest" / "audit.json").read_text())
    assert doc["hosts"][0]["summary"]["failing"] == ["lxc.gpu_devices"]


def test_unreachable_and_broken_hosts_are_reported_not_hidden(broken_hosts_audit):
    run, reports = broken_hosts_audit
    assert run.rc != 0
    doc = json.loads((reports / "latest" / "audit.json").read_text())
    hosts = {h["host"]: h for h in doc["hosts"]}
    assert hosts["good"]["checks"] and not hosts["good"]["summary"]["failed"]
    assert hosts["missing-root"]["error"] and "not a directory" in hosts["missing-root"]["error"]
    assert hosts["down"]["reachable"] is False and hosts["down"]["summary"]["failed"]
    assert set(doc["summary"]["failed_hosts"]) == {"missing-root", "down"}  # they fail the run
    assert doc["summary"]["failing_hosts"] == []  # but fail no check: they could not be audited
    assert doc["summary"]["unaudited_hosts"] == ["down", "missing-root"]


def test_a_failing_host_charges_no_other(broken_hosts_audit):
    """One unreachable and one unreadable host: exactly they fail; the host that passed shows failed=0.
    (Moved from test_operator_ux.py, which ran the same audit of the same inventory.)"""
    run, _ = broken_hosts_audit
    assert run.rc != 0
    failures = run.stats()["failures"]
    assert failures.get("good", 0) == 0 and failures.get("missing-root") and failures.get("down"), failures
    msgs = [e["res"].get("msg", "") for e in run.results(event="runner_on_failed")]
    assert any("down could not be audited" in m for m in msgs), msgs
    assert not any("good" in m and "could not be audited" in m for m in msgs)


def test_collect_then_audit_the_snapshots_gives_the_same_results(tmp_path, demo_audit):
    snaps = tmp_path / "snaps"
    run = run_playbook(tmp_path, "collect.yml", extravars={"pvetune_snapshot_dir": str(snaps)})
    assert run.rc == 0, run.stdout[-2000:]
    assert (snaps / "inventory.yml").is_file()
    for host in ("pve-gpu01", "pve-gpu02", "pve-gpu03", "pve-gpu04"):
        assert (snaps / (host + ".tar.gz")).is_file()
        assert json.loads((snaps / host / ".pvetune" / "snapshot.json").read_text())["host"] == host
    # The PCIe side travels: the switch ports' config spaces, the GPUs' resource files and IOMMU groups, and only
    # the pci.ids lines of this host's functions.
    gpu04 = snaps / "pve-gpu04"
    assert (gpu04 / "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:08.0/config").stat().st_size == 4096
    assert (gpu04 / "sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:08.0/0000:03:00.0/resource").is_file()
    assert (gpu04 / "sys/kernel/iommu_groups/32/type").read_text() == "DMA\n"
    ids = (gpu04 / "usr/share/misc/pci.ids").read_text()
    assert ids.startswith("# pci.ids lines for this host's functions") and len(ids.splitlines()) == 7
    direct, direct_reports, _ = demo_audit   # the audit of the demo fleet itself (--diff, as this one)
    again = run_playbook(tmp_path, "audit.yml", inventory=str(snaps / "inventory.yml"), cmdline="--diff",
                         extravars={"pvetune_report_dir": str(tmp_path / "b")})
    assert direct.rc == again.rc == 2

    def table(path):
        doc = json.loads((path / "latest" / "audit.json").read_text())
        return {h["host"]: [(c["id"], c["status"], c["current"]) for c in h["checks"]] for h in doc["hosts"]}

    assert table(direct_reports) == table(tmp_path / "b")
    assert os.path.isdir(os.path.join(TOP, "demo", "snapshots", "pve-gpu01"))


def test_drift_between_two_audits_of_a_host_that_changed(tmp_path):
    """Audit a scratch copy of pve-gpu02 (passes everything), turn NUMA balancing back on in its tree, audit it
    again: the second run names the new failure against the first in audit.json, summary.md, audit.html and the
    fleet summary it prints."""
    root = make_scratch("pve-gpu02", str(tmp_path / "pve-gpu02"))
    inventory = write_inventory(tmp_path / "inventory.yml", {"pve-gpu02": root})
    reports = tmp_path / "reports"
    (tmp_path / "first").mkdir()
    first = run_playbook(tmp_path / "first", "audit.yml", inventory=str(inventory),
                         extravars={"pvetune_report_dir": str(reports)})
    assert first.rc == 0, first.stdout[-2000:]
    before = os.path.basename(os.path.realpath(str(reports / "latest")))
    doc = json.loads((reports / "latest" / "audit.json").read_text())
    assert doc["hosts"][0]["drift"]["state"] == "first_audit"

    with open(os.path.join(root, "proc/sys/kernel/numa_balancing"), "w") as handle:
        handle.write("1\n")
    (tmp_path / "second").mkdir()
    second = run_playbook(tmp_path / "second", "audit.yml", inventory=str(inventory),
                          extravars={"pvetune_report_dir": str(reports)})
    assert second.rc == 2, second.stdout[-2000:]  # numa_balancing is high severity
    latest = reports / "latest"
    assert os.path.basename(os.path.realpath(str(latest))) != before
    doc = json.loads((latest / "audit.json").read_text())
    drift = doc["hosts"][0]["drift"]
    assert drift["state"] == "changed" and drift["previous"]["report"] == before
    assert drift["previous"]["verdict"] == "pass"
    assert drift["new_failures"] == [{"id": "kernel.numa_balancing", "was": "pass", "now": "fail"}]
    assert [drift[k] for k in ("fixed", "pending_appeared", "pending_cleared", "other_changes", "new_checks",
                               "gone_checks")] == [[]] * 6
    assert doc["drift"]["changed_hosts"] == ["pve-gpu02"]

    summary_md = (latest / "summary.md").read_text()
    assert "- **pve-gpu02**: 1 failing" in summary_md
    assert "- **pve-gpu02** (since %s): new failures: `kernel.numa_balancing`" % before in summary_md
    fix = [c for c in doc["hosts"][0]["checks"] if c["id"] == "kernel.numa_balancing"][0]["fix_command"]
    assert "  - fix `kernel.numa_balancing`: `%s`" % fix in summary_md

    html = (latest / "audit.html").read_text()
    assert ('<li>new failures: <a href="#check-pve-gpu02::kernel.numa_balancing">kernel.numa_balancing</a> '
            '(pass &rarr; fail)</li>') in html
    assert 'data-host="pve-gpu02" data-verdict="fail" data-drift="changed"' in html

    (msg,) = [e["res"]["msg"] for e in second.results("Fleet summary")]
    assert "  pve-gpu02  new failures: kernel.numa_balancing (since %s)" % before in msg.splitlines()

