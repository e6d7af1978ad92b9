# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reboot waves for a fleet: which hosts may reboot together, planned once on the controller (issue 29).

Two hundred hosts rebooted one at a time take a day; rebooted in waves they take as many reboots as the largest
cluster has nodes. What bounds a wave:

* each cluster's budget, the nodes that may be down together: the smallest of the policy cap
  (``pvetune_cluster_max_down``), what quorum allows (votequorum(5): the votes a partition may lose and stay at
  ``Quorum``: total votes now, which leave out the nodes already down, minus the votes of nodes in HA maintenance,
  minus the quorum) and what Ceph allows, when the cluster runs Ceph;
* Ceph's own answer per node (``ceph osd ok-to-stop <its OSDs> --max``, asked by the discovery): the nodes whose OSDs
  may stop together with its own.  A wave takes a group of a cluster's nodes only when one of them has all the
  others' OSDs in its answer (a subset of a set that may stop may stop too), and no more monitors than may stop
  with a majority left;
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

    ``cluster``: {"name", "total_votes", "quorum", "maintenance_votes" (0), "ceph_max" (the largest group Ceph's
    answers allow; None: no Ceph, or no node's OSDs hold it back), "mon_spare" (monitors that may stop; None: no
    limit known), "quorate"}.  quorum_allows is counted in votes here (spare_votes); the planner spends them node by
    node."""
    spare = cluster["total_votes"] - cluster.get("maintenance_votes", 0) - cluster["quorum"]
    if not cluster.get("quorate", True):
        spare = -1
    # Ceph's answers bound which nodes go together (ceph_together), not how many: a node without OSDs adds nothing;
    # ceph_max (the largest answer) only tells the operator.
    ceph = cluster.get("ceph_max")
    out = {"cap": cap, "spare_votes": max(spare, 0), "ceph_allows": ceph, "budget": cap,
           "mon_spare": cluster.get("mon_spare")}
    if spare < 0:
        out.update(budget=0, reason="the cluster is not quorate now")
    elif spare == 0:
        out.update(budget=0, reason="quorum allows no node down (%d votes, quorum %d%s)" % (
            cluster["total_votes"], cluster["quorum"],
            ", %d in HA maintenance" % cluster["maintenance_votes"] if cluster.get("maintenance_votes") else ""))
    else:
        limits = ["cap %d" % cap, "%d spare vote(s)" % spare] + (
            ["Ceph lets %d stop together" % ceph] if ceph is not None else []) + (
            ["%d monitor(s) may stop" % out["mon_spare"]] if out["mon_spare"] is not None else [])
        out["reason"] = "up to %d node(s) at once (%s)" % (min(cap, spare), ", ".join(limits))
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
        if host.get("blocked") is not None and not isinstance(host["blocked"], str):
            raise PlanError("blocked of %s must be a reason (text), got %r" % (name, host["blocked"]))
        with_ = host.get("ceph_with")
        if with_ is not None and not (isinstance(with_, list) and all(isinstance(n, str) for n in with_)):
            raise PlanError("ceph_with of %s must be a list of host names, got %r" % (name, with_))


def _fits(host, taken, left, budget):
    """May ``host`` join ``taken`` (the nodes of its cluster already in this wave; ``left``: those still to plan)?"""
    if host.get("ha_master") and (taken or len(left) > 1):
        return False   # the HA manager master reboots alone, after every other node of its cluster
    if len(taken) >= budget["budget"] or sum(h.get("votes", 1) for h in taken + [host]) > budget["spare_votes"]:
        return False
    if host.get("mon") and budget["mon_spare"] is not None and \
            sum(1 for h in taken + [host] if h.get("mon")) > budget["mon_spare"]:
        return False
    return ceph_together(taken + [host])


def ceph_together(group):
    """Whether Ceph's answers let the OSDs of ``group`` stop together: one member's answer holds every other member
    whose OSDs hold it back (ok-to-stop is monotone: what is left of a set that may stop may stop too)."""
    held = [h for h in group if h.get("ceph_with") is not None]
    names = {h["host"] for h in held}
    return not held or any(names <= set(h["ceph_with"]) | {h["host"]} for h in held if h["ceph_with"])


def _unplannable(host, budget):
    """Why a host of a cluster with a budget can never join a wave, or None."""
    if host.get("votes", 1) > budget["spare_votes"]:
        return "its %d votes are more than the %d the cluster may lose" % (
            host.get("votes", 1), budget["spare_votes"])
    if host.get("mon") and budget["mon_spare"] == 0:
        return "Ceph: its monitor may not stop (a majority of the monitors must stay in quorum)"
    if host.get("ceph_with") == []:
        return "Ceph: ok-to-stop says its OSDs may not stop now"
    return None


def plan_waves(hosts, clusters, cap=1, max_parallel=10, canary=1):
    """The reboot plan.

    ``hosts``: [{"host", "reboot" (bool), "cluster" (name or None), "votes" (1), "ha_master" (False), "blocked"
    (None, or why the host must not reboot now: it is not planned)}], in inventory order.
    ``clusters``: {name: {"total_votes", "quorum", "maintenance_votes", "ceph_max", "quorate"}}.
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
        if host.get("blocked"):
            blocked[name] = host["blocked"]
        elif cluster is None:
            standalone.append(host)
        elif budgets[cluster]["budget"] == 0:
            blocked[name] = "cluster %s: %s" % (cluster, budgets[cluster]["reason"])
        else:
            never = _unplannable(host, budgets[cluster])
            if never:
                blocked[name] = "cluster %s: %s" % (cluster, never)
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
            if _fits(host, [], left[cluster], budgets[cluster]):
                wave.append(left[cluster].pop(0))
        for host in wave:
            why[host["host"]] = "canary: the first wave, alone before the others"
        waves.append([h["host"] for h in wave])
        left = {c: m for c, m in left.items() if m}
    while left or standalone:
        wave, slots = [], max_parallel
        for cluster in sorted(left, key=lambda c: (-len(left[c]), c)):
            taken = []
            for host in list(left[cluster]):
                if not slots:
                    break
                if not _fits(host, taken, left[cluster], budgets[cluster]):
                    continue
                taken.append(host)
                left[cluster].remove(host)
                slots -= 1
                wave.append(host)
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
            "no_reboot": [h["host"] for h in hosts if not h.get("reboot")], "cap": cap, "max_parallel": max_parallel,
            "canary": canary}


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
            if not ceph_together(members):
                problems.append("wave %d takes nodes of %s whose OSDs Ceph did not let stop together" % (i, cluster))
            if budget["mon_spare"] is not None and sum(1 for h in members if h.get("mon")) > budget["mon_spare"]:
                problems.append("wave %d stops more monitors of %s than the %d that may stop"
                                % (i, cluster, budget["mon_spare"]))
            if any(h.get("ha_master") for h in members) and len(members) > 1:
                problems.append("wave %d reboots the HA manager master of %s with other nodes" % (i, cluster))
    needing = [h["host"] for h in hosts if h.get("reboot")]
    for name in needing:
        count = placed.count(name) + (1 if name in plan["blocked"] else 0)
        if count != 1:
            problems.append("%s is planned %d times" % (name, count))
    problems.extend("%s needs no reboot but is in a wave" % n for n in placed if n not in needing)
    return problems


