"""The reboot wave planner (module_utils/pvetune/cluster/waves.py, issue 29): budgets per cluster, the fleet cap,
the canary, the HA manager master last, and a property test over random fleets."""
import random

import pytest
from ansible.module_utils.pvetune.cluster.waves import PlanError, check_plan, cluster_budget, plan_waves


def cluster(nodes, qdevice=False, down=0, maintenance=0, ceph=None, quorate=True):
    """A corosync cluster of ``nodes`` one-vote nodes (+ a qdevice vote): votequorum's expected votes and quorum
    (expected // 2 + 1), with ``down`` nodes already out of the total."""
    expected = nodes + (1 if qdevice else 0)
    return {"total_votes": expected - down, "quorum": expected // 2 + 1, "maintenance_votes": maintenance,
            "ceph_max": ceph, "quorate": quorate}


def hosts_of(name, count, reboot=True, master=None):
    return [{"host": "%s-n%d" % (name, i), "cluster": name, "reboot": reboot, "votes": 1,
             "ha_master": i == master} for i in range(1, count + 1)]


def test_budget_is_the_smallest_of_cap_quorum_and_ceph():
    assert cluster_budget(cluster(5), cap=4)["spare_votes"] == 2            # 5 votes, quorum 3
    assert cluster_budget(cluster(5), cap=1)["budget"] == 1
    assert cluster_budget(cluster(5, ceph=1), cap=4)["budget"] == 1
    three = cluster_budget(cluster(3, down=1), cap=2)                          # 2 of 3 up, quorum 2
    assert three["budget"] == 0 and "quorum allows no node down" in three["reason"]
    assert cluster_budget(cluster(4, maintenance=1), cap=2)["budget"] == 0      # 4 votes - 1 in maintenance - 3
    assert cluster_budget(cluster(2, qdevice=True), cap=2)["spare_votes"] == 1  # qnetd keeps a two-node cluster up
    assert cluster_budget(cluster(5, quorate=False), cap=4)["budget"] == 0


def test_waves_roll_by_cluster_not_inventory_order():
    """The 20% trap of issue 29: an inventory listed cluster by cluster put whole clusters in one batch. Waves take
    one node of every cluster at a time instead: W = the largest cluster's node count."""
    hosts = hosts_of("a", 4) + hosts_of("b", 4) + hosts_of("c", 3)
    plan = plan_waves(hosts, {"a": cluster(4), "b": cluster(4), "c": cluster(3)}, cap=1, max_parallel=8, canary=1)
    assert check_plan(plan, hosts, 1, 8) == []
    assert plan["waves"][0] == ["a-n1"]                                       # the canary
    # then the clusters with the most nodes left first: b (4), a (3), c (3); b's last node alone
    assert plan["waves"][1:] == [["b-n1", "a-n2", "c-n1"], ["b-n2", "a-n3", "c-n2"], ["b-n3", "a-n4", "c-n3"],
                                 ["b-n4"]]
    no_canary = plan_waves(hosts, {"a": cluster(4), "b": cluster(4), "c": cluster(3)}, cap=1, max_parallel=8,
                           canary=0)
    assert len(no_canary["waves"]) == 4                                       # W = the largest cluster


def test_standalone_hosts_fill_free_slots_and_go_first_as_canary():
    hosts = hosts_of("a", 3) + [{"host": "solo%d" % i, "cluster": None, "reboot": True} for i in range(5)]
    plan = plan_waves(hosts, {"a": cluster(3)}, cap=1, max_parallel=3, canary=1)
    assert plan["waves"][0] == ["solo0"]
    assert plan["waves"][1] == ["a-n1", "solo1", "solo2"]
    assert check_plan(plan, hosts, 1, 3) == []
    assert plan["why"]["solo1"].startswith("standalone: fills a free slot")


def test_the_ha_manager_master_reboots_last_and_alone_in_its_cluster():
    hosts = hosts_of("a", 5, master=1)
    plan = plan_waves(hosts, {"a": cluster(5)}, cap=2, max_parallel=10, canary=0)
    assert plan["waves"] == [["a-n2", "a-n3"], ["a-n4", "a-n5"], ["a-n1"]]
    assert "HA manager master last" in plan["why"]["a-n1"]


def test_a_cluster_without_budget_is_blocked_with_the_reason_and_hosts_without_reboot_stay_out():
    hosts = hosts_of("a", 3) + hosts_of("b", 2, reboot=False)
    plan = plan_waves(hosts, {"a": cluster(3, down=1), "b": cluster(2)}, cap=1, max_parallel=4)
    assert plan["waves"] == [] and set(plan["blocked"]) == {"a-n1", "a-n2", "a-n3"}
    assert "quorum allows no node down (2 votes, quorum 2)" in plan["blocked"]["a-n1"]
    assert plan["no_reboot"] == ["b-n1", "b-n2"]


@pytest.mark.parametrize("kw,word", [({"cap": 0}, "pvetune_cluster_max_down"),
                                     ({"max_parallel": "8"}, "pvetune_max_parallel"),
                                     ({"canary": -1}, "pvetune_canary")])
def test_bad_values_are_refused_by_name(kw, word):
    with pytest.raises(PlanError, match=word):
        plan_waves(hosts_of("a", 2), {"a": cluster(2)}, **kw)


def test_a_host_of_an_unknown_cluster_is_refused():
    with pytest.raises(PlanError, match="names cluster 'x'"):
        plan_waves([{"host": "h", "cluster": "x", "reboot": True}], {})


def random_fleet(rng):
    hosts, clusters = [], {}
    for c in range(rng.randint(1, 40)):
        name = "c%d" % c
        nodes = rng.randint(1, 7)
        clusters[name] = cluster(nodes, qdevice=rng.random() < 0.3, down=rng.choice([0, 0, 0, 1]) if nodes > 2 else 0,
                                 maintenance=rng.choice([0, 0, 1]) if nodes > 3 else 0,
                                 ceph=rng.choice([None, None, 0, 1, 2, 3]), quorate=rng.random() > 0.05)
        members = hosts_of(name, nodes, master=rng.randint(0, nodes))
        for host in members:
            host["reboot"] = rng.random() < 0.8
        hosts.extend(members)
    hosts.extend({"host": "solo%d" % i, "cluster": None, "reboot": rng.random() < 0.8}
                 for i in range(rng.randint(0, 10)))
    rng.shuffle(hosts)
    return hosts, clusters


def test_no_wave_ever_exceeds_a_budget_or_the_fleet_cap_and_every_host_is_planned_once():
    """Issue 29, done when: random fleets (1-40 clusters of 1-7 nodes, qdevices, nodes down, HA maintenance, Ceph
    answers, standalone hosts), random caps."""
    rng = random.Random(29)
    for _ in range(400):
        hosts, clusters = random_fleet(rng)
        cap, max_parallel, canary = rng.randint(1, 4), rng.randint(1, 12), rng.randint(0, 2)
        plan = plan_waves(hosts, clusters, cap=cap, max_parallel=max_parallel, canary=canary)
        assert check_plan(plan, hosts, cap, max_parallel) == [], (cap, max_parallel, canary)
        if canary and plan["waves"]:
            assert len(plan["waves"][0]) <= canary
