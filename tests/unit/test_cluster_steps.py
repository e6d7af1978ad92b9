"""The cluster gate (library/pvetune_cluster_gate.py, module_utils/pvetune/cluster/steps.py) on simulated clusters
of trees (tests/clustertrees.py, tests/standins/cluster-sim): quorum with nodes down and a qdevice, HA maintenance
entered and left, Ceph noout set and cleared, running guests, standalone hosts, check mode, bad input."""
import json
import os

import pytest
from ansible.module_utils.pvetune.formats.corosync_conf import parse_corosync_conf
from ansible.module_utils.pvetune.formats.ha_status import parse_ha_status, services_on
from clustertrees import corosync_conf, make_cluster
from modharness import run_module

NODES = ["pve-a", "pve-b", "pve-c"]


def gate(tree, state="check", check_mode=False, **args):
    params = {"root": str(tree), "state": state, "run_id": "gate-1", "poll": 1, "timeout": 20}
    params.update(args)
    return run_module("pvetune_cluster_gate", params, check_mode=check_mode)


def commands(cluster, node, tool):
    return [c[1:] for c in cluster.calls(node, tool)]


def test_corosync_conf_names_nodes_and_qdevice():
    nodes = [{"name": "pve-a", "nodeid": 1, "votes": 1, "addr": "10.0.0.1"},
             {"name": "pve-b", "nodeid": 2, "votes": 2, "addr": "10.0.0.2"}]
    conf = parse_corosync_conf(corosync_conf("c1", nodes, {"votes": 1}), "/etc/pve/corosync.conf")
    assert conf["cluster_name"] == "c1" and conf["qdevice"] == {"model": "net", "votes": 1}
    assert [(n["name"], n["nodeid"], n["votes"]) for n in conf["nodes"]] == [("pve-a", 1, 1), ("pve-b", 2, 2)]


@pytest.mark.parametrize("text, needle", [
    ("nodelist {\n  node {\n    name: a\n    nodeid: 1\n", "2 section(s) not closed"),
    ("}\n", "line 1: '}' closes no section"),
    ("totem {\n  cluster_name x\n}\n", "line 2: neither"),
    ("nodelist {\n  node {\n    name: a\n    nodeid: one\n  }\n}\n", "nodeid of a is not a number"),
    ("totem {\n}\n", "no nodelist"),
    ("nodelist {\n node {\n name: a\n nodeid: 1\n }\n node {\n name: b\n nodeid: 1\n }\n}\n", "same nodeid"),
])
def test_corosync_conf_refuses_what_corosync_would(text, needle):
    with pytest.raises(ValueError) as err:
        parse_corosync_conf(text, "/etc/pve/corosync.conf")
    assert needle in str(err.value) and "/etc/pve/corosync.conf" in str(err.value)


def test_ha_status_lines():
    status = parse_ha_status("quorum OK\nmaster pve-a (active, Wed Dec  2 12:00:00 2026)\n"
                             "lrm pve-a (maintenance mode, Wed Dec  2 12:00:00 2026)\n"
                             "lrm pve-b (active, Wed Dec  2 12:00:00 2026)\n"
                             "service ct:101 (pve-a, migrate)\nservice vm:300 (pve-a, stopped)\n"
                             "service vm:301 (pve-b, started)\n")
    assert status["quorum_ok"] and status["master"] == {"node": "pve-a", "status": "active"}
    assert status["lrm"] == {"pve-a": "maintenance mode", "pve-b": "active"}
    assert [s["sid"] for s in services_on(status, "pve-a")] == ["ct:101"]
    with pytest.raises(ValueError):
        parse_ha_status("")


