# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reboot waves for a fleet: which hosts may reboot together, planned once on the controller (issue 29).

Two hundred hosts rebooted one at a time take a day; rebooted in waves they take as many reboots as the largest
cluster has nodes. What bounds a wave:

* each cluster's budget, the nodes that may be down together: the smallest of the policy cap
  (``pvetune_cluster_max_down``), what quorum allows (votequorum(5): the votes a partition may lose and stay at
  ``Quorum``: total votes now, which leave out the nodes already down, minus the votes of nodes in HA maintenance,
  minus the quorum) and what Ceph allows (``ceph osd ok-to-stop --max``: how many of the cluster's nodes may stop
  together, when the cluster runs Ceph);
* the fleet cap (``pvetune_max_parallel``): reboots at once, fleet-wide.

Waves: a canary wave first (``canary`` hosts, standalone hosts preferred: they risk no cluster), then each wave
takes up to its budget from every cluster, the clusters with the most nodes left first, and standalone hosts fill the
free slots. The node that runs the HA manager master goes last in its cluster (one master move, not one per wave).
A cluster whose budget is 0 is not planned: its hosts are ``blocked`` with the reason.

``plan_waves`` is pure: it gets the hosts (reboot need, cluster, votes, HA master) and the clusters (votes, quorum,
Ceph's answer) that the read-only discovery found, and returns the plan; the cluster gate stays the backstop.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class PlanError(ValueError):
    pass


def _positive_int(value, name, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PlanError("%s must be an integer >= %d, got %r" % (name, minimum, value))
    return value


def cluster_budget(cluster, cap):
    """{"budget", "cap", "quorum_allows", "ceph_allows", "spare_votes", "reason"} for one cluster.

    ``cluster``: {"name", "total_votes", "quorum", "maintenance_votes" (0), "ceph_max" (None: no Ceph), "quorate"}.
    quorum_allows is counted in votes here (spare_votes); the planner spends them node by node."""
    spare = cluster["total_votes"] - cluster.get("maintenance_votes", 0) - cluster["quorum"]
    if not cluster.get("quorate", True):
        spare = -1
    ceph = cluster.get("ceph_max")
    budget = max(0, min([cap] + ([ceph] if ceph is not None else [])))
    out = {"cap": cap, "spare_votes": max(spare, 0), "ceph_allows": ceph, "budget": budget}
    if spare < 0:
        out.update(budget=0, reason="the cluster is not quorate now")
    elif spare == 0:
        out.update(budget=0, reason="quorum allows no node down (%d votes, quorum %d%s)" % (
            cluster["total_votes"], cluster["quorum"],
            ", %d in HA maintenance" % cluster["maintenance_votes"] if cluster.get("maintenance_votes") else ""))
    elif budget == 0:
        out["reason"] = "Ceph allows no node to stop (ok-to-stop --max 0)" if ceph == 0 else "the cap is 0"
    else:
        limits = ["cap %d" % cap, "%d spare vote(s)" % spare] + (["Ceph %d" % ceph] if ceph is not None else [])
        out["reason"] = "up to %d node(s) at once (%s)" % (min(budget, spare), ", ".join(limits))
    return out


def _validate(hosts, clusters, cap, max_parallel, canary):
    _positive_int(cap, "pvetune_cluster_max_down")
    _positive_int(max_parallel, "pvetune_max_parallel")
    _positive_int(canary, "pvetune_canary", minimum=0)
    seen = set()
    for host in hosts:
        name = host.get("host")
        if not isinstance(name, str) or not name or name in seen:
            raise PlanError("every host needs a unique name, got %r" % (name,))
        seen.add(name)
        if host.get("cluster") is not None and host["cluster"] not in clusters:
            raise PlanError("host %s names cluster %r, which the discovery did not find" % (name, host["cluster"]))
        _positive_int(host.get("votes", 1), "votes of %s" % name, minimum=0)


def plan_waves(hosts, clusters, cap=1, max_parallel=10, canary=1):
    """The reboot plan.

    ``hosts``: [{"host", "reboot" (bool), "cluster" (name or None), "votes" (1), "ha_master" (False)}], in inventory
    order. ``clusters``: {name: {"total_votes", "quorum", "maintenance_votes", "ceph_max", "quorate"}}.
    Returns {"waves": [[host, ...], ...], "why": {host: text}, "blocked": {host: reason}, "no_reboot": [host],
    "budgets": {cluster: cluster_budget(...)}}. Raises PlanError naming a bad value."""
    _validate(hosts, clusters, cap, max_parallel, canary)
    budgets = {name: cluster_budget(c, cap) for name, c in clusters.items()}
    left = {}          # cluster name -> its hosts still to plan, HA master last
    standalone, blocked, why = [], {}, {}
    for host in hosts:
        if not host.get("reboot"):
            continue
        name, cluster = host["host"], host.get("cluster")
        if cluster is None:
            standalone.append(host)
        elif budgets[cluster]["budget"] == 0:
            blocked[name] = "cluster %s: %s" % (cluster, budgets[cluster]["reason"])
        else:
            left.setdefault(cluster, []).append(host)
    for members in left.values():
        members.sort(key=lambda h: bool(h.get("ha_master")))   # stable: inventory order, the master last
    waves = []
    if canary:
        wave = standalone[:min(canary, max_parallel)]
        del standalone[:len(wave)]
        for cluster in sorted(left, key=lambda c: (-len(left[c]), c)):
            if len(wave) >= min(canary, max_parallel):
                break
            host = left[cluster][0]
            if host.get("votes", 1) <= budgets[cluster]["spare_votes"] and not (
                    host.get("ha_master") and len(left[cluster]) > 1):
                wave.append(left[cluster].pop(0))
        for host in wave:
            why[host["host"]] = "canary: the first wave, alone before the others"
        waves.append([h["host"] for h in wave])
        left = {c: m for c, m in left.items() if m}
    while left or standalone:
        wave, slots = [], max_parallel
        for cluster in sorted(left, key=lambda c: (-len(left[c]), c)):
            budget, spare = budgets[cluster]["budget"], budgets[cluster]["spare_votes"]
            taken, votes = 0, 0
            while left[cluster] and slots and taken < budget:
                host = left[cluster][0]
                if votes + host.get("votes", 1) > spare or (host.get("ha_master") and taken):
                    break   # the HA manager master reboots alone, after every other node of its cluster
                votes += host.get("votes", 1)
                taken += 1
                slots -= 1
                wave.append(left[cluster].pop(0))
                why[host["host"]] = "cluster %s: %s%s" % (cluster, budgets[cluster]["reason"],
                                                          ", HA manager master last" if host.get("ha_master") else "")
        while standalone and slots:
            host = standalone.pop(0)
            slots -= 1
            wave.append(host)
            why[host["host"]] = "standalone: fills a free slot (fleet cap %d)" % max_parallel
        if not wave:   # cannot happen with budgets > 0; never loop forever
            for cluster, members in left.items():
                for host in members:
                    blocked[host["host"]] = "cluster %s: no wave can take it" % cluster
            break
        waves.append([h["host"] for h in wave])
        left = {c: m for c, m in left.items() if m}
    return {"waves": [w for w in waves if w], "why": why, "blocked": blocked, "budgets": budgets,
            "no_reboot": [h["host"] for h in hosts if not h.get("reboot")]}


def check_plan(plan, hosts, cap, max_parallel):
    """The invariants of a plan, as a list of problems (empty when it holds): no wave above a cluster's budget or
    spare votes or the fleet cap; every host that needs a reboot in exactly one wave or blocked."""
    by_name = {h["host"]: h for h in hosts}
    problems = []
    placed = [name for wave in plan["waves"] for name in wave]
    for i, wave in enumerate(plan["waves"]):
        if len(wave) > max_parallel:
            problems.append("wave %d has %d hosts, above the fleet cap %d" % (i, len(wave), max_parallel))
        per_cluster = {}
        for name in wave:
            cluster = by_name[name].get("cluster")
            if cluster is not None:
                per_cluster.setdefault(cluster, []).append(by_name[name])
        for cluster, members in per_cluster.items():
            budget = plan["budgets"][cluster]
            if len(members) > min(budget["budget"], cap):
                problems.append("wave %d takes %d nodes of %s, budget %d"
                                % (i, len(members), cluster, budget["budget"]))
            if sum(h.get("votes", 1) for h in members) > budget["spare_votes"]:
                problems.append("wave %d takes more votes of %s than its %d spare"
                                % (i, cluster, budget["spare_votes"]))
    needing = [h["host"] for h in hosts if h.get("reboot")]
    for name in needing:
        count = placed.count(name) + (1 if name in plan["blocked"] else 0)
        if count != 1:
            problems.append("%s is planned %d times" % (name, count))
    problems.extend("%s needs no reboot but is in a wave" % n for n in placed if n not in needing)
    return problems
