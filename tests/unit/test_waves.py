"""The reboot wave planner (module_utils/pvetune/cluster/waves.py, issue 29): budgets per cluster, the fleet cap,
the canary, the HA manager master last, and a property test over random fleets."""
import random
from datetime import datetime

import pytest
from ansible.module_utils.pvetune.cluster.between import between_waves, gate_argv, in_window, parse_windows, run_gate
from ansible.module_utils.pvetune.cluster.waves import (
    PlanError, batch_sizes, check_plan, cluster_budget, plan_inputs, plan_rollout, plan_waves, rolling_order,
    waves_call)


def cluster(nodes, qdevice=False, down=0, maintenance=0, ceph=None, quorate=True, mon_spare=None):
    """A corosync cluster of ``nodes`` one-vote nodes (+ a qdevice vote): votequorum's expected votes and quorum
    (expected // 2 + 1), with ``down`` nodes already out of the total."""
    expected = nodes + (1 if qdevice else 0)
    return {"total_votes": expected - down, "quorum": expected // 2 + 1, "maintenance_votes": maintenance,
            "ceph_max": ceph, "quorate": quorate, "mon_spare": mon_spare}


def hosts_of(name, count, reboot=True, master=None):
    return [{"host": "%s-n%d" % (name, i), "cluster": name, "reboot": reboot, "votes": 1,
             "ha_master": i == master} for i in range(1, count + 1)]


def test_budget_is_the_smaller_of_cap_and_quorum():
    assert cluster_budget(cluster(5), cap=4)["spare_votes"] == 2            # 5 votes, quorum 3
    assert cluster_budget(cluster(5), cap=1)["budget"] == 1
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
        ceph = rng.random() < 0.5
        clusters[name] = cluster(nodes, qdevice=rng.random() < 0.3, down=rng.choice([0, 0, 0, 1]) if nodes > 2 else 0,
                                 maintenance=rng.choice([0, 0, 1]) if nodes > 3 else 0, quorate=rng.random() > 0.05,
                                 mon_spare=rng.choice([None, 0, 1, 1, 2]) if ceph else None)
        members = hosts_of(name, nodes, master=rng.randint(0, nodes))
        for host in members:
            host["reboot"] = rng.random() < 0.8
            if ceph:   # Ceph's answer: no OSDs (None), may not stop ([]), or itself and some others
                others = [h["host"] for h in members if h is not host and rng.random() < 0.4]
                host["ceph_with"] = rng.choice([None, [], [host["host"]] + others, [host["host"]] + others])
                host["mon"] = rng.random() < 0.5
        answers = [len(h["ceph_with"]) for h in members if h.get("ceph_with")]
        clusters[name]["ceph_max"] = max(answers) if ceph and answers else None
        hosts.extend(members)
    hosts.extend({"host": "solo%d" % i, "cluster": None, "reboot": rng.random() < 0.8}
                 for i in range(rng.randint(0, 10)))
    rng.shuffle(hosts)
    return hosts, clusters


def ceph_and_monitors_hold(plan, hosts, clusters):
    """An oracle of its own (not check_plan's ceph_together): in every wave, the nodes of a cluster whose OSDs hold it
    back all lie in one of their answers, and its monitor nodes are at most its spare."""
    by_name = {h["host"]: h for h in hosts}
    for wave in plan["waves"]:
        for name in {by_name[n].get("cluster") for n in wave} - {None}:
            group = [by_name[n] for n in wave if by_name[n].get("cluster") == name]
            held = {h["host"] for h in group if h.get("ceph_with") is not None}
            if held and not [h for h in group if h["host"] in held and held <= set(h["ceph_with"]) | {h["host"]}]:
                return False
            spare = clusters[name].get("mon_spare")
            if spare is not None and len([h for h in group if h.get("mon")]) > spare:
                return False
    return True