def test_three_nodes_one_down_refuses_the_next_reboot(tmp_path):
    cluster = make_cluster(tmp_path, NODES)
    result = gate(cluster.trees["pve-a"])
    assert result["cluster"]["allowed"], result
    assert result["cluster"]["quorum"]["votes_after"] == 2 and result["cluster"]["node"] == "pve-a"
    cluster.set_up("pve-c", False)
    for node in ("pve-a", "pve-b"):
        result = gate(cluster.trees[node], "enter")
        assert result["failed"], result
        assert not result["cluster"]["allowed"]
        assert "would leave 1 votes" in result["msg"] and "quorum of 2" in result["msg"], result["msg"]
        assert all(c == ["status"] for c in commands(cluster, node, "ha-manager")), "nothing changed after a refusal"
    cluster.set_up("pve-c", True)
    assert gate(cluster.trees["pve-a"])["cluster"]["allowed"]


def test_other_nodes_of_the_batch_count_as_gone(tmp_path):
    cluster = make_cluster(tmp_path, NODES + ["pve-d", "pve-e"])
    assert gate(cluster.trees["pve-a"], leaving=["pve-b"])["cluster"]["allowed"]      # 5 - 2 = 3 >= 3
    result = gate(cluster.trees["pve-a"], leaving=["pve-b", "pve-c"])               # 5 - 3 = 2 < 3
    assert not result["cluster"]["allowed"] and result["cluster"]["counted_gone"] == ["pve-b", "pve-c"]
    # A name from another cluster counts nothing.
    assert gate(cluster.trees["pve-a"], leaving=["pve-b", "other-x"])["cluster"]["allowed"]
    assert gate(cluster.trees["pve-a"], leaving=["bad name"])["failed"]


def test_two_nodes_and_a_qdevice(tmp_path):
    cluster = make_cluster(tmp_path, ["pve-a", "pve-b"], qdevice=True)
    result = gate(cluster.trees["pve-a"])
    assert result["cluster"]["allowed"] and result["cluster"]["quorum"]["votes_after"] == 2, result
    state = cluster.state()
    state["qdevice"]["up"] = False
    cluster.write(state)
    result = gate(cluster.trees["pve-a"])
    assert not result["cluster"]["allowed"] and "would leave 1 votes" in result["msg"], result["msg"]


def test_ha_maintenance_entered_waited_and_left(tmp_path):
    cluster = make_cluster(tmp_path, NODES, ha_services=[("vm:300", "pve-a"), ("ct:301", "pve-b")])
    tree = cluster.trees["pve-a"]
    preview = gate(tree, "enter", check_mode=True)
    assert preview["actions"] == ["would: ha-maintenance"] and preview["changed"]
    assert ["crm-command"] not in [c[:1] for c in commands(cluster, "pve-a", "ha-manager")]
    entered = gate(tree, "enter")
    assert not entered.get("failed"), entered
    assert entered["actions"][0] == "ha-manager crm-command node-maintenance enable pve-a"
    assert "still on it: none" in entered["actions"][1]
    state = cluster.state()["ha"]
    assert state["maintenance"] == ["pve-a"] and state["services"][0]["node"] == "pve-c"   # the fewest services
    # While pve-a is in maintenance, pve-b counts it as gone: 3 - 1 - 1 < 2.
    other = gate(cluster.trees["pve-b"])
    assert not other["cluster"]["allowed"] and other["cluster"]["counted_gone"] == ["pve-a"], other
    assert gate(tree, "rejoin")["actions"][:2] == [
        "in the quorum again: quorate True, 3 of 3 votes, local node id 1", "pmxcfs serves /etc/pve and takes writes"]
    released = gate(tree, "release")
    assert released["actions"] == ["ha-manager crm-command node-maintenance disable pve-a"] and released["changed"]
    assert cluster.state()["ha"]["maintenance"] == []
    assert gate(tree, "release")["actions"] == [], "a second release has nothing to undo"
    assert gate(cluster.trees["pve-b"])["cluster"]["allowed"]


