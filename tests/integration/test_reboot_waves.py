"""fix.yml's reboot waves (issue 29) on a simulated fleet: two three-node clusters (scratch copies of pve-gpu01, 04 and
05 joined by tests/clustertrees.py, each cluster with its own stand-in state) and two standalone hosts, every host's
command-line fix needing a reboot.

Cases: the 20%-batch trap (pvetune_serial "20%" took whole clusters at once) now rolls by cluster, and --check
prints the plan and changes nothing; a stop file that appears mid-run (written by the gate command before the second
wave, as an operator would) stops cleanly before the third wave with the rest pending; a pause file that is lifted
while the run waits lets the next wave go, and a window that closes mid-run stops cleanly before the following wave;
a closed maintenance window and a pause file that stays past pvetune_pause_timeout each stop before the first wave
and touch nothing.
"""
import json
import os
import stat
import sys
from datetime import datetime

import pytest
from clustertrees import make_cluster
from conftest import run_playbook
from scratch_host import make_scratch
from treeinventory import write_inventory

DEMO = ["pve-gpu01", "pve-gpu04", "pve-gpu05"]   # demo hosts whose command-line fix needs a reboot
ROLLING = "Fix GPU hosts in reboot waves (pvetune_serial at a time without a plan)"
# The plan at cap 1, fleet cap 4: the canary (a standalone host), then one node of each cluster a wave with the other
# standalone host filling a slot; each cluster's first node runs the HA manager master (cluster-sim), so it goes last.
WAVES = [["solo1"], ["a2", "b2", "solo2"], ["a3", "b3"], ["a1", "b1"]]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    base = tmp_path_factory.mktemp("fleet")
    roots, clusters = {}, {}
    for name in ("a", "b"):
        nodes = ["%s%d" % (name, i) for i in (1, 2, 3)]
        trees = {n: make_scratch(DEMO[i], str(base / n)) for i, n in enumerate(nodes)}
        clusters[name] = make_cluster(base / ("cluster-" + name), nodes, trees=trees, name="gpu-" + name,
                                      ha_services=[("vm:3%d0" % (ord(name) - 96), nodes[1])])
        roots.update(clusters[name].trees)
    for i in (1, 2):
        roots["solo%d" % i] = make_scratch(DEMO[i], str(base / ("solo%d" % i)))
    return {"roots": roots, "clusters": clusters, "base": base}


def play(tmp_path, fleet, step, cmdline="--tags cmdline", **extravars):
    (tmp_path / step).mkdir()
    extravars.setdefault("pvetune_report_dir", str(tmp_path / "reports"))
    extravars.setdefault("pvetune_run_id_override", step)
    extravars.setdefault("pvetune_max_parallel", 4)
    inv = write_inventory(str(tmp_path / step / "inventory.yml"), fleet["roots"])
    return run_playbook(tmp_path / step, "fix.yml", inventory=inv, cmdline=cmdline,
                        extravars=dict(extravars, pvetune_reboot_ok=True))


def report(tmp_path, step, name):
    path = os.path.join(str(tmp_path / "reports"), "fix-%s" % step, name)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return json.load(handle)


def rolling_hosts(run):
    """The hosts of the rolling play in the order they first ran a task after the role's argument validation and the
    check between waves (both run for a batch that the check may stop)."""
    seen = []
    for event in run.events:
        data = event.get("event_data", {})
        if event.get("event", "").startswith("runner_on_") and data.get("play") == ROLLING and \
                data.get("host") not in seen and not data.get("task", "").startswith(("Between waves", "Validating")):
            seen.append(data["host"])
    return seen


def test_the_20pct_trap_rolls_by_cluster_and_check_prints_the_plan(tmp_path, fleet):
    before = {n: c.state() for n, c in fleet["clusters"].items()}
    run = play(tmp_path, fleet, "trap", cmdline="--tags cmdline --check --diff", pvetune_serial="20%")
    assert run.rc == 0, run.stdout[-3000:]
    plan = report(tmp_path, "trap", "waves.json")
    assert plan["plan"]["waves"] == WAVES and plan["check_mode"] is True, plan["lines"]
    assert plan["serial"] == [1, 3, 2, 2] and plan["plan"]["blocked"] == {}
    printed = run.results(task_name="Reboot plan")[0]["res"]["msg"]
    assert printed == plan["lines"] and printed[0].startswith(
        "8 host(s) to reboot in 4 wave(s), largest 3 (fleet cap 4, per cluster at most 1, canary 1)"), printed
    assert "wave 2: a2 [gpu-a], b2 [gpu-b], solo2 [standalone]" in printed
    assert rolling_hosts(run) == [h for wave in WAVES for h in wave]
    for wave in WAVES:   # each wave is one batch whose nodes the gate lets reboot together
        for host in wave:
            rec = report(tmp_path, "trap", host + ".json")
            assert rec["record_kind"] == "plan" and rec["cluster"]["allowed"], rec["cluster"]
            assert rec["reboot_plan"] == {"wave": WAVES.index(wave) + 1, "blocked": None}
    assert {n: c.state() for n, c in fleet["clusters"].items()} == before


