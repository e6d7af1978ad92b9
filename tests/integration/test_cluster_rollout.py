"""fix.yml on a simulated three-node Proxmox cluster (scratch copies of pve-gpu01, 04 and 05 joined by
tests/clustertrees.py; tests/standins/cluster-sim answers corosync-quorumtool, ha-manager, ceph and qm from one
shared state).

The command-line fix needs a reboot, so with pvetune_reboot_ok every host passes the cluster gate: decide, HA
maintenance and noout, (a tree never reboots), rejoin, the GPU gates, leave maintenance.  Cases: a node already
down stops the rollout at the first host with the reason; --check prints the decision and changes nothing in the
cluster; HA services move away and come back under maintenance, Ceph noout is set and cleared with a wait for
active+clean; a running guest under refuse; and hosts needing no reboot fixed in batches of four.
"""
import json
import os

import pytest
from clustertrees import make_cluster
from conftest import run_playbook
from scratch_host import make_scratch
from treeinventory import write_inventory

HOSTS = ["pve-gpu01", "pve-gpu04", "pve-gpu05"]   # the demo hosts whose command-line fix needs a reboot
ROLLING = "Fix GPU hosts in reboot waves (pvetune_serial at a time without a plan)"
GATE_TASK = "Cluster gate - decide, then HA maintenance and Ceph noout (a refusal stops the rollout with the reason)"


def inventory(tmp_path, roots):
    return write_inventory(str(tmp_path / "inventory.yml"), roots)


def play(tmp_path, step, inv, cmdline="--tags cmdline", **extravars):
    (tmp_path / step).mkdir()
    extravars.setdefault("pvetune_report_dir", str(tmp_path / "reports"))
    extravars.setdefault("pvetune_run_id_override", step)
    return run_playbook(tmp_path / step, "fix.yml", inventory=inv, cmdline=cmdline, extravars=extravars)


def waves(tmp_path, step):
    with open(os.path.join(str(tmp_path / "reports"), "fix-%s" % step, "waves.json")) as handle:
        return json.load(handle)


def record(tmp_path, step, host):
    with open(os.path.join(str(tmp_path / "reports"), "fix-%s" % step, "%s.json" % host)) as handle:
        return json.load(handle)


def new_cluster(base):
    roots = {h: make_scratch(h, str(base / h)) for h in HOSTS}
    return make_cluster(base / "cluster", HOSTS, trees=roots, ha_services=[("vm:300", "pve-gpu01")],
                        osds={h: [2 * i, 2 * i + 1] for i, h in enumerate(HOSTS)})


@pytest.fixture
def cluster(tmp_path):
    """A cluster of its own, for a test that changes it or its trees."""
    return new_cluster(tmp_path)


@pytest.fixture(scope="module")
def unchanged_cluster(tmp_path_factory):
    """One cluster for the tests whose runs change nothing in it or its trees (--check, a refusal before any
    change): each asserts on its own run, the calls it made and the state it leaves."""
    return new_cluster(tmp_path_factory.mktemp("unchanged"))


def test_check_mode_prints_the_decision_and_changes_nothing_in_the_cluster(tmp_path, unchanged_cluster):
    cluster = unchanged_cluster
    before = cluster.state()
    inv = inventory(tmp_path, cluster.trees)
    run = play(tmp_path, "check", inv, cmdline="--tags cmdline --check --diff", pvetune_reboot_ok=True)
    assert run.rc == 0, run.stdout[-3000:]
    msgs = {r["host"]: r["res"]["msg"] for r in run.results(task_name="Cluster decision")}
    assert sorted(msgs) == HOSTS, msgs
    assert msgs["pve-gpu01"].startswith("pve-gpu01: would reboot: pve-gpu01 may reboot: 2 votes stay"), msgs
    assert "then would: ha-maintenance, would: ceph-noout" in msgs["pve-gpu01"]
    assert cluster.state() == before
    for host in HOSTS:
        changing = [c for c in cluster.calls(host) if c[:2] in (["ha-manager", "crm-command"],)
                    or c[:3] in (["ceph", "osd", "add-noout"], ["ceph", "osd", "rm-noout"])]
        assert changing == [], (host, changing)
        rec = record(tmp_path, "check", host)
        assert rec["record_kind"] == "plan" and rec["reboot_needed"] and rec["cluster"]["allowed"]


