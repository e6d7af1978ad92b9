#!/usr/bin/env python3
"""fix.yml on N hosts that need no reboot: one at a time (pvetune_serial 1) against batches (pvetune_batch).

  bench/run.sh batch                      # N = 12, batches of 4 and 12, 3 repetitions
  BENCH_BATCH_N=24 BENCH_BATCH_SIZES="4 8" BENCH_REPEATS=1 bench/run.sh batch

Every run gets fresh scratch copies of pve-gpu02 (scripts/scratch_host.py: nothing there needs a reboot)
and fixes `--tags sysctl` over a local connection, so the number is Ansible's per-host flow and the
play structure, not SSH.  Results: bench/results/rollout-batch.{json,md}.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "scripts"))
from scratch_host import make_scratch  # noqa: E402


def inventory(path, roots):
    lines = ["all:", "  children:", "    gpu_hosts:", "      vars:", "        ansible_connection: local",
             "        ansible_become: false", "        ansible_python_interpreter: %s" % sys.executable,
             "      hosts:"]
    for host, root in roots.items():
        lines += ["        %s:" % host, "          pvetune_root: %s" % root]
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def one_run(work, n, batch):
    """Seconds for one fix.yml run on n fresh trees; batch None is the rolling play alone (serial 1)."""
    base = tempfile.mkdtemp(dir=work)
    roots = {"gpu%03d" % i: make_scratch("pve-gpu02", os.path.join(base, "gpu%03d" % i)) for i in range(1, n + 1)}
    inv = os.path.join(base, "inventory.yml")
    inventory(inv, roots)
    argv = ["ansible-playbook", "fix.yml", "-i", inv, "--tags", "sysctl",
            "-e", "pvetune_report_dir=%s" % os.path.join(base, "reports")]
    if batch is not None:
        argv += ["-e", "pvetune_batch=%s" % batch]
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(TOP, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=TOP, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True)
    took = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit("bench: fix.yml failed (batch %s):\n%s" % (batch, proc.stdout[-3000:]))
    shutil.rmtree(base)
    return took


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=int(os.environ.get("BENCH_BATCH_N", "12")))
    parser.add_argument("--sizes", default=os.environ.get("BENCH_BATCH_SIZES", "4 12"))
    parser.add_argument("--repeats", type=int, default=int(os.environ.get("BENCH_REPEATS", "3")))
    parser.add_argument("--out", default=os.path.join(TOP, "bench", "results", "rollout-batch"))
    args = parser.parse_args()
    variants = [("serial 1", None)] + [("batch %s" % s, s) for s in args.sizes.split()]
    work = tempfile.mkdtemp(prefix="pvetune-bench-batch-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    results = []
    try:
        for name, batch in variants:
            times = [one_run(work, args.n, batch) for _ in range(args.repeats)]
            results.append({"variant": name, "seconds": [round(t, 2) for t in times],
                            "median": round(statistics.median(times), 2)})
            print("bench: %d hosts, %s: median %.1f s (%s)" % (args.n, name, results[-1]["median"],
                                                           ", ".join("%.1f" % t for t in times)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    serial = results[0]["median"]
    doc = {"hosts": args.n, "tags": "sysctl", "repeats": args.repeats, "cores": os.cpu_count(),
           "loadavg_after": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d"), "results": results}
    with open(args.out + ".json", "w") as handle:
        json.dump(doc, handle, indent=2)
    rows = ["| variant | median s | runs s | vs serial |", "|---|---|---|---|"]
    rows += ["| %s | %.1f | %s | %.2f |" % (r["variant"], r["median"], ", ".join("%.1f" % t for t in r["seconds"]),
                                            r["median"] / serial) for r in results]
    with open(args.out + ".md", "w") as handle:
        handle.write("# fix.yml on %d hosts needing no reboot (--tags sysctl, local connection), %s, %d cores\n\n"
                     "%d repetition(s); 1-minute load average after the runs: %.1f.\n\n"
                     % (args.n, doc["date"], doc["cores"], args.repeats, doc["loadavg_after"])
                     + "\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
