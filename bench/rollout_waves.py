#!/usr/bin/env python3
"""fix.yml's reboot waves on a simulated fleet: one host at a time (pvetune_waves false) against the planned waves
at fleet caps (pvetune_max_parallel), with a simulated reboot that takes real wall time but no CPU (issue 29).

  bench/run.sh waves                                           # 6 clusters of 4 nodes + 4 standalone, R = 60 s
  BENCH_WAVES_R=20 BENCH_WAVES_CLUSTERS=2 BENCH_WAVES_NODES=3 BENCH_WAVES_SOLO=2 BENCH_WAVES_CAPS="4" bench/run.sh waves
  BENCH_WAVES_SERIAL=0 ...                                     # skip the one-at-a-time run (it takes N * (R + ~15 s))

Every run gets fresh scratch copies of pve-gpu01, 04 and 05 (their command-line fix needs a reboot) joined into
clusters by tests/clustertrees.py (each with Ceph, two OSDs a node, and the HA manager master on its first node);
`pvetune_tree_reboot_cmd` makes each "reboot" the cluster stand-in's `sim-reboot R`, which marks the node and its
OSDs down for R seconds. Reported per variant: wall time, the waves W (waves.json), the overhead wall - W * R, and
the most nodes of any cluster down at once (cluster-sim's max_down), which must not exceed the budget (1 here: a
four-node cluster keeps quorum 3 with one node down). Results: bench/results/rollout-waves.{json,md}.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "scripts"))
sys.path.insert(0, os.path.join(TOP, "tests"))
from clustertrees import make_cluster  # noqa: E402
from scratch_host import make_scratch  # noqa: E402
from treeinventory import write_inventory  # noqa: E402

DEMO = ["pve-gpu01", "pve-gpu04", "pve-gpu05"]


def fleet(base, clusters, nodes, solo):
    roots, states = {}, []
    for c in range(clusters):
        names = ["c%d-n%d" % (c, n) for n in range(1, nodes + 1)]
        trees = {n: make_scratch(DEMO[i % 3], os.path.join(base, n)) for i, n in enumerate(names)}
        made = make_cluster(os.path.join(base, "cluster-%d" % c), names, trees=trees, name="gpu-%d" % c,
                            osds={n: [2 * (c * nodes + i), 2 * (c * nodes + i) + 1] for i, n in enumerate(names)})
        roots.update(made.trees)
        states.append(made.state_path)
    for s in range(solo):
        roots["solo%d" % s] = make_scratch(DEMO[s % 3], os.path.join(base, "solo%d" % s))
    return roots, states


def one_run(work, args, cap):
    base = tempfile.mkdtemp(dir=work)
    roots, states = fleet(base, args["clusters"], args["nodes"], args["solo"])
    inv = write_inventory(os.path.join(base, "inventory.yml"), roots, host_vars={
        h: {"pvetune_tree_reboot_cmd": [os.path.join(r, ".pvetune", "bin", "sim-reboot"), str(args["r"])]}
        for h, r in roots.items()})
    reports = os.path.join(base, "reports")
    argv = ["ansible-playbook", "fix.yml", "-i", inv, "--tags", "cmdline", "-f", "30", "-e", "pvetune_reboot_ok=true",
            "-e", "pvetune_report_dir=%s" % reports, "-e", "pvetune_run_id_override=bench", "-e",
            "pvetune_cluster_timeout=120"]
    argv += ["-e", "pvetune_waves=false"] if cap is None else ["-e", "pvetune_max_parallel=%d" % cap]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(TOP, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=TOP, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)
    took = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit("bench: fix.yml failed (cap %s):\n%s" % (cap, proc.stdout[-3000:]))
    waves = len(roots)
    if cap is not None:
        with open(os.path.join(reports, "fix-bench", "waves.json")) as handle:
            waves = len(json.load(handle)["plan"]["waves"])
    max_down = []
    for path in states:
        with open(path) as handle:
            max_down.append(json.load(handle).get("max_down", 0))
    shutil.rmtree(base)
    return {"variant": "one at a time" if cap is None else "waves, cap %d" % cap, "seconds": round(took, 1),
            "waves": waves, "overhead": round(took - waves * args["r"], 1), "max_down": max(max_down or [0])}


def main():
    env = os.environ.get
    args = {"clusters": int(env("BENCH_WAVES_CLUSTERS", "6")), "nodes": int(env("BENCH_WAVES_NODES", "4")),
            "solo": int(env("BENCH_WAVES_SOLO", "4")), "r": int(env("BENCH_WAVES_R", "60"))}
    caps = [int(c) for c in env("BENCH_WAVES_CAPS", "4 8").split()]
    # The waves first: the one-at-a-time run is the longest (N * (R + overhead)); the results are written after each.
    variants = caps + ([None] if env("BENCH_WAVES_SERIAL", "1") == "1" else [])
    work = tempfile.mkdtemp(prefix="pvetune-bench-waves-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    results = []
    try:
        for cap in variants:
            results.append(one_run(work, args, cap))
            print("bench: %s" % json.dumps(results[-1]), flush=True)
            write(args, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write(args, results):
    hosts = args["clusters"] * args["nodes"] + args["solo"]
    doc = dict(args, hosts=hosts, cores=os.cpu_count(), loadavg_after=os.getloadavg()[0],
               date=time.strftime("%Y-%m-%d"), results=results)
    out = os.path.join(TOP, "bench", "results", "rollout-waves")
    with open(out + ".json", "w") as handle:
        json.dump(doc, handle, indent=2)
    rows = ["| variant | wall s | waves W | W x R s | overhead s | wall / (W x R) | most nodes of a cluster down |",
            "|---|---|---|---|---|---|---|"]
    rows += ["| %s | %.0f | %d | %d | %.0f | %.2f | %d |" % (
        r["variant"], r["seconds"], r["waves"], r["waves"] * args["r"], r["overhead"],
        r["seconds"] / (r["waves"] * args["r"]), r["max_down"]) for r in results]
    with open(out + ".md", "w") as handle:
        handle.write("# fix.yml reboot waves: %d clusters of %d nodes + %d standalone hosts, simulated reboot R = %d s"
                     ", %s, %d cores\n\n1-minute load average after the runs: %.1f.\n\n"
                     % (args["clusters"], args["nodes"], args["solo"], args["r"], doc["date"], doc["cores"],
                        doc["loadavg_after"]) + "\n".join(rows) + "\n")
    return rows


if __name__ == "__main__":
    main()
