"""pvetune_hosts, pvetune_serial and pvetune_batch from the inventory: play keywords never see them (templated
before any host is known, from -e only) while the tasks do. The run check (its action plugin tells -e from
group_vars/all) refuses an inventory pvetune_hosts and warns of an inventory serial or batch; given with -e,
nothing is said. Only the first play runs (the run check touches no host)."""
import json
import os
import subprocess

import yaml
from conftest import TOP, run_playbook

ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(TOP, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_LOCALHOST_WARNING="false")
LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
WARNED = "in the inventory, but not given with -e"
FIRST_PLAY = "Check the run before any host is touched"
REFUSAL_PLAY = "Refuse the run (hosts only when the run check refused it)"


def scratch(tmp_path, group_vars=None, host_vars=None):
    """An inventory of pve-a, pve-b in gpu_hosts, with group_vars/all.yml and host_vars/pve-a.yml."""
    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "host_vars").mkdir()
    (inv / "hosts.yml").write_text(yaml.safe_dump(
        {"all": {"children": {"gpu_hosts": {"hosts": {"pve-a": LOCAL, "pve-b": LOCAL}}}}}))
    (inv / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars or {}))
    (inv / "host_vars" / "pve-a.yml").write_text(yaml.safe_dump(host_vars or {}))
    return str(inv)


def first_play(tmp_path, playbook):
    """The playbook's run check (its first entry imports playbooks/shared/run_check.yml), as it is, on its own."""
    with open(os.path.join(TOP, "playbooks", playbook)) as handle:
        entry = yaml.safe_load(handle)[0]
    assert entry["name"].startswith(FIRST_PLAY) and entry["ansible.builtin.import_playbook"] == "shared/run_check.yml"
    path = tmp_path / ("first-" + playbook)
    path.write_text(yaml.safe_dump([{"ansible.builtin.import_playbook": os.path.join(TOP, "playbooks", "shared",
                                                                                     "run_check.yml"),
                                     "vars": entry["vars"]}]))
    return str(path)


def ansible_playbook(*args):
    proc = subprocess.run(["ansible-playbook"] + list(args), cwd=TOP, env=ENV, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return " ".join(proc.stdout.split())  # the warnings come wrapped


def test_inventory_serial_and_batch_are_warned_of_and_not_when_given_with_e(tmp_path):
    inv = scratch(tmp_path, group_vars={"pvetune_batch": 10}, host_vars={"pvetune_serial": 5})
    play = first_play(tmp_path, "fix.yml")
    out = ansible_playbook("-i", inv, play)
    assert out.count(WARNED) == 2, out[-3000:]
    assert ("pvetune_batch is 10 (hosts pve-a, pve-b, localhost) in the inventory, but not given with -e: play "
            "keywords are templated before any host is known, from the extra vars only, so fix.yml's batch play "
            "keeps serial 1 (one host at a time), though its sorting play reads the inventory's value and sends the "
            "hosts needing no reboot to it. Give it with -e pvetune_batch=10") in out
    assert ("pvetune_serial is 5 (host pve-a) in the inventory, but not given with -e: play keywords are templated "
            "before any host is known, from the extra vars only, so fix.yml's rolling play keeps serial 1") in out
    out = ansible_playbook("-i", inv, play, "-e", "pvetune_batch=10", "-e", json.dumps({"pvetune_serial": 5}))
    assert WARNED not in out and "failed=0" in out, out[-3000:]


def test_an_inventory_host_pattern_refuses_the_run_and_one_given_with_e_does_not(tmp_path):
    pattern = "gpu_hosts:!pve-b"
    inv = scratch(tmp_path, group_vars={"pvetune_hosts": pattern})
    run = run_playbook(tmp_path / "refused", "rollback.yml", inventory=inv)
    assert run.rc != 0
    msgs = [e["res"].get("msg", "") for e in run.results(event="runner_on_failed")]
    assert any(m.startswith('pvetune refuses this run: pvetune_hosts is "%s" (hosts pve-a, localhost, pve-b) in '
                            "the inventory, but not given with -e" % pattern)
               and "rollback.yml's plays act on gpu_hosts" in m and "-e 'pvetune_hosts=%s'" % pattern in m
               for m in msgs), msgs
    plays = [e["event_data"]["play"] for e in run.events if e.get("event") == "playbook_on_play_start"]
    assert plays == [FIRST_PLAY, REFUSAL_PLAY], plays  # refused before the play that acts on the hosts
    # ansible-runner gives extra vars as -e @file: the same names to the run check
    run = run_playbook(tmp_path / "given", first_play(tmp_path, "rollback.yml"), inventory=inv,
                       extravars={"pvetune_hosts": pattern})
    assert run.rc == 0 and WARNED not in run.stdout, run.stdout[-3000:]
    assert run.results("Check the hosts, tags, run id and policies of this run")[0]["res"]["hosts"] == ["pve-a"]
