#!/usr/bin/env python3
"""Render bench/results/<stem>.json as Markdown (<stem>.md): machine, fleet table, facts module.
Usage: summarize.py RESULT.json"""

import json
import os
import sys


def fmt_spread(entry, variant):
    if "%s_s" % variant not in entry:
        return "not run"
    sp = entry["%s_spread" % variant]
    if entry.get("%s_repeats" % variant) == 1:
        return "%.2f (1 run)" % entry["%s_s" % variant]
    return "%.2f (%.2f–%.2f)" % (entry["%s_s" % variant], sp["min"], sp["max"])


def render(data):
    m = data["machine"]
    out = ["# Benchmark results (%s)" % m.get("date_utc"), ""]
    out.append("Machine: %s, %s cores, %s GiB RAM, kernel %s, %s; controller Python %s; host Python %s; "
               "ansible-core %s; %s; commit %s." % (
                   m.get("cpu_model"), m.get("cores"), m.get("mem_gib"), m.get("kernel"), m.get("os"),
                   m.get("python_controller"), m.get("python_remote"), m.get("ansible_core"), m.get("openssh"),
                   m.get("git_commit")))
    loads = ["start %s" % m.get("load_at_start")]
    if m.get("load_before_fleet"):
        loads.append("before fleet runs %s" % m["load_before_fleet"])
    if m.get("load_after_fleet"):
        loads.append("after %s" % m["load_after_fleet"])
    loads.append("end %s" % m.get("load_at_end"))
    out.append("Load average (1/5/15 min): %s." % "; ".join(loads))
    wait = m.get("load_wait")
    if wait and not wait.get("below_threshold"):
        out.append("**The 1-minute load was %.2f (threshold %.2f) when the fleet runs started: other work shared "
                   "the 2 cores, absolute times are inflated and noisy; ratios within a repetition are the "
                   "robust number.**" % (wait["load1"], wait["threshold"]))
    out.append("")
    fleet = data.get("fleet") or []
    if fleet:
        has_naive = any("naive_s" in e for e in fleet)
        out.append("Wall time in seconds, median (min–max) over the repetitions; variants alternate within each "
                   "repetition; audit/ping is the median of the per-repetition ratios.")
        out.append("")
        head = "| N | reps (ping, audit / naive) | ping s | audit s |" + (" naive s |" if has_naive else "") + \
               " audit/ping | audit ms/host | (audit−ping) ms/host |" + (" naive/audit |" if has_naive else "")
        out.append(head)
        out.append("|" + "---|" * (head.count("|") - 1))
        for e in fleet:
            reps = "%d" % e["repeats"] + (" / %d" % e.get("naive_repeats", e["repeats"]) if has_naive else "")
            row = "| %d | %s | %s | %s |" % (e["n"], reps, fmt_spread(e, "ping"), fmt_spread(e, "audit"))
            if has_naive:
                row += " %s |" % fmt_spread(e, "naive")
            row += " %.2f (%.2f–%.2f) | %.0f | %.0f |" % (
                e["audit_over_ping"], e["audit_over_ping_spread"]["min"], e["audit_over_ping_spread"]["max"],
                e["audit_per_host_ms"], e["audit_minus_ping_per_host_ms"])
            if has_naive:
                row += " %s |" % ("%.1f×" % e["naive_over_audit"] if "naive_over_audit" in e else "–")
            out.append(row)
        out.append("")
        if data.get("fleet_scaling"):
            out.append("Marginal cost per added host (ms, from the medians): " + "; ".join(
                "N %d→%d: ping %.0f, audit %.0f%s" % (
                    st["from_n"], st["to_n"], st["ping_ms_per_added_host"], st["audit_ms_per_added_host"],
                    ", naive %.0f" % st["naive_ms_per_added_host"] if "naive_ms_per_added_host" in st else "")
                for st in data["fleet_scaling"]) + ".")
            out.append("")
        for e in fleet:
            if "history_s" in e:
                out.append("With %d earlier runs in the report directory (drift searching all of them), N=%d: audit "
                           "%s s, %.3f× the plain audit (median of the per-repetition ratios)."
                           % (e["history_runs"], e["n"], fmt_spread(e, "history"), e["history_over_audit"]))
                out.append("")
        out.append("CPU seconds per run (median): controller side (ansible and its forks, ssh clients) / "
                   "host side (sshd sessions and module processes):")
        out.append("")
        for e in fleet:
            parts = []
            for v in ("ping", "audit", "history", "naive"):
                if "%s_controller_cpu_s" % v in e:
                    parts.append("%s %.1f / %s" % (v, e["%s_controller_cpu_s" % v],
                                                   "%.1f" % e["%s_remote_cpu_s" % v]
                                                   if e.get("%s_remote_cpu_s" % v) is not None else "-"))
            ratio = e.get("audit_over_ping_controller_cpu")
            out.append("- N=%d: %s%s" % (e["n"], ", ".join(parts),
                                         "; controller CPU audit/ping %.2f" % ratio if ratio else ""))
        out.append("")
    fm = data.get("facts_module")
    if fm:
        h = fm["host"]
        ip = fm["in_process_ms"]
        e2e = fm["end_to_end_s"]
        out.append("Facts module on the synthetic host (%d CPUs × %d idle states, %d GPUs + %d bridges, %d CT configs, "
                   "%d files): gather()+evaluate() **%.1f ms** per call (median of %d; min %.1f, max %.1f); "
                   "end to end `ansible localhost -m pvetune_facts` %.2f s (median of %d, mostly Ansible start-up); "
                   "result %d bytes of JSON." % (
                       h["cpus"], h["cpuidle_states_per_cpu"], h["gpus"], h["bridges"], h["ct_configs"], h["files"],
                       ip["median"], ip["n"], ip["min"], ip["max"], e2e["median"], e2e["n"], fm["result_json_bytes"]))
        out.append("")
    return "\n".join(out)


def main(path):
    with open(path) as handle:
        data = json.load(handle)
    text = render(data)
    out = os.path.splitext(path)[0] + ".md"
    with open(out, "w") as handle:
        handle.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
