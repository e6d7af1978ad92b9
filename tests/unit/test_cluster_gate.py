"""The quorum rule of the cluster gate (module_utils/pvetune/cluster/gate.py) and the corosync-quorumtool parser.

The property test renders ``corosync-quorumtool -s`` for every cluster of 1-7 one-vote nodes, 0-3 of them down,
with and without a one-vote qdevice (two_node for two nodes without one), from a model of votequorum(5), parses it
and asks the gate; the model, not the text, says whether the cluster keeps quorum without the node.
"""
import itertools
import os

import pytest
from ansible.module_utils.pvetune.cluster.gate import reboot_decision
from ansible.module_utils.pvetune.formats.corosync_quorum import parse_quorumtool


def votequorum(nodes, qdevice):
    """(expected votes, quorum) as votequorum computes them for one-vote nodes and a one-vote qdevice."""
    expected = nodes + (1 if qdevice else 0)
    two_node = nodes == 2 and not qdevice
    return expected, 1 if two_node else expected // 2 + 1


def render(nodes, down, qdevice, local=1):
    """corosync-quorumtool -s of node ``local`` while nodes ``nodes-down+1..nodes`` are down."""
    expected, quorum = votequorum(nodes, qdevice)
    up = [i for i in range(1, nodes + 1) if i <= nodes - down]
    total = len(up) + (1 if qdevice else 0)
    quorate = total >= quorum
    flags = (["Quorate"] if quorate else []) + (["2Node", "WaitForAll"] if nodes == 2 and not qdevice else []) + (
        ["Qdevice"] if qdevice else [])
    lines = ["Quorum information", "------------------", "Date:             Wed Dec  2 14:20:00 2026",
             "Quorum provider:  corosync_votequorum", "Nodes:            %d" % len(up),
             "Node ID:          0x%08x" % local, "Ring ID:          1.2c", "Quorate:          %s" % (
                 "Yes" if quorate else "No"), "", "Votequorum information", "----------------------",
             "Expected votes:   %d" % expected, "Highest expected: %d" % expected, "Total votes:      %d" % total,
             "Quorum:           %d %s" % (quorum, "" if quorate else " Activity blocked"),
             "Flags:            %s " % " ".join(flags), "", "Membership information", "----------------------"]
    lines.append("    Nodeid      Votes    Qdevice Name" if qdevice else "    Nodeid      Votes Name")
    for i in up:
        name = "10.0.0.%d%s" % (i, " (local)" if i == local else "")
        lines.append("0x%08x          1    A,V,NMW %s" % (i, name) if qdevice else "0x%08x          1 %s" % (i, name))
    if qdevice:
        lines.append("0x00000000          1            Qdevice")
    return "\n".join(lines) + "\n"


CASES = [(n, d, q) for n, d, q in itertools.product(range(1, 8), range(4), (False, True)) if d < n]


@pytest.mark.parametrize("nodes, down, qdevice", CASES)
def test_the_gate_never_lets_a_reboot_break_quorum(nodes, down, qdevice):
    _expected, quorum = votequorum(nodes, qdevice)
    now = (nodes - down) + qdevice
    after = (nodes - down - 1) + qdevice
    decision = reboot_decision(parse_quorumtool(render(nodes, down, qdevice)))
    keeps_quorum = now >= quorum and after >= quorum
    alone = nodes == 1 and not qdevice      # a one-node cluster: nobody else's quorum depends on it
    assert decision["allowed"] == (keeps_quorum or alone), (nodes, down, qdevice, decision)
    if not decision["allowed"]:
        assert "quorum" in decision["reason"] or "not quorate" in decision["reason"]


def test_three_nodes_one_down_refuses_the_next_and_says_why():
    decision = reboot_decision(parse_quorumtool(render(3, 1, False)))
    assert not decision["allowed"] and decision["votes_after"] == 1 and decision["quorum"] == 2
    assert decision["reason"].startswith("rebooting 10.0.0.1 would leave 1 votes (2 now, 1 of its own), below the "
                                         "quorum of 2")


def test_a_qdevice_lets_one_of_two_nodes_reboot():
    assert reboot_decision(parse_quorumtool(render(2, 0, True)))["allowed"]
    assert not reboot_decision(parse_quorumtool(render(2, 1, True)))["allowed"]


def test_nodes_in_maintenance_or_rebooting_elsewhere_count_as_gone():
    five = parse_quorumtool(render(5, 0, False))
    assert reboot_decision(five, leaving_elsewhere=[2])["allowed"]          # 3 of 5 stay, quorum 3
    refused = reboot_decision(five, leaving_elsewhere=[2, 3])
    assert not refused["allowed"] and "and 2 of node(s) 2, 3 counted as gone" in refused["reason"]
    assert reboot_decision(five, leaving_elsewhere=[1, 9])["allowed"]       # itself, and a node not a member


def test_a_qdevice_not_voting_for_this_partition_gives_no_vote():
    text = render(2, 0, True).replace("0x00000000          1            Qdevice",
                                      "0x00000000          0            Qdevice (votes 1)")
    quorum = parse_quorumtool(text.replace("Total votes:      3", "Total votes:      2"))
    assert quorum["qdevice"] == {"votes": 0} and [n["nodeid"] for n in quorum["nodes"]] == [1, 2]
    assert not reboot_decision(quorum)["allowed"]       # 1 vote would stay, quorum 2


def test_standalone_host_may_reboot():
    assert reboot_decision(None)["allowed"]


@pytest.mark.parametrize("text, message", [
    ("", "no 'Expected votes', 'Total votes', 'Quorum' line"),
    (render(3, 0, False).replace("Quorate:          Yes\n", "").replace("Flags:", "Flagz:"),
     "no 'Quorate' line and no"),
    (render(3, 0, False).replace("Quorate:          Yes", "Quorate:          Maybe"), "neither Yes nor No"),
    (render(3, 0, False).replace("Total votes:      3", "Total votes:      three"), "'Total votes' is not a vote"),
    (render(3, 0, False).replace(" (local)", ""), "marks 0 nodes (local)"),
])
def test_unreadable_output_is_an_error_naming_what(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_quorumtool(text)


REAL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "realdata", "corosync")


def test_real_pvecm_status_four_nodes_one_may_reboot():
    quorum = parse_quorumtool(open(os.path.join(REAL, "pvecm-status-4node-quorate-pvedocs.txt")).read())
    assert (quorum["quorate"], quorum["total_votes"], quorum["quorum"], quorum["local"]["nodeid"]) == (True, 4, 3, 2)
    assert quorum["qdevice"] is None and [n["nodeid"] for n in quorum["nodes"]] == [1, 2, 3, 4]
    assert reboot_decision(quorum)["allowed"]
    assert not reboot_decision(quorum, leaving_elsewhere=[1])["allowed"]    # two of four gone: 2 < 3


def test_real_pvecm_status_two_nodes_and_a_qdevice():
    quorum = parse_quorumtool(open(os.path.join(REAL, "pvecm-status-2node-qdevice-excerpt-pvedocs.txt")).read())
    assert quorum["quorate"] and quorum["qdevice"] == {"votes": 1} and quorum["local"]["name"] == "192.168.22.180"
    assert [n["qdevice_flags"] for n in quorum["nodes"]] == ["A,V,NMW", "A,V,NMW"]
    assert reboot_decision(quorum)["allowed"] and not reboot_decision(quorum, leaving_elsewhere=[2])["allowed"]