def test_ha_services_that_never_leave_fail_the_wait(tmp_path):
    cluster = make_cluster(tmp_path, NODES, ha_services=[("vm:300", "pve-a")])
    state = cluster.state()
    state["ha"]["move_after"] = 1000
    cluster.write(state)
    result = gate(cluster.trees["pve-a"], "enter", timeout=2)
    assert result["failed"] and "waited 2 s for the HA services to leave pve-a" in result["msg"], result["msg"]
    assert "vm:300 (migrate)" in result["msg"]
    # What the failed call did before the failure is in its result, and the message says what is still set.
    assert result["actions"] == ["ha-manager crm-command node-maintenance enable pve-a"] and result["changed"]
    assert result["msg"].endswith("(still in place from this gate: HA maintenance of pve-a)"), result["msg"]
    # The record says maintenance was entered, so release can still undo it.
    assert gate(cluster.trees["pve-a"], "release")["actions"] == [
        "ha-manager crm-command node-maintenance disable pve-a"]


def test_ceph_noout_set_and_cleared_waiting_for_active_clean(tmp_path):
    cluster = make_cluster(tmp_path, NODES, osds={"pve-a": [0, 1], "pve-b": [2, 3], "pve-c": [4, 5]})
    state = cluster.state()
    state["ceph"]["unclean_after_rm_noout"] = 2
    cluster.write(state)
    tree = cluster.trees["pve-a"]
    entered = gate(tree, "enter")
    assert entered["actions"] == ["ceph osd add-noout osd.0 osd.1"], entered
    assert [o["noout"] for o in cluster.state()["ceph"]["osds"]] == [True, True, False, False, False, False]
    assert gate(cluster.trees["pve-b"])["cluster"]["ceph"]["health"] == "HEALTH_WARN"
    rejoined = gate(tree, "rejoin")
    assert rejoined["actions"][2:] == [
        "OSDs up (down: none)", "ceph osd rm-noout osd.0 osd.1",
        "128 of 128 PGs active+clean (active+clean 125, active+clean+scrubbing 3)"], rejoined
    statuses = [c for c in commands(cluster, "pve-a", "ceph") if c[:1] == ["status"]]
    assert len(statuses) == 1 + 3, "one status before, three polls until active+clean"
    assert not any(o["noout"] for o in cluster.state()["ceph"]["osds"])


def test_ceph_not_ok_to_stop_and_old_releases(tmp_path):
    cluster = make_cluster(tmp_path, NODES, osds={"pve-a": [0], "pve-b": [1]})
    state = cluster.state()
    state["ceph"]["not_ok_to_stop"] = [0]
    cluster.write(state)
    result = gate(cluster.trees["pve-a"], "enter")
    assert result["failed"] and "ceph osd ok-to-stop 0 says no: exit 16: Error EBUSY" in result["msg"], result["msg"]
    assert gate(cluster.trees["pve-c"])["cluster"]["ceph"]["osds"] == [], "a node without OSDs"
    state = cluster.state()
    state["ceph"].update(not_ok_to_stop=[], add_noout=False)
    cluster.write(state)
    assert gate(cluster.trees["pve-a"], "enter")["actions"] == ["ceph osd set noout (this release has no add-noout)"]
    assert cluster.state()["ceph"]["global_noout"]
    assert "ceph osd unset noout" in gate(cluster.trees["pve-a"], "rejoin")["actions"]
    assert not cluster.state()["ceph"]["global_noout"]


def test_running_guests(tmp_path):
    cluster = make_cluster(tmp_path, NODES, vms={"400": {"name": "db", "status": "running"},
                                                 "401": {"name": "old", "status": "stopped"}})
    result = gate(cluster.trees["pve-a"], "enter")
    assert result["failed"] and "vm 400 (db)" in result["msg"] and "401" not in result["msg"], result["msg"]
    assert "pvetune_running_guests: stop" in result["msg"]
    assert gate(cluster.trees["pve-a"], running_guests="stop")["cluster"]["allowed"]


def test_standalone_host_passes_and_reads_no_cluster(tmp_path):
    cluster = make_cluster(tmp_path, ["pve-a"])
    tree = cluster.trees["pve-a"]
    os.unlink(os.path.join(tree, "etc", "pve", "corosync.conf"))
    result = gate(tree, "enter")
    assert result["cluster"]["standalone"] and result["cluster"]["allowed"], result
    assert "standalone host" in result["msg"]
    assert not cluster.calls("pve-a", "corosync-quorumtool") and not cluster.calls("pve-a", "ha-manager")
    assert gate(tree, "rejoin")["actions"] == ["standalone host: no quorum to wait for"]