def test_ha_and_ceph_around_each_reboot(tmp_path, cluster):
    state = cluster.state()
    state["ceph"]["unclean_after_rm_noout"] = 2
    cluster.write(state)
    inv = inventory(tmp_path, cluster.trees)
    # With the LXC fix and CT restarts, so that the GPU gates pass (pve-gpu01's CT 101 has a stale uvm line).
    run = play(tmp_path, "ha", inv, cmdline="--tags cmdline,lxc", pvetune_reboot_ok=True, pvetune_restart_cts=True,
               pvetune_cluster_timeout=30)
    assert run.rc == 0, run.stdout[-3000:]
    for host in HOSTS:
        # The calls that change the cluster (the others only read it).
        calls = [c for c in cluster.calls(host) if c[1:2] == ["crm-command"] or c[1:3] in (
            ["osd", "add-noout"], ["osd", "rm-noout"], ["osd", "set"], ["osd", "unset"])]
        osds = {h: ["osd.%d" % (2 * i), "osd.%d" % (2 * i + 1)] for i, h in enumerate(HOSTS)}
        assert calls == [["ha-manager", "crm-command", "node-maintenance", "enable", host],
                         ["ceph", "osd", "add-noout"] + osds[host],
                         ["ceph", "osd", "rm-noout"] + osds[host],
                         ["ha-manager", "crm-command", "node-maintenance", "disable", host]], (host, calls)
        rec = record(tmp_path, "ha", host)
        assert rec["result"] == "pending-reboot" and rec["cluster"]["allowed"], rec
        assert "128 of 128 PGs active+clean (active+clean 125, active+clean+scrubbing 3)" in rec["cluster_actions"]
    final = cluster.state()
    assert final["ha"]["maintenance"] == [] and not any(o["noout"] for o in final["ceph"]["osds"])
    # vm:300 left pve-gpu01 before its (simulated) reboot, then pve-gpu04 (where HA had moved it) before its own.
    assert [(s["sid"], s["state"]) for s in final["ha"]["services"]] == [("vm:300", "started")]
    for host in HOSTS[:2]:
        assert "HA services moved away: lrm %s: maintenance mode; still on it: none" % host in record(
            tmp_path, "ha", host)["cluster_actions"]
    # One host a wave, in the plan's order (a canary, then one node of the cluster at a time, the HA manager master
    # pve-gpu01 last): each host's maintenance ended before the next one's began.
    plan = waves(tmp_path, "ha")
    assert plan["plan"]["waves"] == [["pve-gpu04"], ["pve-gpu05"], ["pve-gpu01"]], plan
    order = [e["event_data"]["host"] for e in run.events
             if e.get("event") == "runner_on_ok" and e["event_data"].get("task", "").startswith("Cluster gate - ")]
    assert [h for i, h in enumerate(order) if i == 0 or order[i - 1] != h] == ["pve-gpu04", "pve-gpu05", "pve-gpu01"]


def test_running_guest_under_refuse(tmp_path, cluster):
    """The plan blocks the node (the gate refuses it now): fixed without its reboot, pending, with the reason; the
    gate itself, as the backstop without a plan, stops the rollout with the same reason."""
    state = cluster.state()
    state["vms"] = {"400": {"name": "db", "status": "running"}}
    cluster.write(state)
    inv = inventory(tmp_path, {"pve-gpu01": cluster.trees["pve-gpu01"]})
    run = play(tmp_path, "guest", inv, pvetune_reboot_ok=True)
    assert run.rc == 0, run.stdout[-3000:]
    rec = record(tmp_path, "guest", "pve-gpu01")
    assert rec["result"] == "pending-reboot" and rec["reboot_plan"]["wave"] is None, rec
    assert "guests pvetune does not manage run on pve-gpu01: vm 400 (db)" in rec["reboot_plan"]["blocked"], rec
    assert "the reboot plan blocks it (the cluster gate refuses it now: guests" in run.stdout
    assert not [c for c in cluster.calls("pve-gpu01") if c[1:2] == ["crm-command"]], "no maintenance for it"
    unplanned = play(tmp_path, "guest-gate", inv, pvetune_reboot_ok=True, pvetune_waves=False)
    assert unplanned.rc != 0
    message = record(tmp_path, "guest-gate", "pve-gpu01")["failure"]["message"]
    assert "guests pvetune does not manage run on pve-gpu01: vm 400 (db)" in message, message
    assert "ct 101" not in message, "CT 101 is the GPU CT pvetune manages"
    again = play(tmp_path, "guest-stop", inv, cmdline="--tags cmdline --check", pvetune_reboot_ok=True,
                 pvetune_running_guests="stop")
    assert again.rc == 0, again.stdout[-3000:]
    decision = record(tmp_path, "guest-stop", "pve-gpu01")["cluster"]
    assert decision["allowed"] and [g["vmid"] for g in decision["guests"]] == [400], decision


