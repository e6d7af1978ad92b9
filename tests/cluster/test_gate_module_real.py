"""The cluster gate module itself (library/pvetune_cluster_gate.py) run through Ansible on the real corosync lab.

Each call is a real ``ansible-playbook`` over the containers.podman.podman connection (the harness's inventory, the
project's ansible.cfg so library/ and module_utils/ are found, the json stdout callback for the module's result),
root "/", live inside the node containers: the module reads /etc/pve/corosync.conf (the harness writes it) and asks
the real ``corosync-quorumtool -s``.  The containers have no ha-manager, pct, qm or ceph, so HA, guests and Ceph are
absent; pmxcfs is absent too, and its /etc/pve/.members is written the way pmxcfs shows it where rejoin needs it.
"""
import itertools
import json
import os
import re
import subprocess
import sys
import time

import corosync_lab
import pytest

TOP = corosync_lab.TOP
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
STATE_FILE = "/var/lib/pvetune/cluster-gate.json"
MODULE_PROCESS = "AnsiballZ_pvetune_cluster_gate"
_RUN_NUMBER = itertools.count(1)


def _playbook(inventory, tmp_path, steps):
    """Files and command for one ansible-playbook run: one gate task per step, ``steps`` = [(hosts, args)].
    Failing tasks are ignored so that every step reports; the caller asserts on ``failed``."""
    work = tmp_path / ("run-%d" % next(_RUN_NUMBER))
    work.mkdir()
    hosts = sorted({h for step_hosts, _args in steps for h in step_hosts})
    tasks = [{"name": "gate step %d" % i, "pvetune_cluster_gate": args, "ignore_errors": True,
              "when": "inventory_hostname in %s" % json.dumps(step_hosts)}
             for i, (step_hosts, args) in enumerate(steps)]
    (work / "inventory.json").write_text(json.dumps(inventory))
    (work / "play.yml").write_text(json.dumps([{"hosts": ",".join(hosts), "gather_facts": False,
                                                "tasks": tasks}]))
    env = corosync_lab.CorosyncCluster.ansible_env()
    env.update(ANSIBLE_CONFIG=os.path.join(TOP, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_LOCAL_TEMP=str(work / "tmp"), ANSIBLE_RETRY_FILES_ENABLED="false")
    argv = [ANSIBLE_PLAYBOOK, "-i", str(work / "inventory.json"), str(work / "play.yml")]
    return argv, env


def _results(proc_out, proc_err, steps):
    """[{host: module result}] per step, from the json callback's output."""
    try:
        report = json.loads(proc_out)
    except ValueError:
        pytest.fail("ansible-playbook gave no JSON report:\n%s\n%s" % (proc_out[-2000:], proc_err[-2000:]))
    tasks = report["plays"][0]["tasks"]
    assert len(tasks) == len(steps), (proc_out[-3000:], proc_err[-2000:])
    out = []
    for task, (step_hosts, _args) in zip(tasks, steps):
        results = {h: task["hosts"][h] for h in step_hosts}
        for host, result in results.items():
            assert not result.get("unreachable") and not result.get("skipped"), (host, result, proc_err[-2000:])
            assert "actions" in result, ("not the module's result", host, result)
        out.append(results)
    return out


def run_gate(inventory, tmp_path, steps, timeout=300):
    argv, env = _playbook(inventory, tmp_path, steps)
    proc = subprocess.run(argv, cwd=TOP, env=env, timeout=timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)
    return _results(proc.stdout, proc.stderr, steps)


def gate(lab, tmp_path, *steps):
    """Run the steps on ``lab``'s nodes; a step is (host or [hosts], module args)."""
    steps = [([hosts] if isinstance(hosts, str) else list(hosts), args) for hosts, args in steps]
    return run_gate(lab.ansible_inventory(), tmp_path, steps)


def exists(lab, node, path):
    return lab.exec(node, ["test", "-e", path])[0] == 0


def write_members(lab, node):
    """/etc/pve/.members as pmxcfs shows it on ``node`` (every node online, quorate) and /etc/pve/nodes/<node>/."""
    members = {"nodename": node, "version": 5,
               "cluster": {"name": lab.cluster_name, "version": 1, "nodes": len(lab.nodes), "quorate": 1},
               "nodelist": {n: {"id": lab.nodeid[n], "online": 1, "ip": lab.address[n]} for n in lab.nodes}}
    lab.write_file(node, "/etc/pve/.members", json.dumps(members, indent=1) + "\n", mode="0440")
    lab.sh(node, "mkdir -p /etc/pve/nodes/%s" % node)


def remove_members(lab, node):
    lab.sh(node, "rm -rf /etc/pve/.members /etc/pve/nodes %s" % STATE_FILE)


def test_all_up_every_node_may_reboot(corosync_cluster, tmp_path):
    lab = corosync_cluster
    # Case 1 on every node, case 3 (another node of the batch counts as gone) on node1, in one run.
    every, leaving = gate(lab, tmp_path, (lab.nodes, {"state": "check"}),
                          ("node1", {"state": "check", "leaving": ["node2"]}))
    for node in lab.nodes:
        result = every[node]
        cluster = result["cluster"]
        assert not result.get("failed") and not result["changed"] and result["actions"] == [], result
        assert cluster["allowed"] and cluster["refusals"] == [], result
        assert (cluster["node"], cluster["cluster_name"], cluster["standalone"]) == (node, lab.cluster_name, False)
        assert (cluster["quorum"]["votes_after"], cluster["quorum"]["quorum"]) == (2, 2), cluster["quorum"]
        assert cluster["counted_gone"] == [] and cluster["plan"] == [] and cluster["ceph"] is None
        assert cluster["guests"] == [] and cluster["ha_services_on_node"] == []
        assert result["msg"].startswith("%s may reboot: 2 votes stay (3 now, 1 of its own), quorum 2" % node)
    result = leaving["node1"]
    cluster = result["cluster"]
    assert not result.get("failed") and not cluster["allowed"], result
    assert cluster["counted_gone"] == ["node2"] and cluster["quorum"]["votes_after"] == 1, cluster
    assert "and 1 of node(s) 2 counted as gone" in result["msg"] and "quorum of 2" in result["msg"], result["msg"]


def test_one_node_down_check_refuses_and_enter_fails_without_a_trace(corosync_cluster, tmp_path):
    lab = corosync_cluster
    lab.stop("node3")
    try:
        check, enter = gate(lab, tmp_path, ("node1", {"state": "check"}),
                            ("node1", {"state": "enter", "run_id": "t1"}))
    finally:
        lab.ensure_all_up()
    result = check["node1"]
    assert not result.get("failed") and not result["cluster"]["allowed"], result
    assert "would leave 1 votes" in result["msg"] and "quorum of 2" in result["msg"], result["msg"]
    assert result["cluster"]["quorum"]["votes_after"] == 1 and result["cluster"]["counted_gone"] == []
    result = enter["node1"]
    assert result["failed"] and not result["changed"] and result["actions"] == [], result
    assert "would leave 1 votes" in result["msg"] and "quorum of 2" in result["msg"], result["msg"]
    assert result["cluster"]["refusals"] == [check["node1"]["cluster"]["quorum"]["reason"]]
    assert not exists(lab, "node1", STATE_FILE), "a refused enter must leave no record"


def test_enter_rejoin_release_wait_for_pmxcfs(corosync_cluster, tmp_path):
    lab = corosync_cluster
    try:
        enter, early = gate(lab, tmp_path, ("node1", {"state": "enter", "run_id": "t2"}),
                            ("node1", {"state": "rejoin", "run_id": "t2", "timeout": 3, "poll": 1}))
        result = enter["node1"]
        assert not result.get("failed") and result["cluster"]["allowed"], result
        assert result["actions"] == [] and not result["changed"], result      # no HA, no Ceph: nothing to do
        # No pmxcfs in the containers: rejoin sees the quorum, then waits for .members and gives up naming it.
        result = early["node1"]
        assert result["failed"], result
        assert "waited 3 s for pmxcfs to serve a writable /etc/pve" in result["msg"], result["msg"]
        assert "/etc/pve/.members missing" in result["msg"], result["msg"]
        write_members(lab, "node1")
        rejoin, release = gate(lab, tmp_path, ("node1", {"state": "rejoin", "run_id": "t2", "timeout": 30,
                                                         "poll": 1}),
                               ("node1", {"state": "release", "run_id": "t2"}))
        result = rejoin["node1"]
        assert not result.get("failed") and not result["changed"], result
        assert result["actions"][0].startswith("in the quorum again: quorate True, 3 of 3 votes"), result["actions"]
        assert result["actions"][1:] == ["pmxcfs serves /etc/pve and takes writes"], result["actions"]
        assert result["msg"] == "back in the cluster"
        assert not exists(lab, "node1", "/etc/pve/nodes/node1/.pvetune-write-probe"), "the write probe stays"
        result = release["node1"]
        assert not result.get("failed") and result["actions"] == [] and not result["changed"], result
        assert result["msg"] == "nothing to release"
        assert not exists(lab, "node1", STATE_FILE)
    finally:
        remove_members(lab, "node1")


def test_rejoin_waits_until_the_node_is_back_in_the_quorum(corosync_cluster, tmp_path):
    lab = corosync_cluster
    write_members(lab, "node1")
    proc = None
    try:
        lab.stop("node1")            # corosync down on the node that runs rejoin: quorumtool cannot answer
        steps = [(["node1"], {"state": "rejoin", "run_id": "t3", "timeout": 90, "poll": 1})]
        argv, env = _playbook(lab.ansible_inventory(), tmp_path, steps)
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, cwd=TOP, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True)
        # The module is running in node1 (not still on its way there) and keeps waiting while corosync is down.
        deadline = time.monotonic() + 60
        while lab.exec("node1", ["pgrep", "-f", MODULE_PROCESS])[0] != 0:
            assert proc.poll() is None, "ansible-playbook ended before rejoin could wait: %s" % (
                proc.communicate()[0][-3000:],)
            assert time.monotonic() < deadline, "the module never started in node1"
            time.sleep(0.2)
        time.sleep(3)
        assert proc.poll() is None, "rejoin returned while corosync was down: %s" % (proc.communicate()[0][-3000:],)
        started = time.monotonic() - t0
        lab.start("node1")
        out, err = proc.communicate(timeout=120)
        elapsed = time.monotonic() - t0
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        lab.ensure_all_up()
        remove_members(lab, "node1")
    result = _results(out, err, steps)[0]["node1"]
    assert not result.get("failed"), result
    # Quorate with 2 or 3 of the 3 votes: knet may bring node1's links to the others up one after the other.
    assert re.match(r"in the quorum again: quorate True, [23] of 3 votes, local node id 1\Z", result["actions"][0]), \
        result["actions"]
    assert result["actions"][1] == "pmxcfs serves /etc/pve and takes writes"
    assert elapsed >= started >= 3, (elapsed, started)