def gate_script(tmp_path, stop_at):
    """A gate command that passes and, on call ``stop_at``, writes the stop file (the operator stopping the run)."""
    path = tmp_path / "gate.sh"
    path.write_text("#!/bin/sh\nn=$(($(cat %(d)s/calls 2>/dev/null || echo 0) + 1))\necho $n > %(d)s/calls\n"
                    "[ $n -eq %(at)d ] && touch %(d)s/reports/fix.stop\necho quiet\nexit 0\n"
                    % {"d": tmp_path, "at": stop_at})
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_stop_file_mid_run_stops_before_the_next_wave_with_the_rest_pending(tmp_path, fleet):
    (tmp_path / "reports").mkdir()
    run = play(tmp_path, fleet, "stop", pvetune_wave_gate_cmd=gate_script(tmp_path, stop_at=2))
    assert run.rc == 0, run.stdout[-3000:]
    said = run.results(task_name="Between waves - say so")[0]["res"]["msg"]
    assert said.startswith("Rollout stopped before wave 3 of 4: the stop file %s/reports/fix.stop exists" % tmp_path)
    assert said.endswith("Not touched, pending for the next run: a3, b3, a1, b1."), said
    stopped = report(tmp_path, "stop", "stopped.json")
    assert stopped["before_wave"] == 3 and stopped["pending"] == ["a3", "b3", "a1", "b1"], stopped
    assert (tmp_path / "calls").read_text().strip() == "2"
    for host in WAVES[0] + WAVES[1]:
        rec = report(tmp_path, "stop", host + ".json")
        assert rec["record_kind"] == "result" and rec["result"] == "pending-reboot", rec   # a tree never reboots
    for host in stopped["pending"]:
        assert report(tmp_path, "stop", host + ".json") is None, host
    assert rolling_hosts(run) == WAVES[0] + WAVES[1]
    for cluster in fleet["clusters"].values():   # what the gate set for a2 and b2 is released
        assert cluster.state()["ha"]["maintenance"] == []


# The operator's side of the next test, as a gate command (pvetune_wave_gate_cmd runs once before each wave): before
# wave 1 it sets the pause file and starts a helper that lifts it a few seconds after the check before wave 2 began
# (ansible-runner writes each task-start event to the job_events directory as it happens); before wave 2 it closes
# the maintenance window (the windows come from a file that the operator edits during the run).
OPERATOR = """#!%(python)s
import glob, json, os, sys, time
d, pdd = %(d)r, %(pdd)r
count = (int(open(d + "/calls").read()) if os.path.exists(d + "/calls") else 0) + 1
open(d + "/calls", "w").write("%%d\\n" %% count)
if count == 1:
    open(d + "/control/fix.pause", "w").close()
    if os.fork() == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        for _ in range(600):
            starts = [f for f in glob.glob(pdd + "/artifacts/*/job_events/*.json")
                      if "playbook_on_task_start" in open(f).read()
                      and "Between waves - may this wave start" in open(f).read()]
            if len(starts) >= 2:
                break
            time.sleep(0.5)
        time.sleep(4)
        os.unlink(d + "/control/fix.pause")
        os._exit(0)
elif count == 2:
    today = time.localtime().tm_wday
    days = [n for i, n in enumerate(["mon", "tue", "wed", "thu", "fri", "sat", "sun"]) if i != today]
    json.dump([{"days": days, "start": "00:00", "end": "24:00"}], open(d + "/windows.json", "w"))
print("quiet")
"""


def test_a_lifted_pause_lets_the_wave_go_and_a_window_closing_mid_run_stops_before_the_next(tmp_path, fleet):
    """Before wave 2 the run waits for the pause file (one 10 s look), which the operator lifts: wave 2 runs. Then the
    window closes (the windows file now lists every day but today): the check before wave 3 stops the run cleanly,
    waves 3 and 4 pending, nothing of theirs touched."""
    for sub in ("reports", "control"):
        (tmp_path / sub).mkdir()
    (tmp_path / "windows.json").write_text(json.dumps([{"start": "00:00", "end": "24:00"}]))
    gate = tmp_path / "ops_gate.py"   # not operator.py: the script's directory comes first on sys.path
    gate.write_text(OPERATOR % {"python": sys.executable, "d": str(tmp_path), "pdd": str(tmp_path / "ops" / "runner")})
    gate.chmod(0o755)
    run = play(tmp_path, fleet, "ops", pvetune_wave_gate_cmd=str(gate),
               pvetune_wave_control_dir=str(tmp_path / "control"),
               pvetune_reboot_windows="{{ lookup('file', '%s') | from_json }}" % (tmp_path / "windows.json"))
    assert run.rc == 0, run.stdout[-3000:]
    looks = [r["res"]["msg"] for r in run.results(task_name="Between waves - may this wave start? (stop file, windows, "
                                                             "pause file, gate command)")]
    assert looks[0].startswith("wave 1 of 4 may start"), looks
    assert looks[1] == "wave 2 of 4 may start: the gate command passed; waited 10 s for the pause file to go", looks
    assert looks[2].startswith("stopped before wave 3 of 4: outside every reboot window"), looks
    said = run.results(task_name="Between waves - say so")[0]["res"]["msg"]
    assert said.endswith("Not touched, pending for the next run: a3, b3, a1, b1."), said
    assert report(tmp_path, "ops", "stopped.json")["pending"] == ["a3", "b3", "a1", "b1"]
    assert rolling_hosts(run) == WAVES[0] + WAVES[1]
    assert (tmp_path / "calls").read_text().strip() == "2" and not (tmp_path / "control" / "fix.pause").exists()
    for host in WAVES[1]:
        assert report(tmp_path, "ops", host + ".json")["result"] == "pending-reboot", host