def test_pmxcfs_down_is_not_standalone(tmp_path):
    cluster = make_cluster(tmp_path, NODES)
    tree = cluster.trees["pve-a"]
    os.makedirs(os.path.join(tree, "etc", "corosync"))
    os.rename(os.path.join(tree, "etc", "pve", "corosync.conf"), os.path.join(tree, "etc", "corosync", "corosync.conf"))
    os.unlink(os.path.join(tree, "etc", "pve", ".members"))
    result = gate(tree)
    assert not result["cluster"]["standalone"] and result["cluster"]["node"] == "pve-a"
    rejoin = gate(tree, "rejoin", timeout=1)
    assert rejoin["failed"] and "pmxcfs to serve a writable /etc/pve" in rejoin["msg"], rejoin["msg"]
    assert "/etc/pve/.members missing" in rejoin["msg"]


@pytest.mark.parametrize("breakage, needle", [
    ("conf", "/etc/pve/corosync.conf line 1"),
    ("quorumtool", "corosync-quorumtool -s exited 1"),
    ("state", "/var/lib/pvetune/cluster-gate.json"),
])
def test_bad_input_is_an_error_naming_it(tmp_path, breakage, needle):
    cluster = make_cluster(tmp_path, NODES)
    tree = cluster.trees["pve-a"]
    if breakage == "conf":
        with open(os.path.join(tree, "etc", "pve", "corosync.conf"), "w") as handle:
            handle.write("}\n")
    elif breakage == "quorumtool":
        open(os.path.join(tree, ".pvetune", "fail", "corosync-quorumtool") if os.path.isdir(
            os.path.join(tree, ".pvetune", "fail")) else _mkfail(tree, "corosync-quorumtool"), "w").close()
    else:
        os.makedirs(os.path.join(tree, "var", "lib", "pvetune"))
        with open(os.path.join(tree, "var", "lib", "pvetune", "cluster-gate.json"), "w") as handle:
            handle.write("[")
    result = gate(tree, "rejoin" if breakage == "state" else "check")
    assert result["failed"] and needle in result["msg"], result["msg"]
    assert "Traceback" not in json.dumps(result)


def _mkfail(tree, tool):
    os.makedirs(os.path.join(tree, ".pvetune", "fail"))
    return os.path.join(tree, ".pvetune", "fail", tool)


REAL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "realdata", "cluster")


def real(name):
    with open(os.path.join(REAL, name)) as handle:
        return "".join(line for line in handle if not line.startswith("# source:") and not line.startswith(
            "# situation:") and not line.startswith("# NOTE:"))


@pytest.mark.parametrize("name, lrm, on_node", [
    ("ha-manager-status-1node-stopped-started-pvedocs.txt", {"elsa": "active"}, ("elsa", ["ct:102", "vm:501"])),
    ("ha-manager-status-2node-idle-lrm-song856854132.txt", {"proxmox": "idle", "proxmox2": "active"},
     ("proxmox2", ["vm:100"])),
])
def test_real_ha_manager_status(name, lrm, on_node):
    status = parse_ha_status(real(name))
    assert status["quorum_ok"] and status["lrm"] == lrm
    assert [s["sid"] for s in services_on(status, on_node[0])] == on_node[1]


def test_real_ha_maintenance_line_of_pve9():
    """The excerpt has only the lrm and service lines (no quorum line, so no whole output): the parser refuses it
    as such, and reads its lines once the quorum line every real output starts with is there."""
    text = real("ha-manager-status-maintenance-watchdog-excerpt-searchidx63000151805.txt")
    with pytest.raises(ValueError):
        parse_ha_status(text)
    status = parse_ha_status("quorum OK\n" + text)
    assert status["lrm"] == {"pve1": "active", "pve2": "maintenance mode"}
    assert services_on(status, "pve2") == [] and len(services_on(status, "pve1")) == 2


