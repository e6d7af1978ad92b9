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


def reboot_decision(quorum, leaving_elsewhere=(), name=None, configured_nodes=None):
    """{"allowed", "reason", "votes_after", "quorum"} for rebooting the local node of ``quorum``.

    ``leaving_elsewhere``: node ids of the other members to count as gone (HA maintenance, the rollout's other
    reboots); ids not in the membership are already out of ``Total votes`` and count nothing.  ``name``: the node's
    corosync name for the reason (corosync-quorumtool and pvecm print its address).  ``configured_nodes``: how many
    nodes corosync.conf lists; a one-node cluster is one by its configuration, not by its live membership (a survivor
    after ``pvecm expected 1`` is alone now, but its reboot brings the configured expected votes back).
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
    alone = (configured_nodes == 1 if configured_nodes is not None
             else not quorum["nodes"][1:] and quorum["expected_votes"] == local["votes"])
    if alone and quorum["qdevice"] is None:
        return dict(out, allowed=True, reason="single-node cluster: no other node's quorum depends on this one")
    if not quorum["quorate"] or quorum["activity_blocked"]:
        return dict(out, allowed=False, reason="the cluster is not quorate now (%d of %d votes needed): fix that first"
                    % (quorum["total_votes"], quorum["quorum"]))
    if after < quorum["quorum"]:
        return dict(out, allowed=False, reason=(
            "rebooting %s would leave %d votes (%d now, %d of its own%s), below the quorum of %d: /etc/pve would "
            "turn read-only on every node and HA would fence" % (name or local["name"], after, quorum["total_votes"],
                                                                 local["votes"], counted, quorum["quorum"])))
    return dict(out, allowed=True, reason="%d votes stay (%d now, %d of its own%s), quorum %d" % (
        after, quorum["total_votes"], local["votes"], counted, quorum["quorum"]))


def node_ids(conf, names):
    """Node ids of the corosync.conf node list for ``names``; names of other clusters count nothing."""
    by_name = {n["name"]: n["nodeid"] for n in conf["nodes"]}
    return sorted(by_name[n] for n in set(names) if n in by_name)


def local_node(conf, quorum, path):
    """This node's corosync.conf entry: the one whose node id corosync-quorumtool marks (local)."""
    for node in conf["nodes"]:
        if node["nodeid"] == quorum["local"]["nodeid"]:
            return node
    raise ValueError("%s has no node with the local node id %d that corosync-quorumtool reports"
                     % (path, quorum["local"]["nodeid"]))


def gate_decision(cluster, running_guests="refuse"):
    """May this node reboot now?  ``cluster`` is what cluster_steps.read_cluster() gathered:

    ``conf`` (corosync.conf or None), ``quorum`` (corosync-quorumtool -s or None), ``node`` (this node's name),
    ``leaving`` (other nodes of the rollout that may reboot at the same time), ``ha`` (ha-manager status or None),
    ``ceph`` ({"osds", "ok_to_stop", "why", "health"} or None), ``guests`` (running guests pvetune does not manage).
    Returns {"allowed", "refusals" [why not], "quorum" (reboot_decision), "counted_gone" [names], "plan" [steps]}.
    """
    conf, quorum, ha = cluster.get("conf"), cluster.get("quorum"), cluster.get("ha")
    refusals, plan = [], []
    maintenance = ha_in_maintenance(ha, cluster["node"])
    gone = sorted(set(maintenance) | (set(cluster.get("leaving") or ()) - {cluster["node"]}))
    decision = reboot_decision(quorum, node_ids(conf, gone) if conf else (), cluster["node"],
                               len(conf["nodes"]) if conf else None)
    if not decision["allowed"]:
        refusals.append(decision["reason"])
    if ha is not None and ha["services"]:
        plan.append("ha-maintenance")
    ceph = cluster.get("ceph")
    if ceph is not None:
        if ceph["health"] == "HEALTH_ERR":
            refusals.append("Ceph is HEALTH_ERR: fix the Ceph cluster before a node of it reboots")
        if not ceph["ok_to_stop"]:
            refusals.append("ceph osd ok-to-stop %s says no: %s" % (" ".join(str(i) for i in ceph["stopping"]),
                                                                    ceph["why"]))
        if not ceph["mon_ok_to_stop"]:
            refusals.append("ceph mon ok-to-stop %s says no: %s" % (" ".join(ceph["mons"]), ceph["mon_why"]))
        if ceph["osds"]:
            plan.append("ceph-noout")
    guests = cluster.get("guests") or []
    if guests and running_guests == "refuse":
        refusals.append("guests pvetune does not manage run on %s: %s; stop or migrate them, or set "
                        "pvetune_running_guests: stop to let the reboot shut them down"
                        % (cluster["node"], ", ".join("%s %d (%s)" % (g["kind"], g["vmid"], g["name"])
                                                      for g in guests)))
    return {"allowed": not refusals, "refusals": refusals, "quorum": decision, "counted_gone": gone, "plan": plan}


def ha_in_maintenance(ha, node):
    """Other nodes whose LRM is in maintenance, shutdown or reboot mode (away, or going any moment); "restart mode"
    is the LRM daemon restarting, not the node."""
    if ha is None:
        return []
    return sorted(n for n, status in ha["lrm"].items()
                  if status.endswith(" mode") and status != "restart mode" and n != node)


def wave_view(cluster):
    """What the reboot wave planner (cluster/waves.plan_inputs) needs of this node: its cluster (corosync's name and
    node list; None for a standalone host or a one-node cluster without a qdevice, which no other node's quorum
    needs), its votes, the cluster's votes and quorum now, the votes of the other nodes in HA maintenance, whether it
    runs the HA manager master, whether the cluster runs Ceph, and (asked with ``ceph_sets``) which nodes Ceph lets
    stop together with this one (``ceph_with``: None when no up OSD of this node holds it back), whether it runs a
    monitor and how many monitors may stop (``mon_spare``)."""
    conf, quorum, ha = cluster.get("conf"), cluster.get("quorum"), cluster.get("ha")
    ceph = cluster.get("ceph") or {}
    if conf is None or (len(conf["nodes"]) == 1 and quorum["qdevice"] is None):
        return {"cluster": None, "votes": 1 if quorum is None else quorum["local"]["votes"]}
    members = {n["nodeid"]: n for n in quorum["nodes"]}
    local = quorum["local"]["nodeid"]
    away = [i for i in node_ids(conf, ha_in_maintenance(ha, cluster["node"])) if i in members and i != local]
    return {"cluster": conf["cluster_name"], "members": sorted(n["name"] for n in conf["nodes"]),
            "node": cluster["node"], "votes": quorum["local"]["votes"], "total_votes": quorum["total_votes"],
            "quorum": quorum["quorum"], "quorate": bool(quorum["quorate"]) and not quorum["activity_blocked"],
            "maintenance_votes": sum(members[i]["votes"] for i in away),
            "ha_master": bool(ha and ha.get("master") and ha["master"]["node"] == cluster["node"]),
            "ceph": cluster.get("ceph") is not None, "ceph_with": ceph.get("with"), "ceph_why": ceph.get("with_why"),
            "mon": bool(ceph.get("mon")), "mon_spare": ceph.get("mon_spare")}