def test_no_wave_ever_exceeds_a_budget_or_the_fleet_cap_and_every_host_is_planned_once():
    """Issue 29, done when: random fleets (1-40 clusters of 1-7 nodes, qdevices, nodes down, HA maintenance, Ceph
    answers, standalone hosts), random caps."""
    rng = random.Random(29)
    for _ in range(400):
        hosts, clusters = random_fleet(rng)
        cap, max_parallel, canary = rng.randint(1, 4), rng.randint(1, 12), rng.randint(0, 2)
        plan = plan_waves(hosts, clusters, cap=cap, max_parallel=max_parallel, canary=canary)
        assert check_plan(plan, hosts, cap, max_parallel) == [], (cap, max_parallel, canary)
        assert ceph_and_monitors_hold(plan, hosts, clusters)
        if canary and plan["waves"]:
            assert len(plan["waves"][0]) <= canary


def test_ceph_groups_only_nodes_its_answers_let_stop_together_and_keeps_a_monitor_majority():
    """Racks of two nodes: Ceph's ok-to-stop --max from a node grows to its rack neighbour only (the pools' failure
    domain is the rack), so a wave takes a rack, never one node of each of two racks. Three monitors, one may
    stop: two monitor nodes never reboot together."""
    hosts = hosts_of("a", 6)
    for i, host in enumerate(hosts):
        pair = i - i % 2
        host["ceph_with"] = [host["host"], hosts[pair + 1 - i % 2]["host"]]
    plan = plan_waves(hosts, {"a": cluster(6, ceph=2)}, cap=3, max_parallel=10, canary=0)
    assert plan["waves"] == [["a-n1", "a-n2"], ["a-n3", "a-n4"], ["a-n5", "a-n6"]]
    assert check_plan(plan, hosts, 3, 10) == []
    assert "Ceph lets 2 stop together" in plan["budgets"]["a"]["reason"]
    mons = hosts_of("m", 5)
    for host in mons[:3]:
        host["mon"] = True
    plan = plan_waves(mons, {"m": cluster(5, mon_spare=1)}, cap=2, max_parallel=10, canary=0)
    assert plan["waves"] == [["m-n1", "m-n4"], ["m-n2", "m-n5"], ["m-n3"]]
    assert check_plan(plan, mons, 2, 10) == []
    bad = {"waves": [["m-n1", "m-n2"], ["m-n3"], ["m-n4", "m-n5"]], "blocked": {}, "budgets": plan["budgets"]}
    assert check_plan(bad, mons, 2, 10) == ["wave 0 stops more monitors of m than the 1 that may stop"]
    none = plan_waves(mons, {"m": cluster(5, mon_spare=0)}, cap=2, max_parallel=10, canary=0)
    assert none["waves"] == [["m-n4", "m-n5"]] and "its monitor may not stop" in none["blocked"]["m-n1"]


def test_plan_inputs_turn_cephs_node_names_into_inventory_names():
    """Ceph answers in corosync names; the inventory may call the hosts otherwise. A node without OSDs is not held
    back; a node not in this run drops out of the answers."""
    members = ["pve-a1", "pve-a2", "pve-a3", "pve-a4", "pve-a5", "pve-a6", "pve-a7"]   # quorum 4: 3 may go
    views = {"pve-a1": ["pve-a1", "pve-a2", "pve-a4"], "pve-a2": ["pve-a2", "pve-a1"], "pve-a3": None,
             "pve-a5": []}   # pve-a5: Ceph said no (with --max) although it said yes a moment before
    discovery = {}
    for node, with_ in views.items():
        found = gate_of("pve", members, node, ceph=True)
        found["wave"].update(ceph_with=with_, ceph_why="x", mon=node == "pve-a1", mon_spare=1)
        discovery[node + ".lan"] = {"reboot": True, "gate": found}
    hosts, clusters = plan_inputs(discovery)
    by_name = {h["host"]: h for h in hosts}
    assert by_name["pve-a1.lan"]["ceph_with"] == ["pve-a1.lan", "pve-a2.lan"]   # pve-a4 is not in this run
    assert by_name["pve-a3.lan"].get("ceph_with") is None and by_name["pve-a1.lan"]["mon"]
    assert clusters["pve"]["ceph_max"] == 2 and clusters["pve"]["mon_spare"] == 1
    assert by_name["pve-a5.lan"]["ceph_with"] == []
    plan = plan_waves(hosts, clusters, cap=3, max_parallel=10, canary=0)
    assert plan["waves"] == [["pve-a1.lan", "pve-a2.lan", "pve-a3.lan"]] and check_plan(plan, hosts, 3, 10) == []
    assert "ok-to-stop says its OSDs may not stop now" in plan["blocked"]["pve-a5.lan"]