def test_qdevice_votes_decide(corosync_qdevice_cluster, tmp_path):
    lab = corosync_qdevice_cluster
    result = gate(lab, tmp_path, ("node1", {"state": "check"}))[0]["node1"]
    cluster = result["cluster"]
    assert not result.get("failed") and cluster["allowed"], result
    assert (cluster["node"], cluster["cluster_name"]) == ("node1", lab.cluster_name)
    assert (cluster["quorum"]["votes_after"], cluster["quorum"]["quorum"]) == (2, 2), cluster["quorum"]
    lab.stop_qnetd()
    try:
        result = gate(lab, tmp_path, ("node1", {"state": "check"}))[0]["node1"]
    finally:
        lab.ensure_all_up()            # start_qnetd waits until the nodes count its vote again
    cluster = result["cluster"]
    assert not result.get("failed") and not cluster["allowed"], result
    assert cluster["quorum"]["votes_after"] == 1 and "would leave 1 votes" in result["msg"], result["msg"]


@pytest.fixture
def standalone_host():
    """A fresh container from the lab's image (no corosync.conf anywhere), not part of any cluster."""
    name = "%s%d-standalone" % (corosync_lab.PREFIX, os.getpid())
    corosync_lab.podman("rm", "-f", "-i", "-t", "0", name, check=False)
    corosync_lab.podman("run", "-d", "--name", name, "--hostname", "pve-solo", "--label", corosync_lab.LABEL,
                        "--label", "%s=%d" % (corosync_lab.OWNER_LABEL, os.getpid()), "--restart=no",
                        corosync_lab.IMAGE, "sleep", "infinity")
    try:
        yield name
    finally:
        corosync_lab.podman("rm", "-f", "-i", "-t", "0", name, check=False)


def test_standalone_host_passes(standalone_host, tmp_path):
    inventory = {"all": {"hosts": {"solo": {"ansible_connection": "containers.podman.podman",
                                            "ansible_host": standalone_host,
                                            "ansible_python_interpreter": "/usr/bin/python3"}}}}
    check, rejoin = run_gate(inventory, tmp_path, [(["solo"], {"state": "check"}),
                                                   (["solo"], {"state": "rejoin", "run_id": "t4"})])
    result = check["solo"]
    cluster = result["cluster"]
    assert not result.get("failed") and cluster["allowed"], result
    assert (cluster["standalone"], cluster["cluster_name"], cluster["node"]) == (True, None, "pve-solo"), cluster
    assert cluster["quorum"]["votes_after"] is None and "standalone host" in result["msg"], result["msg"]
    result = rejoin["solo"]
    assert not result.get("failed") and result["actions"] == ["standalone host: no quorum to wait for"], result