def test_hosts_needing_no_reboot_in_batches_of_four(tmp_path):
    """12 copies of pve-gpu02 (nothing there needs a reboot), --tags sysctl, pvetune_batch 4: three batches in
    inventory order, each batch's hosts through every task together, none handed to the rolling play.  The wall
    time against serial 1 is a benchmark (bench/run.sh batch), not asserted here."""
    batch_play = "Fix the GPU hosts that need no reboot, in batches (pvetune_batch)"
    hosts = ["gpu%02d" % i for i in range(1, 13)]
    roots = {h: make_scratch("pve-gpu02", str(tmp_path / "trees" / h)) for h in hosts}
    run = play(tmp_path, "batch", inventory(tmp_path, roots), cmdline="--tags sysctl", pvetune_batch=4)
    assert run.rc == 0, run.stdout[-3000:]
    events = [e["event_data"] for e in run.events if e.get("event") in ("runner_on_ok", "runner_on_skipped")
              and e["event_data"].get("play") == batch_play]
    span = {h: [i for i, e in enumerate(events) if e["host"] == h] for h in hosts}
    batches = [hosts[i:i + 4] for i in range(0, 12, 4)]
    for earlier, later in zip(batches, batches[1:]):   # one batch finishes before the next starts
        assert max(span[h][-1] for h in earlier) < min(span[h][0] for h in later), [e["host"] for e in events]
    for batch in batches:                               # and its hosts run each task together
        first = events[min(span[h][0] for h in batch)]["task"]
        firsts = [i for i, e in enumerate(events) if e["task"] == first and e["host"] in batch]
        others = [i for h in batch for i in span[h] if events[i]["task"] != first]
        assert len(firsts) == 4 and max(firsts) < min(others), [(e["host"], e["task"]) for e in events]
    for host in hosts:
        assert record(tmp_path, "batch", host)["batch_play"] is True
    assert not run.results(task_name=GATE_TASK)


def test_a_canary_then_two_at_once_would_break_quorum(tmp_path, unchanged_cluster):
    """Without the wave plan (pvetune_waves false), pvetune_serial [1, 2] (--check, which shows every host's
    decision): pve-gpu01 alone may reboot; pve-gpu04 and pve-gpu05 in one batch count each other as gone
    (3 - 1 - 1 < 2), so neither may: the gate is the backstop of any batch."""
    cluster = unchanged_cluster
    inv = inventory(tmp_path, cluster.trees)
    run = play(tmp_path, "canary", inv, cmdline="--tags cmdline --check", pvetune_reboot_ok=True,
               pvetune_serial=[1, 2], pvetune_waves=False)
    assert run.rc == 0, run.stdout[-3000:]
    assert record(tmp_path, "canary", "pve-gpu01")["cluster"]["allowed"]
    for host, other in (("pve-gpu04", "pve-gpu05"), ("pve-gpu05", "pve-gpu04")):
        decision = record(tmp_path, "canary", host)["cluster"]
        assert not decision["allowed"] and decision["counted_gone"] == [other], decision
        assert "would leave 1 votes (3 now, 1 of its own and 1 of node(s) %d counted as gone)" % (
            HOSTS.index(other) + 1) in " ".join(decision["refusals"]), decision
    msgs = {r["host"]: r["res"]["msg"] for r in run.results(task_name="Cluster decision")}
    assert "would refuse the reboot (the rollout would stop here)" in msgs["pve-gpu04"], msgs


def test_bad_batch_sizes_are_refused_before_any_host(tmp_path, unchanged_cluster):
    cluster = unchanged_cluster
    inv = inventory(tmp_path, cluster.trees)
    run = play(tmp_path, "bad", inv, pvetune_batch="a few")
    assert run.rc != 0 and "pvetune_batch must be a number or a percentage" in run.stdout, run.stdout[-2000:]
    assert not os.path.exists(str(tmp_path / "reports" / "fix-bad"))