@pytest.mark.parametrize("name, cluster, nodes", [
    ("corosync-conf-2node-song856854132.txt", "ClusterProxmox", [("proxmox", 1), ("proxmox2", 2)]),
    ("corosync-conf-3node-pvedocs.txt", "testcluster", [("due", 2), ("tre", 3), ("uno", 1)]),
])
def test_real_corosync_conf(name, cluster, nodes):
    conf = parse_corosync_conf(real(name), name)
    assert conf["qdevice"] is None and not conf["two_node"]
    assert conf["cluster_name"] == cluster and [(n["name"], n["nodeid"]) for n in conf["nodes"]] == nodes


def test_real_qdevice_cluster_may_reboot_one_node():
    """pvecm status of a real 2-node cluster with a qdevice: 3 votes, quorum 2; one node may go."""
    from ansible.module_utils.pvetune.cluster.gate import reboot_decision
    from ansible.module_utils.pvetune.formats.corosync_quorum import parse_quorumtool

    quorum = parse_quorumtool(real("pvecm-status-2node-qdevice-x-real-ip.txt"))
    assert quorum["qdevice"] == {"votes": 1} and quorum["total_votes"] == 3
    assert reboot_decision(quorum)["allowed"]
    before = parse_quorumtool(real("pvecm-status-2node-before-qdevice-x-real-ip.txt"))
    assert not reboot_decision(before)["allowed"], "two nodes, no qdevice, no two_node: quorum 2 needs both"


def test_ceph_says_which_nodes_may_stop_together_for_the_wave_planner(tmp_path):
    """ceph_sets (the planner's discovery): ok-to-stop --max from this node's OSDs; the nodes whose up OSDs all made
    it into Ceph's set may stop with it. Pools that survive two hosts down let pve-b join; a release without --max
    answers "this node alone"; three monitors in quorum, one may stop."""
    cluster = make_cluster(tmp_path, NODES, osds={"pve-a": [0, 1], "pve-b": [2, 3], "pve-c": [4, 5]})
    wave = gate(cluster.trees["pve-a"], ceph_sets=True)["cluster"]["wave"]
    assert (wave["ceph_with"], wave["mon"], wave["mon_spare"]) == (["pve-a"], True, 1), wave
    asked = [c for c in commands(cluster, "pve-a", "ceph") if "--max" in c]
    assert asked == [["osd", "ok-to-stop", "0", "1", "--max", "6", "--format", "json"]]
    assert "ok-to-stop" not in json.dumps(commands(cluster, "pve-b", "ceph")), "asked only with ceph_sets"
    state = cluster.state()
    state["ceph"]["max_hosts_down"] = 2
    cluster.write(state)
    wave = gate(cluster.trees["pve-a"], ceph_sets=True)["cluster"]["wave"]
    assert wave["ceph_with"] == ["pve-a", "pve-b"] and "4 OSD(s) may stop together" in wave["ceph_why"], wave
    state["ceph"]["ok_to_stop_max"] = False
    cluster.write(state)
    wave = gate(cluster.trees["pve-a"], ceph_sets=True)["cluster"]["wave"]
    assert wave["ceph_with"] == ["pve-a"] and "exit 22" in wave["ceph_why"], wave
    assert gate(cluster.trees["pve-a"])["cluster"]["wave"]["ceph_with"] is None
    state["ceph"]["mons_down"] = ["pve-a"]   # its monitor is out of quorum already: stopping it costs nothing
    cluster.write(state)
    wave = gate(cluster.trees["pve-a"], ceph_sets=True)["cluster"]["wave"]
    assert (wave["mon"], wave["mon_spare"]) == (False, 0), wave