def gate_of(cluster_name, members, node, total=None, quorum=None, maintenance=0, master=False, ceph=False,
            allowed=True, refusals=()):
    """The cluster gate's check summary of one node (its wave view), as pvetune_cluster_gate returns it."""
    total = len(members) if total is None else total
    view = {"cluster": cluster_name, "members": sorted(members), "node": node, "votes": 1, "total_votes": total,
            "quorum": len(members) // 2 + 1 if quorum is None else quorum, "quorate": True,
            "maintenance_votes": maintenance, "ha_master": master, "ceph": ceph}
    return {"allowed": allowed, "refusals": list(refusals), "wave": view}


def test_plan_inputs_from_the_discovery():
    """Clusters from the gate's readings: the most cautious numbers of their nodes; a node the gate refuses now is
    blocked with its reasons; two clusters of one name stay apart; a host without a reboot needs no reading."""
    a = ["pve-a1", "pve-a2", "pve-a3"]
    other = ["pve-x1", "pve-x2", "pve-x3"]
    discovery = {
        "pve-a1": {"reboot": True, "gate": gate_of("pve", a, "pve-a1", ceph=True)},
        "pve-a2": {"reboot": True, "gate": gate_of("pve", a, "pve-a2", maintenance=1, master=True)},
        "pve-a3": {"reboot": True, "gate": gate_of("pve", a, "pve-a3", allowed=False,
                                                   refusals=["guests pvetune does not manage run on pve-a3"])},
        "pve-x1": {"reboot": True, "gate": gate_of("pve", other, "pve-x1")},
        "solo": {"reboot": True, "gate": {"allowed": True, "refusals": [], "wave": {"cluster": None, "votes": 1}}},
        "quiet": {"reboot": False, "gate": None},
    }
    hosts, clusters = plan_inputs(discovery)
    assert sorted(clusters) == ["pve", "pve (pve-x1)"]
    assert clusters["pve"] == {"total_votes": 3, "quorum": 2, "quorate": True, "maintenance_votes": 1, "ceph_max": 1,
                               "mon_spare": None}   # Ceph not asked for its sets: each node alone
    by_name = {h["host"]: h for h in hosts}
    assert by_name["pve-a3"]["blocked"].startswith("the cluster gate refuses it now: guests pvetune")
    assert by_name["pve-a2"]["ha_master"] and by_name["solo"]["cluster"] is None and not by_name["quiet"]["reboot"]
    plan = plan_waves(hosts, clusters, cap=2, max_parallel=10, canary=0)
    assert check_plan(plan, hosts, 2, 10) == []
    # 3 votes - 1 in maintenance - quorum 2 = no spare vote: the cluster "pve" is blocked; the other is not
    assert set(plan["blocked"]) == {"pve-a1", "pve-a2", "pve-a3"} and plan["waves"] == [["pve-x1", "solo"]]
    with pytest.raises(PlanError, match="quiet needs a reboot but the discovery has no cluster gate reading"):
        plan_inputs(dict(discovery, quiet={"reboot": True, "gate": None}))


@pytest.mark.parametrize("count, serial, sizes", [
    (5, 1, [1, 1, 1, 1, 1]), (5, 2, [2, 2, 1]), (10, "20%", [2, 2, 2, 2, 2]), (3, "10%", [1, 1, 1]),
    (7, [1, 3, "50%"], [1, 3, 3]), (0, 1, [])])
def test_batch_sizes_cut_as_ansible_serial_does(count, serial, sizes):
    assert batch_sizes(count, serial) == sizes


def test_the_rolling_order_puts_the_hosts_that_do_not_reboot_first_then_one_batch_per_wave():
    hosts = hosts_of("a", 3) + [{"host": "idle%d" % i, "cluster": None, "reboot": False} for i in range(3)]
    hosts[2]["blocked"] = "the cluster gate refuses it now: x"
    plan = plan_waves(hosts, {"a": cluster(5)}, cap=2, max_parallel=10, canary=1)
    out = rolling_order(plan, hosts, batch=False, serial=2)
    assert out["first"] == ["a-n3", "idle0", "idle1", "idle2"] and out["first_serial"] == [2, 2]
    assert out["order"] == out["first"] + ["a-n1", "a-n2"] and out["serial"] == [2, 2, 1, 1]
    assert out["wave_of"] == {"a-n1": 0, "a-n2": 1}
    batched = rolling_order(plan, hosts, batch=True, serial=2)   # the batch play takes the idle hosts
    assert batched["first"] == ["a-n3"] and batched["serial"] == [1, 1, 1]


