#!/usr/bin/env python3
"""Fleet benchmark driver (called by bench/run.sh, which owns the sshd).

Builds N simulated hosts (hardlinked copies of demo/snapshots/pve-gpu0{1,2,3}, one
root per inventory host), writes one inventory per N, and times, alternating the
variants within every repetition:

  ping    ansible all -m ansible.builtin.ping          (Ansible's own floor)
  audit   ansible-playbook audit.yml                   (reports into bench/work/reports)
  naive   ansible-playbook bench/naive_audit.yml       (one task per check input)

Every run starts with an empty ControlPath directory (no ControlPersist master is
reused from an earlier run: each variant pays for its own connections), and the
masters it leaves are closed before the next run starts (not timed).  Each host has
its own ControlPath, as distinct hosts of a real fleet would; they all share one
sshd on 127.0.0.1.

Then runs bench/facts_bench.py (the facts module on a synthetic 256-CPU host) and
writes <out>.json.
"""

import argparse
import datetime
import glob
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(TOP, "demo", "snapshots")
DEMO_HOSTS = ["pve-gpu01", "pve-gpu02", "pve-gpu03"]
REMOTE_PYTHON = "/usr/bin/python3"
# Repetitions per N: ping and audit (the goal is their ratio) get more; the naive audit, ~35 module
# calls per host and 10-20x the cost of the others, gets fewer at large N so that `make bench` stays
# under ~15 min on 2 cores.  BENCH_REPEATS / BENCH_NAIVE_REPEATS override them.
DEFAULT_REPEATS = {1: 7, 8: 5, 32: 5, 64: 5}
DEFAULT_NAIVE_REPEATS = {1: 3, 8: 3, 32: 1, 64: 1}
# The naive audit at N=64 takes ~7 min per run on 2 cores: not by default (BENCH_NAIVE_NS adds it).
DEFAULT_NAIVE_NS = "1 8 32"
VARIANTS = ("ping", "audit", "history", "naive")
# history: audit.yml with BENCH_HISTORY (default 0: not run) earlier runs in its report directory, all but the oldest
# naming other hosts, so each host's drift searches every one of them (the worst case for report/drift.py).


def log(msg):
    print("bench: %s" % msg, flush=True)


def env_list(name, default):
    value = os.environ.get(name)
    return value.split() if value else default


def loadavg():
    return [round(x, 2) for x in os.getloadavg()]


def wait_for_low_load(max_load, max_wait):
    """Wait up to max_wait seconds for the 1-minute load to drop below max_load."""
    start = time.time()
    while True:
        load1 = os.getloadavg()[0]
        if load1 < max_load or time.time() - start >= max_wait:
            return {"waited_s": round(time.time() - start, 1), "load1": round(load1, 2),
                    "below_threshold": load1 < max_load, "threshold": max_load}
        time.sleep(5)