def test_a_wave_enters_ha_maintenance_first_so_no_service_moves_onto_a_wave_peer(tmp_path):
    """pve-b and pve-c reboot in one wave. Entered one after the other, pve-b's service goes to pve-c (the node with
    the fewest services, as the HA manager's basic scheduler picks) and moves again when pve-c enters; with every
    node of the wave in maintenance first (wait_ha false), it moves once, to a node outside the wave."""
    five = ["pve-a", "pve-b", "pve-c", "pve-d", "pve-e"]
    services = [("vm:400", "pve-b"), ("vm:401", "pve-a"), ("vm:402", "pve-d"), ("vm:403", "pve-e")]

    def moves(cluster):
        return [s.get("moves", []) for s in cluster.state()["ha"]["services"] if s["sid"] == "vm:400"][0]
    serial = make_cluster(tmp_path / "serial", five, ha_services=services)
    for node, peer in (("pve-b", "pve-c"), ("pve-c", "pve-b")):
        assert not gate(serial.trees[node], "enter", leaving=[peer]).get("failed")
    assert moves(serial) == ["pve-c", "pve-a"]
    first = make_cluster(tmp_path / "first", five, ha_services=services)
    for node, peer in (("pve-b", "pve-c"), ("pve-c", "pve-b")):
        entered = gate(first.trees[node], "enter", leaving=[peer], wait_ha=False)
        assert entered["actions"] == ["ha-manager crm-command node-maintenance enable %s" % node], entered
    assert first.state()["ha"]["maintenance"] == ["pve-b", "pve-c"] and moves(first) == []
    for node, peer in (("pve-b", "pve-c"), ("pve-c", "pve-b")):
        entered = gate(first.trees[node], "enter", leaving=[peer])
        assert not entered.get("failed") and entered["actions"][0].startswith("HA services moved away"), entered
    assert moves(first) == ["pve-a"]


def test_a_refusal_after_the_first_call_leaves_ha_maintenance_again(tmp_path):
    """The wave's first call put pve-b into HA maintenance; before the second, a guest pvetune does not manage
    started on it: the second call refuses, and since no reboot follows (and the rollout's release does not run for
    a refused host), it takes pve-b out of maintenance again and forgets the record."""
    five = ["pve-a", "pve-b", "pve-c", "pve-d", "pve-e"]
    cluster = make_cluster(tmp_path, five, ha_services=[("vm:400", "pve-b")])
    first = gate(cluster.trees["pve-b"], "enter", leaving=["pve-c"], wait_ha=False)
    assert first["actions"] == ["ha-manager crm-command node-maintenance enable pve-b"], first
    state = cluster.state()
    state["vms"] = {"777": {"name": "not-ours", "status": "running"}}
    cluster.write(state)
    refused = gate(cluster.trees["pve-b"], "enter", leaving=["pve-c"])
    assert refused["failed"] and "guests pvetune does not manage" in refused["msg"], refused
    assert refused["actions"] == ["ha-manager crm-command node-maintenance disable pve-b"], refused
    assert cluster.state()["ha"]["maintenance"] == []
    assert not os.path.exists(os.path.join(cluster.trees["pve-b"], "var/lib/pvetune/cluster-gate.json"))


def test_ok_to_stop_json_report_real_and_refused():
    """The JSON report a real Proxmox node printed for `ceph osd ok-to-stop 0`; what is not that report is named."""
    from ansible.module_utils.pvetune.formats.ceph_json import parse_ok_to_stop
    assert parse_ok_to_stop(real("ceph-osd-ok-to-stop-json-pve1-searchidx70095345797.json")) == {"ok": True,
                                                                                               "osds": [0]}
    for text in ("", "OSD(s) 0 are ok to stop", '{"ok_to_stop": "yes", "osds": [0]}', '{"ok_to_stop": true}'):
        with pytest.raises(ValueError, match="ceph osd ok-to-stop"):
            parse_ok_to_stop(text)