def test_plan_rollout_says_the_plan_in_lines_and_warns_of_forks():
    discovery = {"n%d" % i: {"reboot": True, "gate": gate_of("c", ["n1", "n2", "n3", "n4", "n5"], "n%d" % i)}
                 for i in range(1, 6)}
    discovery.update({"s%d" % i: {"reboot": True, "gate": {"allowed": True, "refusals": [],
                                                           "wave": {"cluster": None}}} for i in range(4)})
    params = {"discovery": discovery, "cluster_max_down": 2, "max_parallel": 4, "canary": 1,
              "minutes": 6.0, "batch": False, "serial": 1, "forks": 3}
    out = plan_rollout(params)
    assert out["plan"]["waves"] == [["s0"], ["n1", "n2", "s1", "s2"], ["n3", "n4", "s3"], ["n5"]]
    assert out["lines"][0] == ("9 host(s) to reboot in 4 wave(s), largest 4 (fleet cap 4, per cluster at most 2, "
                               "canary 1); ~24 min at 6 min a wave")
    assert out["lines"][1] == "wave 1 (canary): s0 [standalone]"
    assert "cluster c: up to 2 node(s) at once (cap 2, 2 spare vote(s))" in out["lines"]
    assert out["lines"][-1].startswith("warning: the largest wave (4) is above ansible's forks (3)")
    failed, result, _ = waves_call(dict(params, state="plan", cluster_max_down=0, windows=[], gate_cmd=None), None,
                                   False, False)
    assert failed and "pvetune_cluster_max_down must be an integer >= 1" in result["msg"]


WINDOWS = [{"days": ["sat", "sun"], "start": "22:00", "end": "06:00"}, {"days": ["wed"], "start": "12:00",
                                                                         "end": "13:30"}]


@pytest.mark.parametrize("when, is_open", [
    (datetime(2026, 12, 5, 22, 0), True),     # Saturday 22:00, the window opens
    (datetime(2026, 12, 5, 21, 59), False),
    (datetime(2026, 12, 6, 5, 59), True),     # Sunday early: Saturday's window, past midnight
    (datetime(2026, 12, 7, 5, 59), True),     # Monday early: Sunday's window, past midnight
    (datetime(2026, 12, 7, 6, 0), False),     # Monday 06:00: closed
    (datetime(2026, 12, 5, 3, 0), False),     # Saturday early: Friday has no window
    (datetime(2026, 12, 9, 13, 29), True), (datetime(2026, 12, 9, 13, 30), False)])
def test_windows_across_midnight_belong_to_the_day_they_start(when, is_open):
    assert in_window(parse_windows(WINDOWS), when)[0] is is_open


@pytest.mark.parametrize("windows, word", [
    ("sat 22-06", "must be a list"), ([{"start": "25:00", "end": "06:00"}], "start must be a time HH:MM"),
    ([{"days": ["someday"], "start": "01:00", "end": "02:00"}], "days must be a list of day names"),
    ([{"start": "01:00", "end": "01:00"}], "make no range"), ([{"start": "01:00", "end": "02:00", "tz": "x"}],
                                                             "mapping of days, start and end")])
def test_bad_windows_are_refused_by_name(windows, word):
    with pytest.raises(ValueError, match=word):
        parse_windows(windows)


def between(tmp_path, check_mode=False, files=(), when=datetime(2026, 12, 5, 23, 0), gate_rc=0, **params):
    for name in files:
        (tmp_path / name).write_text("")
    base = {"wave": 1, "waves": 4, "control_dir": str(tmp_path), "windows": WINDOWS, "gate_cmd": None,
            "gate_timeout": 5, "pause_poll": 10, "pause_timeout": 30}
    base.update(params)
    slept, ran = [], []

    def sleep(seconds):   # the operator removes the pause file while the run waits
        slept.append(seconds)
        if len(slept) == 2 and (tmp_path / "fix.pause").exists():
            (tmp_path / "fix.pause").unlink()

    def gate(argv, timeout):
        ran.append(argv)
        return gate_rc, "2 alerts firing: NodeDown pve-a1\n"
    return between_waves(base, check_mode, now=lambda: when, sleep=sleep, gate=gate), slept, ran