def plan_inputs(discovery):
    """plan_waves' ``hosts`` and ``clusters`` from the read-only discovery, {host: {"reboot": bool, "gate": the
    cluster gate's ``check`` summary (its ``wave`` view, asked with ``ceph_sets``) or None}}, in inventory order.

    A cluster's numbers are the most cautious any of its nodes reported (fewest votes, most in maintenance, fewest
    monitors that may stop); a node the gate refuses now (guests under refuse, Ceph says no for its own OSDs,
    HEALTH_ERR) is blocked with the gate's reasons; a one-node cluster plans as a standalone host (no quorum of
    another node depends on it).  Ceph's answers name corosync nodes; they become inventory names here (a node
    that is not in this run is not planned anyway)."""
    hosts, clusters, names, nodes = [], {}, {}, {}
    for name, found in discovery.items():
        gate = found.get("gate")
        entry = {"host": name, "reboot": bool(found.get("reboot")), "cluster": None}
        hosts.append(entry)
        if not entry["reboot"]:
            continue
        if not isinstance(gate, dict) or not isinstance(gate.get("wave"), dict):
            raise PlanError("host %s needs a reboot but the discovery has no cluster gate reading of it" % name)
        view = gate["wave"]
        if not gate.get("allowed", False):
            entry["blocked"] = "the cluster gate refuses it now: " + " | ".join(gate.get("refusals") or ["?"])
        entry.update(votes=view.get("votes", 1), ha_master=bool(view.get("ha_master")))
        if view.get("cluster") is None:
            continue
        # Two clusters may share corosync's cluster name (each admin chose it): the node list tells them apart.
        members = tuple(view.get("members") or ())
        key = names.setdefault((view["cluster"], members), view["cluster"] if not any(
            c == view["cluster"] for c, _m in names) else "%s (%s)" % (view["cluster"], ",".join(members[:1])))
        entry.update(cluster=key, mon=bool(view.get("mon")), view=view)
        nodes.setdefault(key, {})[view.get("node")] = name
        seen = clusters.get(key)
        mine = {"total_votes": view["total_votes"], "quorum": view["quorum"], "quorate": bool(view["quorate"]),
                "maintenance_votes": view.get("maintenance_votes", 0), "mon_spare": view.get("mon_spare")}
        if seen is None:
            clusters[key] = mine
            continue
        spares = [m for m in (seen["mon_spare"], mine["mon_spare"]) if m is not None]
        seen.update(total_votes=min(seen["total_votes"], mine["total_votes"]),
                    quorum=max(seen["quorum"], mine["quorum"]), quorate=seen["quorate"] and mine["quorate"],
                    maintenance_votes=max(seen["maintenance_votes"], mine["maintenance_votes"]),
                    mon_spare=min(spares) if spares else None)
    for entry in hosts:
        view = entry.pop("view", None)
        if view is None or not view.get("ceph"):
            continue
        with_ = view.get("ceph_with")
        if with_ == []:   # Ceph said no for this node's own OSDs
            entry["ceph_with"] = []
        elif with_ is None and view.get("ceph_why") is None:
            entry["ceph_with"] = [entry["host"]]   # Ceph was not asked (an older gate): this node alone
        elif with_ is not None:
            entry["ceph_with"] = [entry["host"]] + [nodes[entry["cluster"]][n] for n in with_
                                                    if n in nodes[entry["cluster"]] and n != view.get("node")]
    for key, cluster in clusters.items():
        answers = [len(h["ceph_with"]) for h in hosts if h.get("cluster") == key and h.get("ceph_with")]
        cluster["ceph_max"] = max(answers) if answers else None
    return hosts, clusters


