"""The project as AWX runs it, unchanged: ansible-runner on a private data directory laid out as AWX lays it out
(awx/main/tasks/jobs.py): the project's files in project/, the inventory as the executable script AWX writes
(inventory/hosts prints the inventory as JSON), no ANSIBLE_CONFIG (the project's ansible.cfg is found in the
project directory, the job's working directory). The audit's set_stats data must reach the runner's
playbook_on_stats event as artifact_data: the event AWX stores as the job's artifacts (RunnerCallback.event_handler).
"""
import glob
import json
import os
import shutil
import stat
import subprocess
import sys

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROJECT_FILES = ["ansible.cfg", "audit.yml", "playbooks", "roles", "library", "module_utils", "action_plugins",
                 "callback_plugins", "doc_fragments", "collections/requirements.yml"]
DEMO_VERDICTS = {"pve-gpu01": "fail", "pve-gpu02": "pass", "pve-gpu03": "pass", "pve-gpu04": "fail",
                 "pve-gpu05": "fail"}


def awx_inventory_script(path):
    """The demo fleet the way AWX hands a job its inventory: one executable printing the script JSON, group vars
    flattened into it, each host's pvetune_root absolute (AWX has no inventory_dir of the project's)."""
    with open(os.path.join(TOP, "inventory", "demo", "group_vars", "gpu_hosts.yml"), encoding="utf-8") as handle:
        group_vars = {k: v for k, v in yaml.safe_load(handle).items() if k != "pvetune_root"}
    hosts = sorted(DEMO_VERDICTS)
    data = {"all": {"children": ["ungrouped", "gpu_hosts"]}, "gpu_hosts": {"hosts": hosts, "vars": group_vars},
            "_meta": {"hostvars": {h: {"pvetune_root": os.path.join(TOP, "demo", "snapshots", h)} for h in hosts}}}
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("#! /usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(%r)\n" % json.dumps(data))
    os.chmod(path, stat.S_IRUSR | stat.S_IXUSR | stat.S_IWUSR)


def private_data_dir(base):
    pdd = base / "awx"
    for rel in PROJECT_FILES:
        src, dst = os.path.join(TOP, rel), str(pdd / "project" / rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.isdir(src):
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    (pdd / "inventory").mkdir()
    awx_inventory_script(str(pdd / "inventory" / "hosts"))
    (pdd / "env").mkdir()
    with open(str(pdd / "env" / "envvars"), "w", encoding="utf-8") as handle:
        json.dump({"PATH": os.path.dirname(sys.executable) + ":" + os.environ["PATH"], "ANSIBLE_NOCOLOR": "1"},
                  handle)
    return pdd


def test_audit_under_ansible_runner_in_the_awx_layout(tmp_path, monkeypatch):
    import ansible_runner

    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)  # AWX sets none: the project's is found in its directory
    pdd = private_data_dir(tmp_path)
    result = ansible_runner.run(private_data_dir=str(pdd), playbook="audit.yml", ident="job1", quiet=True)
    stdout = result.stdout.read()
    assert result.rc == 2 and result.status == "failed", stdout[-3000:]  # the demo fleet fails, as it should
    assert "Unable to parse" not in stdout and "pve-gpu04 fails checks" in stdout
    artifacts = pdd / "artifacts" / "job1"
    with open(str(artifacts / "rc"), encoding="utf-8") as handle:
        assert handle.read().strip() == "2"
    stats = []
    for path in glob.glob(str(artifacts / "job_events" / "*.json")):
        with open(path, encoding="utf-8") as handle:
            event = json.load(handle)
        if event.get("event") == "playbook_on_stats":
            stats.append(event["event_data"])
    assert len(stats) == 1
    art = stats[0]["artifact_data"]["pvetune_audit_artifact"]
    assert art["host_verdicts"] == DEMO_VERDICTS
    assert art["fleet_failed"] is True and art["fail_on"] == "high" and art["unaudited"] == {}
    assert "pcie.acs" in art["hosts_failing"]["pve-gpu04"] and "pve-gpu02" not in art["hosts_failing"]
    # The reports are in the job's copy of the project, where the artifact says.
    assert art["report_dir"].startswith(str(pdd / "project" / "reports") + "/")
    assert sorted(os.path.basename(f) for f in art["files"]) == ["audit.html", "audit.json", "junit.xml",
                                                                 "pvetune.prom", "summary.md", "summary.txt"]
    assert all(os.path.isfile(f) for f in art["files"])
    assert "CUSTOM STATS" not in stdout  # ansible.cfg show_custom_stats = False: the screen output stays as it was


def test_the_project_sync_has_no_collection_to_install(tmp_path):
    """What AWX's project update runs on collections/requirements.yml (and would on a top-level requirements.yml,
    which the project does not have)."""
    assert not os.path.exists(os.path.join(TOP, "requirements.yml"))
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-galaxy"), "collection", "install",
                          "-r", os.path.join(TOP, "collections", "requirements.yml"), "-p", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "no requirements found" in out.stdout and os.listdir(str(tmp_path)) == []