# -- machine ------------------------------------------------------------------
def cmd_out(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout.strip() or None
    except OSError:
        return None


def machine_info():
    model = None
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kb = None
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    ansible_core = cmd_out([sys.executable, "-c", "import ansible.release as r; print(r.__version__)"])
    ssh_v = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False).stderr.strip()
    return {
        "cpu_model": model,
        "cores": os.cpu_count(),
        "mem_gib": round(mem_kb / 1048576.0, 1) if mem_kb else None,
        "kernel": platform.release(),
        "os": cmd_out(["sh", "-c", ". /etc/os-release && echo \"$PRETTY_NAME\""]),
        "python_controller": "%s (%s)" % (platform.python_version(), sys.executable),
        "python_remote": "%s (%s)" % (
            cmd_out([REMOTE_PYTHON, "-c", "import platform; print(platform.python_version())"]), REMOTE_PYTHON),
        "ansible_core": ansible_core,
        "openssh": ssh_v,
        "git_commit": cmd_out(["git", "-C", TOP, "rev-parse", "--short", "HEAD"]),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def ansible_cfg_summary():
    keys = ("forks", "gathering", "callbacks_enabled", "pipelining", "ssh_args", "stdout_callback")
    out = {}
    with open(os.environ.get("ANSIBLE_CONFIG", os.path.join(TOP, "ansible.cfg"))) as handle:
        for line in handle:
            match = re.match(r"^\s*(\w+)\s*=\s*(.*?)\s*$", line)
            if match and match.group(1) in keys:
                out[match.group(1)] = match.group(2)
    return out


# -- fleet --------------------------------------------------------------------
def host_name(i):
    return "bench-h%03d" % i


def build_fleet(work, nmax):
    """Hardlinked copies of the demo trees; per-host hostname files are real copies."""
    fleet = os.path.join(work, "fleet")
    marker = os.path.join(fleet, ".complete-%d" % nmax)
    if os.path.isfile(marker):  # kept from an earlier run (BENCH_KEEP=1)
        return fleet
    if os.path.isdir(fleet):
        shutil.rmtree(fleet)
    os.makedirs(fleet)
    t0 = time.time()
    for i in range(1, nmax + 1):
        name = host_name(i)
        src = os.path.join(DEMO, DEMO_HOSTS[(i - 1) % len(DEMO_HOSTS)])
        dest = os.path.join(fleet, name)
        subprocess.run(["cp", "-al", src, dest], check=True)
        for rel in ("etc/hostname", "proc/sys/kernel/hostname"):
            path = os.path.join(dest, rel)
            os.unlink(path)  # break the hard link before writing
            with open(path, "w") as handle:
                handle.write(name + "\n")
        snap = os.path.join(dest, ".pvetune", "snapshot.json")
        with open(snap) as handle:
            meta = json.load(handle)
        meta["host"] = name
        meta["bench_source"] = os.path.basename(src)
        os.unlink(snap)
        with open(snap, "w") as handle:
            json.dump(meta, handle, indent=2, sort_keys=True)
    open(marker, "w").close()
    log("fleet of %d hosts built in %.1f s under %s" % (nmax, time.time() - t0, fleet))
    return fleet


def write_inventory(work, fleet, n, port, key):
    with open(os.path.join(TOP, "inventory", "demo", "group_vars", "gpu_hosts.yml")) as handle:
        demo_vars = yaml.safe_load(handle)
    hosts = {}
    for i in range(1, n + 1):
        name = host_name(i)
        hosts[name] = {
            "pvetune_root": os.path.join(fleet, name),
            # One ControlPath per host, like distinct hosts of a real fleet (they all share
            # 127.0.0.1:port, which would otherwise hash to a single ControlPath).
            "ansible_control_path": "%(directory)s/" + name,
        }
    group_vars = {
        "ansible_connection": "ssh",
        "ansible_host": "127.0.0.1",
        "ansible_port": port,
        "ansible_user": "root",
        # Proxmox VE hosts are administered as root: no become (and no sudo on the hosts).
        "ansible_become": False,
        "ansible_ssh_private_key_file": key,
        "ansible_ssh_common_args": "-o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR",
        # A real python3, not interpreter discovery: discovery costs a round trip per host and,
        # on this controller, finds root's pyenv shims first.
        "ansible_python_interpreter": REMOTE_PYTHON,
        "pvetune_policy": demo_vars["pvetune_policy"],
        "pvetune_fail_on": demo_vars.get("pvetune_fail_on", "high"),
    }
    inv = {"all": {"children": {"gpu_hosts": {"vars": group_vars, "hosts": hosts}}}}
    inv_dir = os.path.join(work, "inventory")
    os.makedirs(inv_dir, exist_ok=True)
    path = os.path.join(inv_dir, "n%03d.yml" % n)
    with open(path, "w") as handle:
        handle.write("# generated by bench/bench_fleet.py\n")
        yaml.safe_dump(inv, handle, default_flow_style=False, sort_keys=False)
    return path


# -- runs ---------------------------------------------------------------------
def proc_children_cpu(pid):
    """CPU seconds of the waited-for descendants of pid (cutime + cstime), or None."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[13]) + int(fields[14])) / float(os.sysconf("SC_CLK_TCK"))


def wait_no_children(pid, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            kids = "".join(open(p).read() for p in glob.glob("/proc/%d/task/*/children" % pid)).split()
        except OSError:
            return
        if not kids:
            return
        time.sleep(0.05)


class Runner:
    def __init__(self, work, sshd_pid=None):
        self.work = work
        self.sshd_pid = sshd_pid
        self.count = 0
        self.cp_root = os.path.join(work, "cp")
        self.logs = os.path.join(work, "logs")
        self.reports = os.path.join(work, "reports")
        self.history = os.path.join(work, "reports-history")
        for d in (self.cp_root, self.logs, self.reports):
            os.makedirs(d, exist_ok=True)

    def argv(self, variant, inventory, env):
        if variant == "ping":
            return ["ansible", "all", "-i", inventory, "-m", "ansible.builtin.ping"]
        if variant in ("audit", "history"):
            return ["ansible-playbook", os.path.join(TOP, "audit.yml"), "-i", inventory,
                    "-e", "pvetune_report_dir=%s" % (self.history if variant == "history" else self.reports)]
        if variant == "playbook":  # bench/tune.py: another playbook, named by BENCH_PLAYBOOK
            return ["ansible-playbook", env["BENCH_PLAYBOOK"], "-i", inventory]
        if variant == "naive":
            return ["ansible-playbook", os.path.join(TOP, "bench", "naive_audit.yml"), "-i", inventory]
        raise ValueError(variant)

    def close_masters(self, cpdir):
        for sock in glob.glob(os.path.join(cpdir, "*")):
            subprocess.run(["ssh", "-o", "ControlPath=%s" % sock, "-O", "exit", "bench"],
                           capture_output=True, check=False)
        shutil.rmtree(cpdir, ignore_errors=True)

    def run(self, variant, inventory, n, tag, env_extra=None, label=None):
        self.count += 1
        cpdir = os.path.join(self.cp_root, "r%04d" % self.count)
        os.makedirs(cpdir, mode=0o700)
        env = dict(os.environ, ANSIBLE_SSH_CONTROL_PATH_DIR=cpdir, **(env_extra or {}))
        if "BENCH_PLAYBOOK" in env:
            variant = "playbook"
        logpath = os.path.join(self.logs, "%s-n%03d-%s.log" % (label or variant, n, tag))
        if variant == "history":
            self.seed_history(int(os.environ.get("BENCH_HISTORY", "0")))
        reports = self.history if variant == "history" else self.reports
        before = sorted(os.listdir(reports)) if variant in ("audit", "history") else None
        load = loadavg()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        remote0 = proc_children_cpu(self.sshd_pid) if self.sshd_pid else None
        with open(logpath, "w") as out:
            t0 = time.perf_counter()
            proc = subprocess.run(self.argv(variant, inventory, env), cwd=TOP, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, check=False)
            wall = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU time of the controller side (ansible, its forks, ssh clients); the "remote" side
        # (sshd, module processes) runs under the private sshd and is not included.
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        self.close_masters(cpdir)
        remote = None
        if remote0 is not None:
            # sshd reaps its sessions (and they their shells and module processes): once no
            # session is left, its children's CPU time includes everything the run did "remotely".
            wait_no_children(self.sshd_pid)
            remote = proc_children_cpu(self.sshd_pid) - remote0
        problem = self.verify(variant, proc.returncode, n, before, reports)
        if problem:
            raise SystemExit("bench: %s run (n=%d) failed: %s; log: %s" % (variant, n, problem, logpath))
        return {"wall_s": wall, "controller_cpu_s": cpu, "remote_cpu_s": remote, "rc": proc.returncode,
                "load1": load[0]}

    def seed_history(self, count):
        """``count`` earlier runs under reports-history (once): copies of the newest plain audit's audit.json, dated
        before any real run, the oldest as it is and the others with their hosts renamed."""
        if os.path.isdir(self.history):
            return
        runs = [d for d in sorted(os.listdir(self.reports)) if d != "latest"]
        with open(os.path.join(self.reports, runs[-1], "audit.json")) as handle:
            text = handle.read()
        for i in range(count):
            run = os.path.join(self.history, "20200101T%06dZ" % i)
            os.makedirs(run)
            with open(os.path.join(run, "audit.json"), "w") as handle:
                handle.write(text if i == 0 else text.replace('"bench-h', '"other-h'))

    def verify(self, variant, rc, n, before, reports):
        if variant in ("ping", "naive", "playbook"):
            return None if rc == 0 else "exit status %d" % rc
        # audit: 0 (all pass) or 2 (hosts cloned from pve-gpu01 fail high checks, as they should)
        if rc not in (0, 2):
            return "exit status %d" % rc
        new = [d for d in sorted(os.listdir(reports)) if d not in before and d != "latest"]
        if not new:
            return "no report written"
        report_dir = os.path.join(reports, new[-1])
        with open(os.path.join(report_dir, "audit.json")) as handle:
            report = json.load(handle)
        hosts = report.get("hosts") or []
        bad = [h.get("host") for h in hosts if not h.get("reachable") or h.get("error") or not h.get("checks")]
        if len(hosts) != n or bad:
            return "report has %d hosts (want %d), not audited: %s" % (len(hosts), n, bad[:5])
        if variant == "history":  # back to the seeded runs alone
            shutil.rmtree(report_dir, ignore_errors=True)
            return None
        # keep only the newest report directory
        for d in os.listdir(reports):
            if d not in ("latest", new[-1]):
                shutil.rmtree(os.path.join(reports, d), ignore_errors=True)
        return None


def quantiles(values):
    vals = sorted(values)
    if len(vals) >= 2:
        q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
    else:
        q1 = q3 = vals[0]
    return {"median": statistics.median(vals), "min": vals[0], "max": vals[-1], "q1": q1, "q3": q3}


def r3(x):
    return round(x, 3) if isinstance(x, float) else x


def measure(runner, inventories, ns, repeats_for, variants):
    raw = {n: {v: [] for v in variants} for n in ns}
    for n in ns:
        reps = max(repeats_for(n, v) for v in variants)
        for rep in range(reps):
            # rotate the order every repetition: ping,audit,naive / audit,naive,ping / ...
            here = [v for v in variants if rep < repeats_for(n, v)]
            order = here[rep % len(here):] + here[:rep % len(here)]
            line = []
            for variant in order:
                res = runner.run(variant, inventories[n], n, "rep%d" % rep)
                raw[n][variant].append(res)
                line.append("%s %.2fs" % (variant, res["wall_s"]))
            log("n=%-3d rep %d/%d: %s (load %.2f)" % (n, rep + 1, reps, ", ".join(line), os.getloadavg()[0]))
    fleet = []
    for n in ns:
        entry = {"n": n, "repeats": repeats_for(n, "audit")}
        for variant in variants:
            entry["%s_repeats" % variant] = len(raw[n][variant])
            if not raw[n][variant]:
                continue
            walls = [r["wall_s"] for r in raw[n][variant]]
            q = quantiles(walls)
            entry["%s_s" % variant] = r3(q["median"])
            entry["%s_spread" % variant] = {k: r3(v) for k, v in q.items() if k != "median"}
            entry["%s_raw_s" % variant] = [r3(w) for w in walls]
            entry["%s_controller_cpu_s" % variant] = r3(statistics.median(
                r["controller_cpu_s"] for r in raw[n][variant]))
            remote = [r["remote_cpu_s"] for r in raw[n][variant] if r["remote_cpu_s"] is not None]
            entry["%s_remote_cpu_s" % variant] = r3(statistics.median(remote)) if remote else None
        if "ping" in variants and "audit" in variants:
            ratios = [a["wall_s"] / p["wall_s"] for a, p in zip(raw[n]["audit"], raw[n]["ping"])]
            q = quantiles(ratios)
            entry["audit_over_ping"] = r3(q["median"])  # median of the per-repetition ratios
            entry["audit_over_ping_spread"] = {k: r3(v) for k, v in q.items() if k != "median"}
            entry["audit_minus_ping_per_host_ms"] = r3(1000.0 * (entry["audit_s"] - entry["ping_s"]) / n)
            entry["audit_over_ping_controller_cpu"] = r3(entry["audit_controller_cpu_s"]
                                                         / entry["ping_controller_cpu_s"])
        if "history_s" in entry:
            ratios = [h["wall_s"] / a["wall_s"] for h, a in zip(raw[n]["history"], raw[n]["audit"])]
            entry["history_over_audit"] = r3(statistics.median(ratios))
            entry["history_runs"] = int(os.environ.get("BENCH_HISTORY", "0"))
        if "naive_s" in entry and "audit_s" in entry:
            entry["naive_over_audit"] = r3(entry["naive_s"] / entry["audit_s"])
        entry["audit_per_host_ms"] = r3(1000.0 * entry["audit_s"] / n) if "audit" in variants else None
        entry["load1_during"] = [r["load1"] for v in variants for r in raw[n][v]]
        fleet.append(entry)
    return fleet


def scaling(fleet, variants):
    """Marginal cost per added host between successive N (ms/host, from the medians).

    Per-host wall time (audit_s / N) falls with N while the fixed start-up cost is amortised;
    "flat per-host cost" means the marginal cost stays the same from one interval to the next.
    """
    out = []
    for a, b in zip(fleet, fleet[1:]):
        step = {"from_n": a["n"], "to_n": b["n"]}
        for v in variants:
            if "%s_s" % v not in a or "%s_s" % v not in b:
                continue
            step["%s_ms_per_added_host" % v] = r3(1000.0 * (b["%s_s" % v] - a["%s_s" % v]) / (b["n"] - a["n"]))
        out.append(step)
    return out


def fleet_arg_parser():
    """The options bench/run.sh passes to every fleet script: work dir, the private sshd, its key."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--sshd-pid", type=int)
    return parser


