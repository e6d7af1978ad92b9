"""The cluster gate's quorum rule against a real corosync 3 cluster (tests/cluster/corosync_lab.py), not stand-ins.

Every output parsed here comes from the real ``corosync-quorumtool -s`` of a node of a running cluster: three nodes,
then one and two of them stopped; two nodes with a qnetd arbiter, then the arbiter or a node stopped.  The parser
(formats/corosync_quorum.parse_quorumtool) and the decision (cluster_gate.reboot_decision) are the ones the module
uses.  Each state's output is also compared with its stored copy in tests/fixtures/realdata/corosync/.
"""
from ansible.module_utils.pvetune.cluster.gate import reboot_decision
from ansible.module_utils.pvetune.formats.corosync_conf import parse_corosync_conf
from ansible.module_utils.pvetune.formats.corosync_quorum import parse_quorumtool


def quorum_of(lab, node):
    text = lab.quorumtool(node)
    return parse_quorumtool(text), text


def test_the_lab_writes_corosync_conf_as_proxmox_keeps_it(corosync_cluster):
    lab = corosync_cluster
    for node in lab.nodes:
        etc = lab.read_file(node, "/etc/corosync/corosync.conf")
        assert etc == lab.read_file(node, "/etc/pve/corosync.conf")
        conf = parse_corosync_conf(etc.decode(), "/etc/pve/corosync.conf")
        assert conf["cluster_name"] == "pvetune-lab" and conf["qdevice"] is None and not conf["two_node"]
        assert [(n["name"], n["nodeid"], n["addr"]) for n in conf["nodes"]] == [
            (n, i, lab.address[n]) for i, n in enumerate(lab.nodes, 1)]


def test_three_nodes_up_each_may_reboot(corosync_cluster, record_output):
    lab = corosync_cluster
    for node in lab.nodes:
        quorum, text = quorum_of(lab, node)
        assert (quorum["quorate"], quorum["expected_votes"], quorum["total_votes"], quorum["quorum"]) == (True, 3, 3, 2)
        assert [n["name"] for n in quorum["nodes"]] == ["node1", "node2", "node3"] and quorum["qdevice"] is None
        assert quorum["local"]["name"] == node and not quorum["activity_blocked"]
        decision = reboot_decision(quorum)
        assert decision["allowed"] and decision["votes_after"] == 2, decision
        if node == "node1":
            record_output("3node-quorate", text)
    # What pvecm status shows (corosync-quorumtool -siH): hex ids, addresses as names; the same decision.
    text = lab.quorumtool("node1", ("-siH",))
    pvecm = parse_quorumtool(text)
    assert [(n["nodeid"], n["name"]) for n in pvecm["nodes"]] == [(i, lab.address[n])
                                                                  for i, n in enumerate(lab.nodes, 1)]
    assert "0x00000001" in text and reboot_decision(pvecm)["allowed"]
    # Another node in maintenance or rebooting in the same rollout counts as gone: 3 - 1 - 1 < 2.
    refused = reboot_decision(quorum_of(lab, "node1")[0], leaving_elsewhere=[2])
    assert not refused["allowed"] and "and 1 of node(s) 2 counted as gone" in refused["reason"]


def test_one_of_three_down_refuses_the_next_reboot_until_it_is_back(corosync_cluster, record_output):
    lab = corosync_cluster
    lab.stop("node3")
    try:
        for node in ("node1", "node2"):
            quorum, text = quorum_of(lab, node)
            assert (quorum["quorate"], quorum["expected_votes"], quorum["total_votes"], quorum["quorum"]) == (
                True, 3, 2, 2)
            assert [n["name"] for n in quorum["nodes"]] == ["node1", "node2"]
            decision = reboot_decision(quorum)
            assert not decision["allowed"] and (decision["votes_after"], decision["quorum"]) == (1, 2), decision
            assert decision["reason"].startswith(
                "rebooting %s would leave 1 votes (2 now, 1 of its own), below the quorum of 2" % node)
            # node3 is already out of Total votes: naming it as gone elsewhere counts nothing extra.
            again = reboot_decision(quorum, leaving_elsewhere=[3])
            assert again == decision and "counted as gone" not in again["reason"]
            if node == "node1":
                record_output("3node-one-down", text)
    finally:
        lab.start("node3")
    for node in lab.nodes:
        quorum, _text = quorum_of(lab, node)
        assert quorum["total_votes"] == 3 and reboot_decision(quorum)["allowed"], node