def test_a_host_pattern_with_commas_keeps_its_exclusion(tmp_path, unchanged_cluster):
    """pvetune_hosts "gpu_hosts,!pve-gpu04": the rolling play's intersection with its group must not lose the
    exclusion (Ansible splits a pattern string on commas)."""
    cluster = unchanged_cluster
    inv = inventory(tmp_path, cluster.trees)
    run = play(tmp_path, "comma", inv, cmdline="--tags cmdline --check", pvetune_reboot_ok=True,
               pvetune_hosts="gpu_hosts,!pve-gpu04")
    assert run.rc == 0, run.stdout[-3000:]
    decided = sorted(r["host"] for r in run.results(task_name="Cluster decision"))
    assert decided == ["pve-gpu01", "pve-gpu05"], decided


def test_osds_under_a_crush_host_named_otherwise_refuse_the_run_before_any_host(tmp_path, unchanged_cluster):
    """pve-gpu01's OSDs under a CRUSH host and a metadata host name that are not its node name: the plan's discovery
    refuses the run with the mismatch, before any host is touched (ok-to-stop and noout would not cover them)."""
    cluster = unchanged_cluster
    before = cluster.state()
    state = cluster.state()
    for osd in state["ceph"]["osds"][:2]:
        osd.update(host="gpu01-example-lan", hostname="gpu-host-17.example.lan")
    cluster.write(state)
    try:
        run = play(tmp_path, "crush", inventory(tmp_path, cluster.trees), pvetune_reboot_ok=True)
    finally:
        cluster.write(before)
    assert run.rc != 0
    failed = run.results(event="runner_on_failed", task_name="Read the cluster of each host that will reboot "
                                                            "(the cluster gate's read-only check)")
    assert [r["host"] for r in failed] == ["pve-gpu01"], failed
    assert failed[0]["res"]["msg"].startswith(
        "this node runs OSDs osd.0, osd.1 (/var/lib/ceph/osd/ceph-*), but neither the CRUSH host pve-gpu01 nor the "
        "OSDs' metadata (osd.0 on gpu-host-17.example.lan, osd.1 on gpu-host-17.example.lan) names this node")
    assert not os.path.exists(os.path.join(str(tmp_path / "reports"), "fix-crush", "pve-gpu01.json"))
    assert cluster.state() == before


def test_a_node_down_refuses_the_next_reboot_and_stops_the_rollout(tmp_path, unchanged_cluster):
    """Last of the tests on the shared cluster: with a node down the plan blocks the other two (quorum allows no
    node down: fixed, not rebooted, pending); without a plan the gate refuses pve-gpu01 and the rollout stops."""
    cluster = unchanged_cluster
    calls_before = len(cluster.calls("pve-gpu04"))
    cluster.set_up(HOSTS[2], False)
    try:
        inv = inventory(tmp_path, {h: cluster.trees[h] for h in HOSTS[:2]})
        planned = play(tmp_path, "down-planned", inv, pvetune_reboot_ok=True)
        assert planned.rc == 0, planned.stdout[-3000:]
        for host in HOSTS[:2]:
            rec = record(tmp_path, "down-planned", host)
            assert rec["result"] == "pending-reboot" and rec["cluster"] is None, rec
            assert rec["reboot_plan"]["wave"] is None, rec
            assert rec["reboot_plan"]["blocked"].startswith("the cluster gate refuses it now: rebooting %s would "
                                                            "leave 1 votes (2 now, 1 of its own)" % host), rec
        calls_before = len(cluster.calls("pve-gpu04"))
        run = play(tmp_path, "down", inv, pvetune_reboot_ok=True, pvetune_waves=False)
    finally:
        cluster.set_up(HOSTS[2], True)
    assert run.rc != 0
    assert "Rollout stopped at pve-gpu01: task '%s' failed" % GATE_TASK in run.stdout, run.stdout[-3000:]
    rec = record(tmp_path, "down", "pve-gpu01")
    assert rec["result"] == "failed" and rec["failure"]["task"] == GATE_TASK
    assert "rebooting pve-gpu01 would leave 1 votes" in rec["failure"]["message"], rec["failure"]
    assert "below the quorum of 2" in rec["failure"]["message"]
    assert not os.path.exists(os.path.join(str(tmp_path / "reports"), "fix-down", "pve-gpu04.json"))
    assert not any(e["event_data"].get("host") == "pve-gpu04" for e in run.events
                   if e.get("event", "").startswith("runner_on") and e["event_data"].get("play") == ROLLING), \
        "the rolling play never reached pve-gpu04"
    assert cluster.calls("pve-gpu04")[calls_before:] == [], "nothing ran on pve-gpu04"
    state = cluster.state()
    assert state["ha"]["maintenance"] == [] and not any(o["noout"] for o in state["ceph"]["osds"])
