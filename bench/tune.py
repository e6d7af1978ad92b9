#!/usr/bin/env python3
"""Tuning experiments on the benchmark fleet (run through `bench/run.sh tune`, which owns the sshd).

Each experiment is a set of variants (ping or audit, with environment overrides) that are
run alternately (rotating order) at one fleet size, several times, on the same fleet and
sshd as the main benchmark.  Results: bench/results/tune-<experiment>.json and a table.

  BENCH_TUNE="callbacks forks" BENCH_TUNE_N=64 BENCH_TUNE_REPEATS=3 bench/run.sh tune

Experiments:
  callbacks   audit.yml with the project's callbacks_enabled (none since the stdout callback pvetune) vs none
  forks       ping and audit with forks 10 / 25 / 64
  report      audit.yml vs the same play without its post_tasks (reports): where the time goes
  poll        ping and audit with internal_poll_interval 0.001 (default) vs 0.01
  modutils    audit with the working tree's module_utils vs BENCH_TUNE_ALT_MODULE_UTILS (a
              directory laid out like module_utils/, e.g. with an older fsroot.py)
"""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_fleet as bf

PATH_KEYS = ("inventory", "library", "module_utils", "roles_path", "collections_path")


def alt_config(work, name, drop=(), set_values=None):
    """A copy of the project's ansible.cfg without the keys in ``drop`` and with ``set_values``
    (relative paths made absolute: Ansible resolves them against the config file's directory)."""
    src = os.environ.get("ANSIBLE_CONFIG", os.path.join(bf.TOP, "ansible.cfg"))
    set_values = dict(set_values or {})
    out = []
    with open(src) as handle:
        for line in handle:
            key = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith("#") else None
            if key in drop:
                continue
            if key in set_values:
                out.append("%s = %s\n" % (key, set_values.pop(key)))
                continue
            if key in PATH_KEYS:
                value = line.split("=", 1)[1].strip()
                out.append("%s = %s\n" % (key, ":".join(os.path.join(bf.TOP, v) for v in value.split(":"))))
                continue
            out.append(line)
    path = os.path.join(work, "ansible-%s.cfg" % name)
    with open(path, "w") as handle:
        handle.writelines(out)
    return path