def test_between_waves_stop_file_windows_pause_and_gate_command(tmp_path):
    out, _slept, _ran = between(tmp_path)
    assert out == {"stop": False, "waited": 0, "reason": "", "msg": "wave 2 of 4 may start"}
    out, _slept, _ran = between(tmp_path, when=datetime(2026, 12, 7, 9, 0))
    assert out["stop"] and out["msg"] == ("stopped before wave 2 of 4: outside every reboot window (now mon 09:00, "
                                          "controller local time)")
    out, slept, _ran = between(tmp_path, files=["fix.pause"])
    assert not out["stop"] and slept == [10, 10] and out["waited"] == 20
    out, _slept, ran = between(tmp_path, gate_cmd="/usr/local/bin/alerts-quiet --cluster 'gpu a'", gate_rc=1)
    assert ran == [["/usr/local/bin/alerts-quiet", "--cluster", "gpu a"]]
    assert out["stop"] and out["reason"] == ("the gate command /usr/local/bin/alerts-quiet --cluster 'gpu a' exited 1:"
                                             " 2 alerts firing: NodeDown pve-a1")
    out, slept, ran = between(tmp_path, files=["fix.pause", "fix.stop"], gate_cmd=["true"])
    assert out["stop"] and "the stop file %s exists" % (tmp_path / "fix.stop") in out["reason"]
    assert slept == [] and ran == []
    (tmp_path / "fix.stop").unlink()


def test_between_waves_a_pause_that_lasts_stops_and_check_mode_never_waits_or_stops(tmp_path):
    (tmp_path / "fix.pause").write_text("")
    out = between_waves({"wave": 0, "waves": 2, "control_dir": str(tmp_path), "windows": [], "gate_cmd": None,
                         "gate_timeout": 5, "pause_poll": 10, "pause_timeout": 30}, False, sleep=lambda s: None)
    assert out["stop"] and out["waited"] == 30 and "was there for 30 s (pvetune_pause_timeout)" in out["reason"]
    out, slept, ran = between(tmp_path, check_mode=True, files=["fix.pause"], gate_cmd=["alerts-quiet"])
    assert not out["stop"] and slept == [] and ran == []
    assert out["msg"] == ("wave 2 of 4 may start: would wait while the pause file %s exists; would run the gate "
                          "command alerts-quiet" % (tmp_path / "fix.pause"))
    out, _slept, _ran = between(tmp_path, check_mode=True, files=["fix.stop"])
    assert not out["stop"] and out["msg"].startswith("would stop before wave 2 of 4: the stop file")


def test_a_gate_command_that_cannot_start_stops_the_rollout():
    assert run_gate(["/nonexistent/pvetune-gate"], 5)[0] == 127
    assert run_gate(["sh", "-c", "echo quiet; exit 0"], 5) == (0, "quiet\n")
    with pytest.raises(ValueError, match="pvetune_wave_gate_cmd must be a command line or a list of words"):
        gate_argv({"cmd": "x"})


def test_the_plan_refuses_bad_windows_and_gate_commands_before_any_host_is_touched():
    params = {"state": "plan", "discovery": {}, "cluster_max_down": 1, "max_parallel": 4,
              "canary": 1, "minutes": 6.0, "batch": False, "serial": 1, "forks": None, "gate_cmd": None,
              "windows": [{"days": ["sat"], "start": "22:00", "end": "6am"}]}
    failed, result, _ = waves_call(params, None, False, False)
    assert failed and result["msg"] == "pvetune_reboot_windows[0].end must be a time HH:MM (00:00-24:00), got '6am'"
    failed, result, _ = waves_call(dict(params, windows=[], gate_cmd=["alerts", 3]), None, False, False)
    assert failed and "pvetune_wave_gate_cmd must be a command line or a list of words" in result["msg"]
    assert waves_call(dict(params, windows=[]), None, False, False)[1]["plan"]["waves"] == []
