"""fix.yml's reboot waves (issue 29) on a simulated fleet: two three-node clusters (scratch copies of pve-gpu01, 04 and
05 joined by tests/clustertrees.py, each cluster with its own stand-in state) and two standalone hosts, every host's
command-line fix needing a reboot.

Cases: the 20%-batch trap (pvetune_serial "20%" took whole clusters at once) now rolls by cluster, and --check
prints the plan and changes nothing; a stop file that appears mid-run (written by the gate command before the second
wave, as an operator would) stops cleanly before the third wave with the rest pending; a closed maintenance window
and a pause file that stays past pvetune_pause_timeout each stop before the first wave and touch nothing.
"""
import json
import os
import stat
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