def test_a_wave_of_two_nodes_enters_ha_maintenance_first(tmp_path):
    """A five-node cluster, two nodes a wave (quorum 3), one fork (the plan warns; the hosts of a wave then run each
    task one after the other): both nodes of a wave still enter HA maintenance before either waits for its services
    to leave, so a service of one moves once, to a node outside the wave. Entered one host after the other, the HA
    manager's basic scheduler (as the stand-in plays it) would move it to the wave peer with no services first."""
    nodes = ["n%d" % i for i in range(1, 6)]
    trees = {n: make_scratch(DEMO[i % 3], str(tmp_path / n)) for i, n in enumerate(nodes)}
    cluster = make_cluster(tmp_path / "cluster", nodes, trees=trees, name="gpu-five",
                           ha_services=[("vm:400", "n2"), ("vm:401", "n1"), ("vm:402", "n4"), ("vm:403", "n5")])
    run = play(tmp_path, {"roots": cluster.trees}, "five", cmdline="--tags cmdline --forks 1",
               pvetune_cluster_max_down=2, pvetune_canary=0)
    assert run.rc == 0, run.stdout[-3000:]
    assert report(tmp_path, "five", "waves.json")["plan"]["waves"] == [["n2", "n3"], ["n4", "n5"], ["n1"]]
    moves = {s["sid"]: s.get("moves", []) for s in cluster.state()["ha"]["services"]}
    assert moves["vm:400"][0] not in ("n2", "n3") and len(moves["vm:400"]) == 2, moves   # wave 1, then n1's wave 3
    assert moves["vm:402"][0] not in ("n4", "n5") and moves["vm:403"][0] not in ("n4", "n5"), moves
    (early,) = run.results(task_name="Cluster gate - HA maintenance for every node of this wave first", host="n3")
    assert early["res"]["actions"] == ["ha-manager crm-command node-maintenance enable n3"], early["res"]
    first = report(tmp_path, "five", "n2.json")["cluster_actions"]
    assert first[0] == "ha-manager crm-command node-maintenance enable n2" and first[1].startswith(
        "HA services moved away"), first
    assert cluster.state()["ha"]["maintenance"] == []


def test_a_closed_window_stops_before_the_first_wave(tmp_path, fleet):
    days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    other_days = [d for i, d in enumerate(days) if i != datetime.now().weekday()]
    run = play(tmp_path, fleet, "window",
               pvetune_reboot_windows=[{"days": other_days, "start": "00:00", "end": "24:00"}])
    assert run.rc == 0, run.stdout[-3000:]
    said = run.results(task_name="Between waves - say so")[0]["res"]["msg"]
    assert said.startswith("Rollout stopped before wave 1 of 4: outside every reboot window"), said
    assert report(tmp_path, "window", "stopped.json")["pending"] == [h for wave in WAVES for h in wave]
    assert rolling_hosts(run) == []


def test_a_pause_file_that_stays_stops_before_the_first_wave(tmp_path, fleet):
    """The pause file holds the rollout before each wave; one still there after pvetune_pause_timeout stops it
    cleanly instead (one 10 s look here), with every host pending."""
    (tmp_path / "control").mkdir()
    (tmp_path / "control" / "fix.pause").write_text("")
    run = play(tmp_path, fleet, "pause", pvetune_wave_control_dir=str(tmp_path / "control"), pvetune_pause_timeout=1)
    assert run.rc == 0, run.stdout[-3000:]
    said = run.results(task_name="Between waves - say so")[0]["res"]["msg"]
    assert said.startswith("Rollout stopped before wave 1 of 4: the pause file %s/control/fix.pause was there for "
                           "10 s (pvetune_pause_timeout)" % tmp_path), said
    assert report(tmp_path, "pause", "stopped.json")["pending"] == [h for wave in WAVES for h in wave]
    assert rolling_hosts(run) == []
