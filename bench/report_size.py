#!/usr/bin/env python3
"""Size of the fleet reports at fleet scale, from the demo fleet's real audits repeated.

    bench/report_size.py [HOSTS ...]      # default 5 64 256; JSON on stdout

Gathers and evaluates the five demo hosts once (as audit.yml would, with the demo policy), then builds the
report document for N hosts named pve-gpuNNN (host i is demo host i mod 5) and renders audit.html, audit.json,
junit.xml and summary.md. No playbook runs. README's numbers come from this script.
"""
import gzip
import json
import os
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(TOP, "tests"), os.path.join(TOP, "tests", "unit")]
import conftest  # noqa: E402,F401  (ansible.module_utils.pvetune importable)
from ansible.module_utils.pvetune.report import write as report  # noqa: E402
from reportutil import fleet_entries  # noqa: E402  (the demo fleet's audits repeated, as the unit tests use)


def measure(count):
    doc = report.build_document(fleet_entries(count), generated_at="2026-11-29T20:06:52Z",
                                run={"playbook": "audit.yml", "inventory": ["inventory/demo"]})
    out = {"hosts": count}
    html = report.render_html(doc)
    out["audit.html gzip"] = {"bytes": len(gzip.compress(html.encode("utf-8")))}
    for name, render in (("audit.html", report.render_html), ("audit.json", report.render_json),
                         ("junit.xml", report.render_junit), ("summary.md", report.render_markdown)):
        start = time.perf_counter()
        text = render(doc)
        out[name] = {"bytes": len(text.encode("utf-8")), "render_s": round(time.perf_counter() - start, 3)}
    return out


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [5, 64, 256]
    print(json.dumps([measure(n) for n in sizes], indent=2))
