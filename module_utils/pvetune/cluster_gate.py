# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""May this cluster node reboot without the cluster losing quorum?  (issue 14, first part: the quorum rule.)

votequorum(5): a partition is quorate while its votes (its members' plus the qdevice's, when the qdevice votes for
it) reach ``Quorum``, which votequorum derives from the expected votes (expected / 2 + 1; 1 with two_node).  A
reboot takes this node's votes out; nodes already down have taken theirs (they are not in ``Total votes``); nodes
in HA maintenance or rebooted by the same rollout are counted as gone too, since they may leave at any moment.

``reboot_decision`` is pure: it gets the parsed ``corosync-quorumtool -s`` (formats/corosync_quorum) and the votes
of the other nodes to count as gone, and says yes or no with the numbers behind it.  No ``corosync.conf`` means a
standalone host: it may reboot.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def reboot_decision(quorum, leaving_elsewhere=()):
    """{"allowed", "reason", "votes_after", "quorum"} for rebooting the local node of ``quorum``.

    ``leaving_elsewhere``: node ids of the other members to count as gone (HA maintenance, the rollout's other
    reboots); ids not in the membership are already out of ``Total votes`` and count nothing.
    """
    if quorum is None:
        return {"allowed": True, "reason": "standalone host (no corosync.conf): no quorum to keep",
                "votes_after": None, "quorum": None}
    local = quorum["local"]
    members = {n["nodeid"]: n for n in quorum["nodes"]}
    gone = sorted(i for i in set(leaving_elsewhere) if i in members and i != local["nodeid"])
    gone_votes = sum(members[i]["votes"] for i in gone)
    after = quorum["total_votes"] - local["votes"] - gone_votes
    out = {"votes_after": after, "quorum": quorum["quorum"]}
    counted = " and %d of node(s) %s counted as gone" % (gone_votes, ", ".join(str(i) for i in gone)) if gone else ""
    if not quorum["nodes"][1:] and quorum["qdevice"] is None and quorum["expected_votes"] == local["votes"]:
        return dict(out, allowed=True, reason="single-node cluster: no other node's quorum depends on this one")
    if not quorum["quorate"] or quorum["activity_blocked"]:
        return dict(out, allowed=False, reason="the cluster is not quorate now (%d of %d votes needed): fix that first"
                    % (quorum["total_votes"], quorum["quorum"]))
    if after < quorum["quorum"]:
        return dict(out, allowed=False, reason=(
            "rebooting %s would leave %d votes (%d now, %d of its own%s), below the quorum of %d: /etc/pve would "
            "turn read-only on every node and HA would fence" % (local["name"], after, quorum["total_votes"],
                                                                 local["votes"], counted, quorum["quorum"])))
    return dict(out, allowed=True, reason="%d votes stay (%d now, %d of its own%s), quorum %d" % (
        after, quorum["total_votes"], local["votes"], counted, quorum["quorum"]))
