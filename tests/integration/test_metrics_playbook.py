"""Monitoring: the scheduled audit's runner (contrib/systemd/pvetune-audit-run) auditing scratch copies of two
demo hosts, the fleet's pvetune.prom, and metrics.yml exporting each host's own metrics into its node_exporter
textfile directory (check/diff, the write, idempotence, a host the report does not have). Every file is checked
with the real ``promtool check metrics``.

The tests run in order on one module-scoped fleet (test_1 writes the report the others export).
"""
import json
import os
import subprocess
import sys

import pytest
from conftest import TOP, run_playbook, tree_digest
from promtool import promtool_check
from scratch_host import make_scratch
from treeinventory import write_inventory

from ansible.module_utils.pvetune.report.metrics import render_metrics

HOSTS = ("pve-gpu03", "pve-gpu04")   # pending a reboot; failing (ACS, CT driver)
TEXTFILE_DIR = "var/lib/prometheus/node-exporter"
RUNNER = os.path.join(TOP, "contrib", "systemd", "pvetune-audit-run")
EXPORT_TASK = "Write this host's metrics into its node_exporter textfile directory"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    base = tmp_path_factory.mktemp("metrics")
    roots = {}
    for host in HOSTS:
        roots[host] = make_scratch(host, str(base / host))
        os.makedirs(os.path.join(roots[host], TEXTFILE_DIR))   # what prometheus-node-exporter's package creates
    inventory = write_inventory(str(base / "inventory.yml"), roots)
    return {"base": base, "roots": roots, "inventory": inventory, "reports": str(base / "reports")}


def textfile(fleet, host):
    return os.path.join(fleet["roots"][host], TEXTFILE_DIR, "pvetune.prom")


def digests(fleet):
    return {h: tree_digest(fleet["roots"][h]) for h in HOSTS}


def runner(fleet, **env):
    full = dict(os.environ, PVETUNE_CHECKOUT=TOP, PVETUNE_INVENTORY=fleet["inventory"],
                PVETUNE_REPORT_DIR=fleet["reports"], PVETUNE_VENV=os.path.dirname(os.path.dirname(sys.executable)))
    full.update(env)
    return subprocess.run(["/bin/bash", RUNNER], env=full, capture_output=True, text=True, timeout=600, check=False)


def test_1_the_scheduled_runner_audits_and_the_fleet_file_passes_promtool(fleet):
    before = digests(fleet)
    proc = runner(fleet)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-2000:]   # pve-gpu04 fails: a finding
    assert "ansible-playbook -i %s -e pvetune_report_dir=%s audit.yml" % (fleet["inventory"], fleet["reports"]) \
        in proc.stdout and "metrics.yml" not in proc.stdout
    latest = os.path.join(fleet["reports"], "latest")
    with open(os.path.join(latest, "pvetune.prom")) as handle:
        text = handle.read()
    rc, out = promtool_check(text)
    assert rc == 0 and out == "", out
    assert 'pvetune_host_verdict{host="pve-gpu04",verdict="fail",fail_on="high"} 1' in text
    assert 'pvetune_host_pending_reboot{host="pve-gpu03"} 1' in text
    assert 'pvetune_check_status{host="pve-gpu04",check="pcie.acs",severity="high",status="fail"} 1' in text
    assert digests(fleet) == before            # the audit is read-only on the hosts, the metrics too
    assert not any(os.path.exists(textfile(fleet, h)) for h in HOSTS)


def test_2_check_diff_shows_each_hosts_file_and_writes_nothing(fleet, tmp_path):
    before = digests(fleet)
    run = run_playbook(tmp_path, "metrics.yml", inventory=fleet["inventory"], cmdline="--check --diff",
                       extravars={"pvetune_report_dir": fleet["reports"]})
    assert run.rc == 0, run.stdout[-3000:]
    results = {e["host"]: e["res"] for e in run.results(EXPORT_TASK)}
    assert sorted(results) == list(HOSTS) and all(r["changed"] for r in results.values())
    diff = results["pve-gpu04"]["diff"]
    diff = diff[0] if isinstance(diff, list) else diff
    assert diff["before_header"] == "/var/lib/prometheus/node-exporter/pvetune.prom (absent)"
    assert 'pvetune_check_status{host="pve-gpu04",check="pcie.acs",severity="high",status="fail"} 1' in diff["after"]
    assert 'host="pve-gpu03"' not in diff["after"]
    assert digests(fleet) == before


def test_3_export_writes_each_hosts_own_metrics_once(fleet, tmp_path):
    run = run_playbook(tmp_path / "a", "metrics.yml", inventory=fleet["inventory"],
                       extravars={"pvetune_report_dir": fleet["reports"]})
    assert run.rc == 0, run.stdout[-3000:]
    with open(os.path.join(fleet["reports"], "latest", "audit.json")) as handle:
        doc = json.load(handle)
    for host in HOSTS:
        with open(textfile(fleet, host)) as handle:
            text = handle.read()
        assert text == render_metrics(doc, [host])
        rc, out = promtool_check(text)
        assert rc == 0 and out == "", out
        assert os.listdir(os.path.dirname(textfile(fleet, host))) == ["pvetune.prom"]
        assert oct(os.stat(textfile(fleet, host)).st_mode & 0o777) == "0o644"
    again = run_playbook(tmp_path / "b", "metrics.yml", inventory=fleet["inventory"],
                         extravars={"pvetune_report_dir": fleet["reports"]})
    assert again.rc == 0 and sum(again.stats()["changed"].values()) == 0, again.stats()


def test_4_a_host_the_report_does_not_have_fails_by_name(fleet, tmp_path):
    with open(os.path.join(fleet["reports"], "latest", "audit.json")) as handle:
        doc = json.load(handle)
    doc["hosts"] = [h for h in doc["hosts"] if h["host"] == "pve-gpu03"]
    partial = tmp_path / "audit.json"
    partial.write_text(json.dumps(doc))
    run = run_playbook(tmp_path, "metrics.yml", inventory=fleet["inventory"],
                       extravars={"pvetune_metrics_report": str(partial)})
    assert run.rc == 2, run.stdout[-3000:]
    failed = run.results(event="runner_on_failed")
    assert [(e["host"], e["task"]) for e in failed] == [("pve-gpu04", "Fail the hosts the report does not have")]
    assert failed[0]["res"]["msg"].startswith("pve-gpu04 is not in %s (audited " % partial)
    assert run.results(EXPORT_TASK, host="pve-gpu03")


def test_5_the_runner_refuses_a_bad_configuration_before_running_anything(fleet):
    for env, message in (({"PVETUNE_CHECKOUT": ""}, "PVETUNE_CHECKOUT is not set"),
                         ({"PVETUNE_INVENTORY": "/nonexistent"}, "PVETUNE_INVENTORY=/nonexistent does not exist"),
                         ({"PVETUNE_REPORT_DIR": "/tmp/a b"}, "must be an absolute path of letters"),
                         ({"PVETUNE_EXPORT_METRICS": "maybe"}, "must be yes or no")):
        proc = runner(fleet, **env)
        assert proc.returncode == 1 and message in proc.stderr, (env, proc.stderr)
        assert "ansible-playbook" not in proc.stdout