def audit_without_reports(work):
    """playbooks/audit.yml up to its audit play, without the plays after it (reports, summary, exit status): to
    attribute cost only."""
    import yaml

    with open(os.path.join(bf.TOP, "playbooks", "audit.yml")) as handle:
        plays = yaml.safe_load(handle)
    audit = next(i for i, p in enumerate(plays) if str(p.get("name", "")).startswith("Audit GPU hosts"))
    for play in plays:  # the run check's import, from where this copy is written
        if "ansible.builtin.import_playbook" in play:
            play["ansible.builtin.import_playbook"] = os.path.join(bf.TOP, "playbooks",
                                                                   play["ansible.builtin.import_playbook"])
    path = os.path.join(work, "audit-without-reports.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(plays[:audit + 1], handle, sort_keys=False)
    return path


def experiments(work, alt_module_utils):
    no_cb = alt_config(work, "no-callbacks", drop=("callbacks_enabled",))
    poll = alt_config(work, "poll10ms", set_values={"internal_poll_interval": "0.01"})
    out = {
        "report": [("ping", "ping", {}, "std"),
                   ("audit", "audit", {}, "std"),
                   ("audit_without_reports", "audit", {"BENCH_PLAYBOOK": audit_without_reports(work)}, "std")],
        "poll": [("ping", "ping", {}, "std"),
                 ("audit", "audit", {}, "std"),
                 ("ping_poll10ms", "ping", {"ANSIBLE_CONFIG": poll}, "std"),
                 ("audit_poll10ms", "audit", {"ANSIBLE_CONFIG": poll}, "std")],
        "callbacks": [("ping", "ping", {}, "std"),
                      ("audit", "audit", {}, "std"),
                      ("audit_no_callbacks", "audit", {"ANSIBLE_CONFIG": no_cb}, "std")],
        "forks": [("ping_f%d" % f, "ping", {"ANSIBLE_FORKS": str(f)}, "std") for f in (10, 25, 64)]
                 + [("audit_f%d" % f, "audit", {"ANSIBLE_FORKS": str(f)}, "std") for f in (10, 25, 64)],
    }
    if alt_module_utils:
        out["modutils"] = [("ping", "ping", {}, "std"),
                           ("audit", "audit", {}, "std"),
                           ("audit_alt_module_utils", "audit", {"ANSIBLE_MODULE_UTILS": alt_module_utils}, "std")]
    return out


def main():
    parser = bf.fleet_arg_parser()
    parser.add_argument("--results", required=True)
    args = parser.parse_args()

    n = int(os.environ.get("BENCH_TUNE_N", "64"))
    reps = int(os.environ.get("BENCH_TUNE_REPEATS", "3"))
    alt = os.environ.get("BENCH_TUNE_ALT_MODULE_UTILS")
    exps = experiments(args.work, os.path.abspath(alt) if alt else None)
    wanted = os.environ.get("BENCH_TUNE", "callbacks forks").split()
    for name in wanted:
        if name not in exps:
            raise SystemExit("bench: unknown experiment %r (known: %s)" % (name, ", ".join(sorted(exps))))

    fleet = bf.build_fleet(args.work, n)
    inventories = {"std": bf.write_inventory(args.work, fleet, n, args.port, args.key)}
    runner = bf.Runner(args.work, args.sshd_pid)
    runner.run("ping", inventories["std"], n, "tune-warmup")
    runner.run("audit", inventories["std"], n, "tune-warmup")
    for name in wanted:
        variants = exps[name]
        raw = {v[0]: [] for v in variants}
        load0 = bf.loadavg()
        for rep in range(reps):
            k = rep % len(variants)
            line = []
            for label, kind, env, inv in variants[k:] + variants[:k]:
                res = runner.run(kind, inventories[inv], n, "tune-%s-rep%d" % (name, rep), env_extra=env, label=label)
                raw[label].append(res)
                line.append("%s %.2fs" % (label, res["wall_s"]))
            bf.log("tune %s n=%d rep %d/%d: %s" % (name, n, rep + 1, reps, ", ".join(line)))
        table = []
        for label, kind, env, inv in variants:
            walls = [r["wall_s"] for r in raw[label]]
            q = bf.quantiles(walls)
            table.append({"variant": label, "kind": kind, "env": env, "inventory": inv, "n": n,
                          "wall_s": round(q["median"], 3), "min_s": round(q["min"], 3), "max_s": round(q["max"], 3),
                          "raw_s": [round(w, 3) for w in walls],
                          "controller_cpu_s": round(statistics.median(r["controller_cpu_s"] for r in raw[label]), 3),
                          "remote_cpu_s": round(statistics.median(r["remote_cpu_s"] for r in raw[label]), 3)
                          if all(r["remote_cpu_s"] is not None for r in raw[label]) else None})
        doc = {"experiment": name, "n": n, "repeats": reps, "load_start": load0, "load_end": bf.loadavg(),
               "machine": bf.machine_info(), "variants": table}
        path = os.path.join(args.results, "tune-%s.json" % name)
        with open(path, "w") as handle:
            json.dump(doc, handle, indent=2)
            handle.write("\n")
        print("\n%s (n=%d, %d repeats, load %s -> %s)" % (name, n, reps, load0, doc["load_end"]))
        print("%-26s %8s %8s %8s %10s %10s" % ("variant", "median", "min", "max", "ctrl cpu", "remote cpu"))
        for row in table:
            print("%-26s %8.2f %8.2f %8.2f %10.2f %10s" % (row["variant"], row["wall_s"], row["min_s"], row["max_s"],
                                                          row["controller_cpu_s"], row["remote_cpu_s"]))
        bf.log("wrote %s" % path)


if __name__ == "__main__":
    main()