def batch_sizes(count, serial):
    """How ansible-playbook's ``serial`` (a number, "N%", or a list of them, the last repeating) cuts ``count`` hosts
    into batches (its pct_to_int: a percentage of the hosts, at least 1)."""
    items = serial if isinstance(serial, list) else [serial]
    sizes = []
    while sum(sizes) < count:
        item = str(items[min(len(sizes), len(items) - 1)])
        size = max(1, int(count * int(item[:-1]) / 100.0)) if item.endswith("%") else int(item)
        sizes.append(min(max(size, 1), count - sum(sizes)))
    return sizes


def rolling_order(plan, hosts, batch, serial):
    """The rolling play's host order and serial list: first the hosts that do not reboot by the plan (no reboot
    predicted, unless ``batch`` sends those to the batch play; blocked ones), ``serial`` at a time as before; then
    the waves, one batch each. {"first": [...], "first_serial": [...], "order": [...], "serial": [...],
    "wave_of": {host: wave index}}."""
    planned = {name for wave in plan["waves"] for name in wave}
    first = [h["host"] for h in hosts if h["host"] not in planned and (h["host"] in plan["blocked"] or not batch)]
    first_serial = batch_sizes(len(first), serial)
    return {"first": first, "first_serial": first_serial,
            "order": first + [name for wave in plan["waves"] for name in wave],
            "serial": first_serial + [len(wave) for wave in plan["waves"]],
            "wave_of": {name: i for i, wave in enumerate(plan["waves"]) for name in wave}}


