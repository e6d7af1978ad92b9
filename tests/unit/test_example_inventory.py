"""inventory/example, the production inventory README points operators at, is valid: Ansible loads it, the
playbooks find its hosts, every host's pvetune_policy passes the run check's own validation (core/runcheck.py), and
the run check itself (the first play of the playbooks, role pvetune_run_check with its argument spec) accepts it
without touching a host."""
import json
import os
import subprocess

import pytest
import yaml
from ansible.module_utils.pvetune.core.runcheck import check_policies

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INVENTORY = os.path.join(TOP, "inventory", "example")
HOSTS = ["pve-lab1", "pve-llm1", "pve-llm2", "pve-llm3", "pve-train1", "pve-train2"]
ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(TOP, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_LOCALHOST_WARNING="false")


def ansible(tool, *args):
    proc = subprocess.run([tool] + list(args), cwd=TOP, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def inventory():
    return json.loads(ansible("ansible-inventory", "-i", INVENTORY, "--list"))


def test_ansible_loads_the_groups_and_hosts(inventory):
    assert inventory["gpu_hosts"]["children"] == ["pve_llm", "pve_train", "pve_standalone"]
    assert sorted(inventory["_meta"]["hostvars"]) == HOSTS


def test_every_host_policy_passes_the_run_check_validation(inventory):
    hostvars = inventory["_meta"]["hostvars"]
    policies = {host: hostvars[host]["pvetune_policy"] for host in HOSTS}
    assert check_policies(policies) == ({}, "")
    # The validation can fail here: a policy with one bad value is refused by its variable's name.
    bad, message = check_policies(dict(policies, **{"pve-lab1": dict(policies["pve-lab1"], pcie_mrrs=3000)}))
    assert list(bad) == ["pve-lab1"] and "pvetune_policy.pcie_mrrs" in message


def test_group_precedence_is_what_the_comments_say(inventory):
    hostvars = inventory["_meta"]["hostvars"]
    # pve_llm's policy replaces the fleet's as a whole, so it must carry every fleet key with the fleet's value.
    with open(os.path.join(INVENTORY, "group_vars", "gpu_hosts.yml")) as handle:
        fleet = yaml.safe_load(handle)["pvetune_policy"]
    for host in HOSTS:
        policy = hostvars[host]["pvetune_policy"]
        assert {k: policy.get(k) for k in fleet} == fleet, host
        assert policy.get("pcie_acs_fix", False) is host.startswith("pve-llm")
    assert {h: hostvars[h]["ansible_become"] for h in HOSTS} == {
        "pve-lab1": False, "pve-llm1": False, "pve-llm2": False, "pve-llm3": False, "pve-train1": True,
        "pve-train2": True}
    assert {h: hostvars[h]["pvetune_running_guests"] for h in HOSTS} == dict(dict.fromkeys(HOSTS, "refuse"),
                                                                                **{"pve-lab1": "stop"})
    assert hostvars["pve-train2"]["pvetune_lxc_ctids"] == [201, 202]
    # Play keywords cannot read group_vars: the example must not pretend they do.
    assert not any(k in hostvars[h] for h in HOSTS for k in ("pvetune_serial", "pvetune_batch", "pvetune_hosts"))


def test_the_playbooks_act_on_every_host():
    out = ansible("ansible-playbook", "-i", INVENTORY, "--list-hosts", "audit.yml", "fix.yml", "rollback.yml",
                  "collect.yml")
    plays = {}   # (playbook, pattern) -> hosts, from "playbook: x", "pattern: [...]" and the host lines under it
    for line in out.splitlines():
        if line.startswith("playbook: "):
            playbook = line.split(": ", 1)[1]
        elif line.strip().startswith("pattern: "):
            hosts = plays.setdefault((playbook, line.split(": ", 1)[1]), [])
        elif line.startswith("      ") and line.strip():
            hosts.append(line.strip())
    for playbook in ("audit.yml", "fix.yml", "rollback.yml", "collect.yml"):
        assert sorted(set(plays[(playbook, "['localhost:all']")])) == sorted(HOSTS + ["localhost"])
        if playbook != "audit.yml":  # audit.yml's hosts are the run check's verdict (its act_on): no pattern to list
            assert sorted(plays[(playbook, "['gpu_hosts']")]) == HOSTS


def test_the_run_check_accepts_the_inventory(tmp_path):
    """The first play of fix.yml and of audit.yml, as they are (read from the playbooks), on this inventory: the
    role's argument spec and its module check every host's variables, with the rollout variables given as -e.
    Nothing in those plays connects to a host."""
    plays = []
    for name in ("fix.yml", "audit.yml"):
        with open(os.path.join(TOP, "playbooks", name)) as handle:
            entry = yaml.safe_load(handle)[0]
        assert entry["ansible.builtin.import_playbook"] == "shared/run_check.yml"
        plays.append({"ansible.builtin.import_playbook": os.path.join(TOP, "playbooks", "shared", "run_check.yml"),
                      "vars": entry["vars"]})
    playbook = tmp_path / "run_check.yml"
    playbook.write_text(yaml.safe_dump(plays))
    out = ansible("ansible-playbook", "-i", INVENTORY, str(playbook), "-e",
                  json.dumps({"pvetune_serial": [1, "20%"], "pvetune_batch": "25%", "pvetune_reboot_ok": True}))
    recap = {line.split()[0]: line for line in out.splitlines() if " ok=" in line}
    assert sorted(recap) == ["localhost"]  # once, on the controller; no task for any host (no refusal)
    assert "refuses" not in out and "invalid" not in out, out[-3000:]
    assert all("failed=0" in line and "unreachable=0" in line for line in recap.values()), out[-3000:]
