#!/usr/bin/env python3
"""Micro-benchmark of the facts module on a large synthetic host.

The host (bench/synth_host.py): 2 sockets x 64 cores x 2 threads = 256 CPUs with
3 cpuidle states each, 8 GPUs behind 4 PCIe switches (root ports, upstream and downstream ports), 40 CT
configs.

- in process: what one pvetune_facts call does after argument parsing
  (merge_policy, FsRoot, gather, evaluate, summarize), a fresh FsRoot per call,
  median over --calls calls (after 2 warm-up calls);
- end to end: `ansible localhost -m pvetune_facts -a <json>` (controller startup,
  AnsiballZ build, module run, result), median of --e2e runs, for reference;
- the size of the module's JSON result (what goes back over SSH per host).

Prints one JSON document on stdout.  Usage: facts_bench.py --tree DIR [--calls 30] [--e2e 5]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "bench"))
import synth_host  # noqa: E402  (imports scripts/demo_fleet.py, which sets up ansible.module_utils.pvetune)
import yaml  # noqa: E402
from ansible.module_utils.pvetune.audit import evaluate, gather  # noqa: E402
from ansible.module_utils.pvetune.core.fsroot import FsRoot  # noqa: E402
from ansible.module_utils.pvetune.core.policy import merge_policy  # noqa: E402
from ansible.module_utils.pvetune.core.result import summarize  # noqa: E402
from ansible.module_utils.pvetune.core.runner import Runner  # noqa: E402


def site_policy():
    with open(os.path.join(TOP, "inventory", "demo", "group_vars", "gpu_hosts.yml")) as handle:
        return yaml.safe_load(handle)["pvetune_policy"]


def one_call(root, overrides):
    policy = merge_policy(overrides)
    fsroot = FsRoot(root)
    runner = Runner(fsroot, lambda *a, **k: (127, "", "not run in the benchmark"))
    facts = gather(fsroot, runner, policy)
    results = evaluate(facts, policy)
    return facts, results, summarize(results, "high")


def stats(values):
    vals = sorted(values)
    q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive") if len(vals) > 1 else (vals[0],) * 3
    return {"median": round(statistics.median(vals), 3), "min": round(vals[0], 3), "max": round(vals[-1], 3),
            "q1": round(q1, 3), "q3": round(q3, 3), "n": len(vals)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", required=True)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--e2e", type=int, default=5)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    args.tree = os.path.abspath(args.tree)

    if args.rebuild or not os.path.isfile(os.path.join(args.tree, ".pvetune", "snapshot.json")):
        t0 = time.time()
        synth_host.build(args.tree)
        sys.stderr.write("bench: synthetic host built in %.1f s\n" % (time.time() - t0))
    shape = synth_host.describe(args.tree)
    overrides = site_policy()

    for _ in range(2):
        facts, results, summary = one_call(args.tree, overrides)
    if facts["errors"]:
        raise SystemExit("gather errors on the synthetic host: %s" % facts["errors"])
    walls = []
    for _ in range(args.calls):
        t0 = time.perf_counter()
        one_call(args.tree, overrides)
        walls.append((time.perf_counter() - t0) * 1000.0)

    result_bytes = len(json.dumps({"results": results, "summary": summary, "policy": merge_policy(overrides)}))
    e2e = []
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(TOP, "ansible.cfg"))
    module_args = json.dumps({"root": os.path.abspath(args.tree), "policy": overrides})
    for _ in range(args.e2e):
        t0 = time.perf_counter()
        proc = subprocess.run(["ansible", "localhost", "-m", "pvetune_facts", "-a", module_args, "-o"],
                              cwd=TOP, env=env, capture_output=True, text=True, check=False)
        e2e.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit("ansible localhost -m pvetune_facts failed: %s" % (proc.stdout + proc.stderr)[-2000:])
    json.dump({
        "host": shape,
        "in_process_ms": stats(walls),
        "end_to_end_s": stats(e2e),
        "end_to_end_cmd": "ansible localhost -m pvetune_facts -a '{\"root\": <tree>, \"policy\": <demo policy>}' -o",
        "result_json_bytes": result_bytes,
        "summary_counts": summary.get("counts"),
        "load": [round(x, 2) for x in os.getloadavg()],
    }, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