def test_ceph_counts_the_batch_and_the_monitors(tmp_path):
    cluster = make_cluster(tmp_path, NODES, osds={"pve-a": [0, 1], "pve-b": [2, 3], "pve-c": [4, 5]})
    alone = gate(cluster.trees["pve-a"])
    assert alone["cluster"]["allowed"] and alone["cluster"]["ceph"]["mons"] == ["pve-a"], alone
    # pve-b reboots in the same batch: its OSDs are asked about together with pve-a's, and its monitor too.
    both = gate(cluster.trees["pve-a"], leaving=["pve-b"], running_guests="stop")
    refusals = " | ".join(both["cluster"]["refusals"])
    assert "ceph osd ok-to-stop 0 1 2 3 says no: exit 16" in refusals, refusals
    state = cluster.state()
    state["ceph"]["mons_down"] = ["pve-c"]
    cluster.write(state)
    mon = gate(cluster.trees["pve-a"])
    assert not mon["cluster"]["allowed"] and "ceph mon ok-to-stop pve-a says no: exit 16" in mon["msg"], mon["msg"]


def test_an_osd_down_before_the_reboot_is_not_waited_for(tmp_path):
    cluster = make_cluster(tmp_path, NODES, osds={"pve-a": [0, 1], "pve-b": [2]})
    state = cluster.state()
    state["ceph"]["osds"][1]["up"] = False   # osd.1: a dead disk
    cluster.write(state)
    entered = gate(cluster.trees["pve-a"], "enter")
    assert entered["actions"] == ["ceph osd add-noout osd.0 osd.1"], entered
    rejoined = gate(cluster.trees["pve-a"], "rejoin", timeout=3)
    assert not rejoined.get("failed") and "OSDs up (down: none)" in rejoined["actions"], rejoined
    assert "ceph osd rm-noout osd.0 osd.1" in rejoined["actions"]


def test_ha_managed_vm_is_not_another_guest_and_other_lrm_modes_count(tmp_path):
    cluster = make_cluster(tmp_path, NODES, ha_services=[("vm:300", "pve-a")],
                           vms={"300": {"name": "web", "status": "running"}})
    result = gate(cluster.trees["pve-a"])
    assert result["cluster"]["allowed"] and result["cluster"]["guests"] == [], result
    status = parse_ha_status("quorum OK\nlrm pve-b (shutdown mode, Wed Dec  2 12:00:00 2026)\n"
                             "lrm pve-c (restart mode, Wed Dec  2 12:00:00 2026)\n")
    from ansible.module_utils.pvetune.cluster.gate import ha_in_maintenance
    assert ha_in_maintenance(status, "pve-a") == ["pve-b"]


def test_a_leftover_record_is_kept_until_undone(tmp_path):
    cluster = make_cluster(tmp_path, NODES, ha_services=[("vm:300", "pve-a")])
    state = cluster.state()
    state["ha"]["move_after"] = 1000
    cluster.write(state)
    assert gate(cluster.trees["pve-a"], "enter", timeout=1)["failed"]
    state = cluster.state()
    state["ha"]["move_after"] = 1
    cluster.write(state)
    again = gate(cluster.trees["pve-a"], "enter", run_id="gate-2")   # the next run
    assert again["actions"][0].startswith("left over from run gate-1: maintenance True"), again
    released = gate(cluster.trees["pve-a"], "release")
    assert released["actions"] == ["ha-manager crm-command node-maintenance disable pve-a"]


def test_one_node_by_configuration_not_by_membership():
    """A survivor after `pvecm expected 1` is alone, but its cluster has three nodes: no shortcut."""
    from ansible.module_utils.pvetune.cluster.gate import reboot_decision
    from ansible.module_utils.pvetune.formats.corosync_quorum import parse_quorumtool

    text = ("Quorum information\nQuorate:          Yes\n\nVotequorum information\nExpected votes:   1\n"
            "Highest expected: 1\nTotal votes:      1\nQuorum:           1  \nFlags:            Quorate \n\n"
            "Membership information\n----------------------\n    Nodeid      Votes Name\n"
            "0x00000001          1 PVE (local)\n")
    quorum = parse_quorumtool(text)
    assert quorum["local"]["name"] == "PVE", "an all-capitals name is no Qdevice flags column"
    assert not reboot_decision(quorum, configured_nodes=3)["allowed"]
    assert reboot_decision(quorum, configured_nodes=1)["allowed"]