def test_two_of_three_down_the_last_node_is_not_quorate(corosync_cluster, record_output):
    lab = corosync_cluster
    lab.stop("node3")
    lab.stop("node2")
    try:
        quorum, text = quorum_of(lab, "node1")
        assert (quorum["quorate"], quorum["total_votes"], quorum["quorum"]) == (False, 1, 2)
        assert quorum["activity_blocked"] and [n["name"] for n in quorum["nodes"]] == ["node1"]
        decision = reboot_decision(quorum)
        assert not decision["allowed"] and "not quorate" in decision["reason"], decision
        record_output("3node-two-down", text)
    finally:
        lab.ensure_all_up()
    assert reboot_decision(quorum_of(lab, "node1")[0])["allowed"]


def test_two_nodes_and_a_qdevice_one_may_reboot(corosync_qdevice_cluster, record_output):
    lab = corosync_qdevice_cluster
    conf = parse_corosync_conf(lab.read_file("node1", "/etc/pve/corosync.conf").decode(), "corosync.conf")
    assert conf["qdevice"] == {"model": "net", "votes": 1}
    for node in lab.nodes:
        quorum, text = quorum_of(lab, node)
        assert (quorum["quorate"], quorum["expected_votes"], quorum["total_votes"], quorum["quorum"]) == (True, 3, 3, 2)
        assert quorum["qdevice"] == {"votes": 1} and "Qdevice" in quorum["flags"]
        assert [(n["name"], n["qdevice_flags"]) for n in quorum["nodes"]] == [("node1", "A,V,NMW"),
                                                                               ("node2", "A,V,NMW")]
        decision = reboot_decision(quorum)
        assert decision["allowed"] and decision["votes_after"] == 2, decision
        if node == "node1":
            record_output("2node-qdevice", text)


def test_qnetd_down_refuses_either_reboot(corosync_qdevice_cluster, record_output):
    lab = corosync_qdevice_cluster
    lab.stop_qnetd()
    try:
        for node in lab.nodes:
            quorum, text = quorum_of(lab, node)
            # The qdevice row stays, with 0 votes ("Qdevice (votes 1)"); the nodes say NV (not voting).
            assert (quorum["quorate"], quorum["total_votes"], quorum["quorum"]) == (True, 2, 2)
            assert quorum["qdevice"] == {"votes": 0}
            assert [n["qdevice_flags"] for n in quorum["nodes"]] == ["A,NV,NMW", "A,NV,NMW"]
            decision = reboot_decision(quorum)
            assert not decision["allowed"] and decision["votes_after"] == 1, decision
            if node == "node1":
                record_output("2node-qdevice-qnetd-down", text)
    finally:
        lab.ensure_all_up()
    assert reboot_decision(quorum_of(lab, "node1")[0])["allowed"]


def test_qdevice_one_node_down_the_other_keeps_quorum_but_may_not_reboot(corosync_qdevice_cluster, record_output):
    lab = corosync_qdevice_cluster
    lab.stop("node2")
    try:
        quorum, text = quorum_of(lab, "node1")
        assert (quorum["quorate"], quorum["total_votes"], quorum["quorum"]) == (True, 2, 2)
        assert quorum["qdevice"] == {"votes": 1} and [n["name"] for n in quorum["nodes"]] == ["node1"]
        decision = reboot_decision(quorum)
        assert not decision["allowed"] and decision["votes_after"] == 1, decision
        record_output("2node-qdevice-one-down", text)
    finally:
        lab.ensure_all_up()
    assert reboot_decision(quorum_of(lab, "node2")[0])["allowed"]