def plan_lines(plan, hosts, minutes, forks=None):
    """The plan as the operator reads it: waves with each host's cluster, the hosts that wait and why, each cluster's
    budget, the expected wall time at ``minutes`` a wave (the hosts of a wave reboot together)."""
    cluster_of = {h["host"]: h.get("cluster") for h in hosts}
    waves = plan["waves"]
    total = sum(len(w) for w in waves)
    lines = ["%d host(s) to reboot in %d wave(s), largest %d (fleet cap %d, per cluster at most %d, canary %d); "
             "~%d min at %g min a wave%s" % (
                 total, len(waves), max([len(w) for w in waves] or [0]), plan["max_parallel"], plan["cap"],
                 plan["canary"], round(len(waves) * minutes), minutes,
                 "" if not plan["blocked"] else "; %d blocked" % len(plan["blocked"]))]
    for i, wave in enumerate(waves):
        lines.append("wave %d%s: %s" % (i + 1, " (canary)" if any(plan["why"].get(n, "").startswith("canary")
                                                                  for n in wave) else "",
                                        ", ".join("%s [%s]" % (n, cluster_of[n] or "standalone") for n in wave)))
    for name, reason in sorted(plan["blocked"].items()):
        lines.append("blocked, fixed without a reboot (ends pending-reboot): %s [%s]: %s"
                     % (name, cluster_of[name] or "standalone", reason))
    for name, budget in sorted(plan["budgets"].items()):
        lines.append("cluster %s: %s" % (name, budget["reason"]))
    if forks is not None and waves and max(len(w) for w in waves) > forks:
        lines.append("warning: the largest wave (%d) is above ansible's forks (%d): raise forks (-f) so a wave's hosts "
                     "reboot together" % (max(len(w) for w in waves), forks))
    return lines


ARGUMENT_SPEC = dict(
    state=dict(type="str", default="plan", choices=["plan", "between"]),
    discovery=dict(type="dict", default={}),
    cluster_max_down=dict(type="int", default=1),
    max_parallel=dict(type="int", default=10),
    canary=dict(type="int", default=1),
    minutes=dict(type="float", default=6.0),
    batch=dict(type="bool", default=False),
    serial=dict(type="raw", default=1),
    forks=dict(type="int"),
    wave=dict(type="int", default=0),
    waves=dict(type="int", default=0),
    control_dir=dict(type="path"),
    windows=dict(type="list", elements="raw", default=[]),
    gate_cmd=dict(type="raw"),
    gate_timeout=dict(type="int", default=300),
    pause_poll=dict(type="int", default=10),
    pause_timeout=dict(type="int", default=86400),
)


def plan_rollout(params):
    """state=plan: the plan, the rolling play's order and serial, and the operator's lines."""
    hosts, clusters = plan_inputs(params["discovery"])
    plan = plan_waves(hosts, clusters, params["cluster_max_down"], params["max_parallel"], params["canary"])
    problems = check_plan(plan, hosts, params["cluster_max_down"], params["max_parallel"])
    if problems:   # a planner bug must not reach a cluster
        raise PlanError("the plan breaks its own bounds: " + "; ".join(problems))
    if params["minutes"] <= 0:
        raise PlanError("pvetune_wave_minutes must be above 0, got %r" % params["minutes"])
    out = rolling_order(plan, hosts, params["batch"], params["serial"])
    lines = plan_lines(plan, hosts, params["minutes"], params["forks"])
    if out["first"]:
        lines.insert(1, "first, %s at a time (no reboot by the plan): %s" % (
            "/".join(str(s) for s in sorted(set(out["first_serial"]))), ", ".join(out["first"])))
    out.update(plan=plan, lines=lines, msg=lines[0], changed=False)
    return out


def waves_call(params, run_command, check_mode, diff):
    """pvetune_waves' one call: ``(failed, result, warnings)``."""
    from ansible.module_utils.pvetune.cluster.between import between_waves, gate_argv, parse_windows
    try:
        if params["state"] == "plan":   # the controls between waves are checked before any host is touched
            parse_windows(params["windows"])
            gate_argv(params["gate_cmd"])
            return False, plan_rollout(params), []
        for name in ("gate_timeout", "pause_poll", "pause_timeout"):
            _positive_int(params[name], name)
        if not params["control_dir"]:
            raise PlanError("control_dir is required with state=between")
        return False, dict(between_waves(params, check_mode), changed=False), []
    except (PlanError, ValueError) as exc:
        return True, {"msg": str(exc), "changed": False}, []