def test_a_state_file_that_is_not_ours_is_refused(tmp_path):
    cluster = make_cluster(tmp_path, NODES)
    tree = cluster.trees["pve-a"]
    os.makedirs(os.path.join(tree, "var", "lib", "pvetune"))
    with open(os.path.join(tree, "var", "lib", "pvetune", "cluster-gate.json"), "w") as handle:
        json.dump({"node": "pve-a; reboot", "osds": [], "maintenance": True}, handle)
    result = gate(tree, "release")
    assert result["failed"] and "not the record pvetune writes" in result["msg"], result
    assert not [c for c in cluster.calls("pve-a", "ha-manager") if c[1:2] == ["crm-command"]]


def test_osds_found_by_their_metadata_when_the_crush_host_is_named_otherwise(tmp_path):
    """A real `ceph osd metadata` (rook, reef): the OSD's hostname is the FQDN f-titan-aio-001.ct.lan and its CRUSH
    host bucket f-titan-aio-001-ct-lan; a CRUSH lookup by the node name finds nothing, the metadata finds it."""
    from ansible.module_utils.pvetune.cluster.ceph import node_osds, unfound_osds
    from ansible.module_utils.pvetune.formats.ceph_json import parse_osd_metadata

    metadata = parse_osd_metadata("[%s, {\"id\": 1}]" % real("ceph-osd-metadata-0-rook-fqdn-searchidx49258443942.json"))
    assert metadata == {0: "f-titan-aio-001.ct.lan"}  # osd.1 never reported metadata: no host
    assert node_osds([], metadata, "f-titan-aio-001") == [0]
    assert node_osds([], metadata, "F-TITAN-AIO-001.ct.lan") == [0]
    assert node_osds([3], metadata, "pve-a") == [3]
    assert unfound_osds([0], [0], "f-titan-aio-001", metadata) == ""
    assert unfound_osds([], [0], "pve-a", metadata).startswith(
        "this node runs OSDs osd.0 (/var/lib/ceph/osd/ceph-*), but neither the CRUSH host pve-a nor the OSDs' metadata "
        "(osd.0 on f-titan-aio-001.ct.lan) names this node")
    for bad in ("{}", "[{\"hostname\": \"x\"}]", "[1]"):
        with pytest.raises(ValueError, match="ceph osd metadata"):
            parse_osd_metadata(bad)


def test_a_crush_host_named_otherwise_refuses_unless_the_metadata_names_the_node(tmp_path):
    cluster = make_cluster(tmp_path, NODES, osds={"pve-a": [0, 1], "pve-b": [2, 3], "pve-c": [4, 5]})
    state = cluster.state()
    for osd in state["ceph"]["osds"][:2]:  # pve-a's OSDs under a CRUSH host named by its FQDN
        osd.update(host="pve-a-example-lan", hostname="pve-a.example.lan")
    cluster.write(state)
    found = gate(cluster.trees["pve-a"], "enter")
    assert found["actions"] == ["ceph osd add-noout osd.0 osd.1"], found
    gate(cluster.trees["pve-a"], "rejoin")
    # pve-b's batch peer pve-a: its OSDs are asked about by the metadata too
    both = gate(cluster.trees["pve-b"], leaving=["pve-a"], running_guests="stop")
    assert "ceph osd ok-to-stop 0 1 2 3 says no" in " | ".join(both["cluster"]["refusals"]), both
    for osd in state["ceph"]["osds"][:2]:  # and a host name that is not the node's either
        osd["hostname"] = "gpu-host-17.example.lan"
    cluster.write(state)
    refused = gate(cluster.trees["pve-a"], "enter")
    assert refused["failed"] and refused["msg"].startswith(
        "this node runs OSDs osd.0, osd.1 (/var/lib/ceph/osd/ceph-*), but neither the CRUSH host pve-a nor the OSDs' "
        "metadata (osd.0 on gpu-host-17.example.lan, osd.1 on gpu-host-17.example.lan) names this node"), refused
    assert not any(o["noout"] for o in cluster.state()["ceph"]["osds"])