def main():
    parser = fleet_arg_parser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    ns = [int(x) for x in env_list("BENCH_NS", ["1", "8", "32", "64"])]
    fixed = os.environ.get("BENCH_REPEATS")
    skip = set(filter(None, os.environ.get("BENCH_SKIP", "").split(",")))
    history = int(os.environ.get("BENCH_HISTORY", "0"))
    variants = tuple(v for v in VARIANTS if not (v == "naive" and "naive" in skip) and (v != "history" or history))

    fixed_naive = os.environ.get("BENCH_NAIVE_REPEATS")

    naive_ns = [int(x) for x in env_list("BENCH_NAIVE_NS", DEFAULT_NAIVE_NS.split())]

    def repeats_for(n, variant):
        if variant == "naive" and n not in naive_ns:
            return 0
        if variant == "naive":
            if fixed_naive:
                return int(fixed_naive)
            return min(int(fixed), DEFAULT_NAIVE_REPEATS.get(n, 1)) if fixed else DEFAULT_NAIVE_REPEATS.get(n, 1)
        if fixed:
            return int(fixed)
        return DEFAULT_REPEATS.get(n, 5)

    result = {"machine": machine_info(), "ansible_cfg": ansible_cfg_summary()}
    result["machine"]["load_at_start"] = loadavg()
    t_start = time.time()

    if "fleet" not in skip:
        wait = wait_for_low_load(float(os.environ.get("BENCH_MAX_LOAD", "1.5")),
                                 float(os.environ.get("BENCH_LOAD_WAIT", "120")))
        result["machine"]["load_wait"] = wait
        if not wait["below_threshold"]:
            log("1-minute load is %.2f (>= %.2f) after waiting %.0f s: measuring anyway, results are noisy"
                % (wait["load1"], wait["threshold"], wait["waited_s"]))
        result["machine"]["load_before_fleet"] = loadavg()
        fleet = build_fleet(args.work, max(ns))
        inventories = {n: write_inventory(args.work, fleet, n, args.port, args.key) for n in ns}
        runner = Runner(args.work, args.sshd_pid)
        # Warm-up (untimed): page cache, .pyc files, sshd; also proves every variant works.
        for variant in variants:
            runner.run(variant, inventories[ns[0]], ns[0], "warmup")
        result["fleet"] = measure(runner, inventories, ns, repeats_for, variants)
        result["fleet_scaling"] = scaling(result["fleet"], variants)
        result["machine"]["load_after_fleet"] = loadavg()
        result["fleet_method"] = {
            "hosts": "bench-hNNN, each with its own hardlinked copy of demo/snapshots/pve-gpu0{1,2,3} as pvetune_root",
            "connection": "ssh to one private sshd on 127.0.0.1:%d as root (no become), %s, one ControlPath per host"
                          % (args.port, REMOTE_PYTHON),
            "fresh_connections": "every run starts with an empty ControlPath directory; masters closed after it",
            "order": "variants alternate within each repetition (rotating order), repetitions back to back",
            "spread": "min/max and q1/q3 (inclusive quartiles) of the wall times; audit_over_ping is the "
                      "median of per-repetition ratios (audit and ping of the same repetition)",
        }

    if "facts" not in skip:
        calls = max(20, int(os.environ.get("BENCH_FACTS_CALLS", "30")))
        proc = subprocess.run([sys.executable, os.path.join(TOP, "bench", "facts_bench.py"),
                               "--tree", os.path.join(args.work, "synth"), "--calls", str(calls)],
                              capture_output=True, text=True, check=False)
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            raise SystemExit("bench: facts_bench.py failed (%d)" % proc.returncode)
        facts = json.loads(proc.stdout)
        result["facts_module_ms"] = facts["in_process_ms"]["median"]
        result["facts_module"] = facts
        log("facts module: %.1f ms per gather()+evaluate() (median of %d), end-to-end %.2f s"
            % (facts["in_process_ms"]["median"], calls, facts["end_to_end_s"]["median"]))

    result["machine"]["load_at_end"] = loadavg()
    result["duration_s"] = round(time.time() - t_start, 1)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".json", "w") as handle:
        json.dump(result, handle, indent=2)
        handle.write("\n")
    if result.get("fleet"):
        print()
        print("%4s %9s %9s %9s %12s %14s" % ("N", "ping_s", "audit_s", "naive_s", "audit/ping", "audit ms/host"))
        for e in result["fleet"]:
            print("%4d %9.2f %9.2f %9s %12.2f %14.0f" % (
                e["n"], e["ping_s"], e["audit_s"], "%.2f" % e["naive_s"] if "naive_s" in e else "-",
                e["audit_over_ping"], e["audit_per_host_ms"]))
    log("results written to %s.json (%.0f s)" % (args.out, result["duration_s"]))


if __name__ == "__main__":
    main()
