#!/usr/bin/env python3
"""Plot bench/results/<stem>.json into <stem>.png: wall time vs N (ping, audit, naive)
with min/max bars, and audit/ping per N.  Usage: plot.py RESULT.json"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

PLAIN = FuncFormatter(lambda v, _pos: "%g" % v)

STYLE = {"ping": ("ping (Ansible floor)", "tab:gray", "o"),
         "audit": ("audit.yml (pvetune_facts + reports)", "tab:blue", "s"),
         "naive": ("naive_audit.yml (one task per input)", "tab:red", "^")}


def main(path):
    with open(path) as handle:
        data = json.load(handle)
    fleet = data.get("fleet") or []
    if not fleet:
        print("plot: no fleet results in %s" % path)
        return 0
    ns = [e["n"] for e in fleet]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    for variant, (label, color, marker) in STYLE.items():
        key = "%s_s" % variant
        pts = [e for e in fleet if key in e]
        if not pts:
            continue
        med = [e[key] for e in pts]
        lo = [m - e["%s_spread" % variant]["min"] for m, e in zip(med, pts)]
        hi = [e["%s_spread" % variant]["max"] - m for m, e in zip(med, pts)]
        ax.errorbar([e["n"] for e in pts], med, yerr=[lo, hi], label=label, color=color, marker=marker,
                    capsize=3)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ns)
    ax.set_xticklabels([str(n) for n in ns])
    ax.set_xlabel("hosts (N)")
    ax.set_ylabel("wall time, s (median, min-max bars)")
    ax.set_title("Fleet audit over SSH vs Ansible's floor")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)

    ratio = [e["audit_over_ping"] for e in fleet]
    lo = [r - e["audit_over_ping_spread"]["min"] for r, e in zip(ratio, fleet)]
    hi = [e["audit_over_ping_spread"]["max"] - r for r, e in zip(ratio, fleet)]
    ax2.errorbar(ns, ratio, yerr=[lo, hi], color="tab:blue", marker="s", capsize=3, label="audit / ping")
    pts = [e for e in fleet if "naive_s" in e]
    if pts:
        ax2.plot([e["n"] for e in pts], [e["naive_s"] / e["ping_s"] for e in pts], color="tab:red", marker="^",
                 label="naive / ping (medians)")
    ax2.axhline(1.3, color="tab:green", linestyle="--", label="goal 1.3x at N=64")
    ax2.set_xscale("log", base=2)
    ax2.set_xticks(ns)
    ax2.set_xticklabels([str(n) for n in ns])
    ax2.set_yscale("log")
    ax2.set_xlabel("hosts (N)")
    ax2.set_ylabel("ratio to ping (same repetition)")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=8)
    m = data.get("machine", {})
    fig.suptitle("%s, %s cores, ansible-core %s, load %s -> %s" % (
        m.get("cpu_model"), m.get("cores"), m.get("ansible_core"),
        "/".join(str(x) for x in m.get("load_before_fleet") or m.get("load_at_start") or []),
        "/".join(str(x) for x in m.get("load_after_fleet") or m.get("load_at_end") or [])), fontsize=9)
    for axis in (ax, ax2):
        axis.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.3, 2.0, 3.0, 5.0, 7.0)))
        axis.yaxis.set_major_formatter(PLAIN)
        axis.yaxis.set_minor_formatter(NullFormatter())
    fig.tight_layout()
    out = os.path.splitext(path)[0] + ".png"
    fig.savefig(out, dpi=110)
    print("plot: %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
