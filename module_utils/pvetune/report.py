# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet reports: audit.json (schema_version 1), audit.html, junit.xml, a terminal table.

Pure functions from a list of per-host entries to text; writing the files is
the report module's job.  The JSON schema is docs/audit-report.schema.json.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import html
import json
import os
import re
from xml.sax.saxutils import escape as _xml_escape
from xml.sax.saxutils import quoteattr as _quoteattr

from ansible.module_utils.pvetune.core.catalogue import CATALOGUE, SEVERITY_RANK
from ansible.module_utils.pvetune.core.result import SCHEMA_VERSION, TOOL_VERSION

# XML 1.0 cannot carry most C0 control characters, not even as character references; messages and
# evidence quote host files (/proc/cmdline, GRUB values), so such characters are shown as \xNN.
_XML_INVALID = re.compile(u"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
STATUS_ORDER = ("fail", "error", "pending", "warn", "pass", "skip")
CHECK_IDS = [c["id"] for c in CATALOGUE]


def entry_from_audit(host, audit):
    """A report entry from a host name and its registered pvetune_facts result (or None)."""
    audit = audit if isinstance(audit, dict) else {}
    checks = audit.get("results")
    entry = {"host": host, "root": audit.get("root") or "/", "checks": checks if isinstance(checks, list) else [],
             "unreachable": bool(audit.get("unreachable")), "error": None}
    if not isinstance(checks, list):
        entry["error"] = audit.get("msg") or "the audit did not run on this host"
    return entry


def host_summary(entry, fail_on):
    counts = dict.fromkeys(STATUS_ORDER, 0)
    failing = []
    threshold = SEVERITY_RANK[fail_on]
    for res in entry.get("checks") or []:
        counts[res["status"]] = counts.get(res["status"], 0) + 1
        if res["status"] in ("fail", "error") and SEVERITY_RANK.get(res["severity"], 0) >= threshold:
            failing.append(res["id"])
    unreachable = bool(entry.get("unreachable")) or bool(entry.get("error"))
    return {
        "counts": counts,
        "failing": failing,
        "failed": bool(failing) or unreachable,
        "reboot_required": any(r.get("reboot_required") for r in entry.get("checks") or []),
        "pending": [r["id"] for r in entry.get("checks") or [] if r["status"] == "pending"],
    }


def build_document(entries, fail_on="high", generated_at="", run=None):
    """The audit.json document."""
    hosts = []
    for entry in sorted(entries, key=lambda e: e["host"]):
        item = {
            "host": entry["host"],
            "root": entry.get("root", "/"),
            "reachable": not entry.get("unreachable"),
            "error": entry.get("error"),
            "summary": host_summary(entry, fail_on),
            "checks": entry.get("checks") or [],
        }
        hosts.append(item)
    totals = dict.fromkeys(STATUS_ORDER, 0)
    for item in hosts:
        for key, val in item["summary"]["counts"].items():
            totals[key] += val
    failed_hosts = [h["host"] for h in hosts if h["summary"]["failed"]]
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "pvetune", "version": TOOL_VERSION},
        "generated_at": generated_at,
        "run": dict(run or {}, fail_on=fail_on),
        "summary": {"hosts": len(hosts), "failed_hosts": failed_hosts, "counts": totals,
                    "reboot_required": [h["host"] for h in hosts if h["summary"]["reboot_required"]]},
        "hosts": hosts,
    }


def render_json(doc):
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


# -- terminal ------------------------------------------------------------------
def render_text(doc, detail=True):
    """Compact fleet table, then the non-passing checks of each host."""
    cols = ("pass", "fail", "warn", "pending", "skip", "error")
    width = max([len("HOST")] + [len(h["host"]) for h in doc["hosts"]])
    header = " ".join("%7s" % c.upper() for c in cols)
    lines = ["%-*s  %s  FAILING (severity >= %s)" % (width, "HOST", header, doc["run"]["fail_on"])]
    for host in doc["hosts"]:
        s = host["summary"]
        if not host["reachable"] or host.get("error"):
            lines.append("%-*s  %s" % (width, host["host"], "UNREACHABLE/ERROR: %s" % (host.get("error") or "")))
            continue
        lines.append("%-*s  %s  %s" % (width, host["host"], " ".join("%7d" % s["counts"][c] for c in cols),
                                       ", ".join(s["failing"]) or "-"))
    if detail:
        for host in doc["hosts"]:
            rows = [r for r in host["checks"] if r["status"] not in ("pass", "skip")]
            if not rows:
                continue
            lines.append("")
            lines.append("%s:" % host["host"])
            for res in sorted(rows, key=lambda r: (STATUS_ORDER.index(r["status"]), -SEVERITY_RANK[r["severity"]])):
                flag = " [reboot]" if res["reboot_required"] else ""
                lines.append("  %-7s %-22s %s%s" % (res["status"].upper(), res["id"], _one_line(res["message"]), flag))
    summary = doc["summary"]
    lines.append("")
    failed = summary["failed_hosts"]
    lines.append("%d hosts, %d failing: %s" % (summary["hosts"], len(failed), ", ".join(failed) or "none"))
    return "\n".join(lines) + "\n"


def _one_line(text, limit=150):
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- JUnit ---------------------------------------------------------------------
def _xml_safe(text):
    return _XML_INVALID.sub(lambda m: "\\x%02x" % ord(m.group()), text)


def quoteattr(text):
    return _quoteattr(_xml_safe(text))


def xml_escape(text):
    return _xml_escape(_xml_safe(text))


def render_junit(doc):
    out = ['<?xml version="1.0" encoding="UTF-8"?>']
    total = sum(len(h["checks"]) or 1 for h in doc["hosts"])
    fails = sum(1 for h in doc["hosts"] for r in h["checks"] if r["status"] == "fail")
    errors = sum(1 for h in doc["hosts"] for r in h["checks"] if r["status"] == "error") + sum(
        1 for h in doc["hosts"] if not h["checks"])
    skipped = sum(1 for h in doc["hosts"] for r in h["checks"] if r["status"] in ("skip", "pending"))
    out.append('<testsuites name="pvetune audit" tests="%d" failures="%d" errors="%d" skipped="%d">'
               % (total, fails, errors, skipped))
    for host in doc["hosts"]:
        checks = host["checks"]
        out.append('  <testsuite name=%s tests="%d" failures="%d" errors="%d" skipped="%d">' % (
            quoteattr(host["host"]), len(checks) or 1,
            sum(1 for r in checks if r["status"] == "fail"),
            sum(1 for r in checks if r["status"] == "error") + (0 if checks else 1),
            sum(1 for r in checks if r["status"] in ("skip", "pending"))))
        if not checks:
            out.append('    <testcase classname=%s name="reachable">' % quoteattr(host["host"]))
            out.append('      <error message=%s/>' % quoteattr(host.get("error") or "host unreachable"))
            out.append("    </testcase>")
        for res in checks:
            out.append('    <testcase classname=%s name=%s>' % (quoteattr(host["host"]), quoteattr(res["id"])))
            body = "current: %s\nexpected: %s\n%s\nremediation: %s\nevidence:\n  %s" % (
                res["current"], res["expected"], res["message"], res["remediation"], "\n  ".join(res["evidence"]))
            msg = quoteattr("[%s] %s" % (res["severity"], _one_line(res["message"], 300)))
            if res["status"] == "fail":
                out.append("      <failure message=%s type=%s>%s</failure>" % (
                    msg, quoteattr(res["severity"]), xml_escape(body)))
            elif res["status"] == "error":
                out.append("      <error message=%s>%s</error>" % (msg, xml_escape(body)))
            elif res["status"] in ("skip", "pending"):
                out.append("      <skipped message=%s/>"
                           % quoteattr("%s: %s" % (res["status"], _one_line(res["message"]))))
            else:
                out.append("      <system-out>%s</system-out>" % xml_escape("%s: %s" % (res["status"], body)))
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


# -- HTML ----------------------------------------------------------------------
CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 28px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c4cad6}main{padding:20px 28px;max-width:1400px}
h2{margin:28px 0 10px;font-size:17px}table{border-collapse:collapse;background:#fff;width:100%}
th,td{border:1px solid #dde1e8;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}td.c{text-align:center;white-space:nowrap}
.st{display:inline-block;min-width:56px;padding:1px 6px;border-radius:4px;font-weight:600;font-size:12px;
text-align:center}
.pass{background:#d8f3df;color:#125c2a}.fail{background:#fbd5d5;color:#8a1212}.warn{background:#fff0c2;color:#6b4e00}
.pending{background:#dbe9ff;color:#123e86}.skip{background:#eceef2;color:#59606e}.error{background:#f5d0f0;color:#6c0b61}
details{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:6px 0;padding:6px 10px}
summary{cursor:pointer}dl{display:grid;grid-template-columns:140px 1fr;gap:4px 12px;margin:8px 0}
dt{color:#59606e}dd{margin:0;white-space:pre-wrap}code,pre{font:12px ui-monospace,Menlo,Consolas,monospace}
pre{background:#f3f4f7;padding:6px 8px;border-radius:4px;white-space:pre-wrap;margin:0}
.host{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:8px 16px;margin:16px 0}
.muted{color:#59606e}
"""


def _st(status):
    return '<span class="st %s">%s</span>' % (html.escape(status), html.escape(status))


def render_html(doc):
    e = html.escape
    summary = doc["summary"]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             "<title>pvetune audit %s</title>" % e(doc["generated_at"]), "<style>%s</style></head><body>" % CSS,
             "<header><h1>pvetune audit: Proxmox VE GPU host performance</h1>",
             "<p>%s &middot; %d hosts &middot; %d failing (severity &ge; %s) &middot; schema v%d</p></header><main>" % (
                 e(doc["generated_at"]), summary["hosts"], len(summary["failed_hosts"]), e(doc["run"]["fail_on"]),
                 doc["schema_version"])]
    # Fleet overview: host x check matrix.
    parts.append("<h2>Fleet overview</h2><table><tr><th>host</th>")
    for cid in CHECK_IDS:
        parts.append('<th title="%s">%s</th>' % (e(cid), e(cid.replace(".", ".\u200b"))))
    parts.append("</tr>")
    for host in doc["hosts"]:
        by_id = {r["id"]: r for r in host["checks"]}
        parts.append('<tr><td><a href="#host-%s">%s</a></td>' % (e(host["host"]), e(host["host"])))
        if not host["checks"]:
            parts.append('<td colspan="%d">%s %s</td></tr>' % (
                len(CHECK_IDS), _st("error"), e(host.get("error") or "unreachable")))
            continue
        for cid in CHECK_IDS:
            res = by_id.get(cid)
            if res is None:
                parts.append('<td class="c muted">-</td>')
            else:
                parts.append('<td class="c" title="%s">%s</td>'
                             % (e(_one_line(res["message"], 300)), _st(res["status"])))
        parts.append("</tr>")
    parts.append("</table>")
    # Per host.
    for host in doc["hosts"]:
        s = host["summary"]
        parts.append('<section class="host" id="host-%s"><h2>%s</h2>' % (e(host["host"]), e(host["host"])))
        parts.append('<p class="muted">root %s &middot; %s &middot; reboot required: %s</p>' % (
            e(host["root"]), " ".join("%s %d" % (_st(k), v) for k, v in s["counts"].items() if v),
            "yes" if s["reboot_required"] else "no"))
        if host.get("error"):
            parts.append("<p>%s %s</p>" % (_st("error"), e(host["error"])))
        for res in sorted(host["checks"], key=lambda r: (STATUS_ORDER.index(r["status"]), r["id"])):
            summary_html = "<details%s><summary>%s <b>%s</b> &middot; %s <span class=\"muted\">[%s]%s</span></summary>"
            parts.append(summary_html % (
                " open" if res["status"] in ("fail", "error") else "", _st(res["status"]), e(res["id"]),
                e(res["title"]), e(res["severity"]), " &middot; reboot required" if res["reboot_required"] else ""))
            parts.append("<dl><dt>current</dt><dd>%s</dd><dt>expected</dt><dd>%s</dd><dt>result</dt><dd>%s</dd>"
                         "<dt>why it matters</dt><dd>%s</dd><dt>fix</dt><dd>%s</dd>" % (
                             e(str(res["current"])), e(str(res["expected"])), e(res["message"]),
                             e(res["rationale"]), e(res["remediation"])))
            if res["evidence"]:
                parts.append("<dt>evidence</dt><dd><pre>%s</pre></dd>" % e("\n".join(res["evidence"])))
            parts.append("</dl>")
            if res["items"]:
                parts.append("<table><tr><th>item</th><th>status</th><th>current</th><th>expected</th><th>note</th></tr>")
                for item in res["items"]:
                    parts.append("<tr><td><code>%s</code></td><td class=\"c\">%s</td><td>%s</td><td>%s</td>"
                                 "<td>%s</td></tr>"
                                 % (e(str(item.get("name"))), _st(item.get("status", "skip")),
                                    e(str(item.get("current"))), e(str(item.get("expected"))),
                                    e(str(item.get("message") or ""))))
                parts.append("</table>")
            parts.append("</details>")
        parts.append("</section>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


# -- writing -------------------------------------------------------------------
TIMESTAMP = re.compile(r"^\d{8}T\d{6}Z(-\d{1,3})?\Z")


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(text)
    os.rename(tmp, path)


def write_reports(hosts, audits, dest, fail_on="high", run=None, timestamp=None, check_mode=False, now=None):
    """Render and (unless check_mode) write <dest>/<timestamp>/{audit.json,audit.html,junit.xml,summary.txt}
    and point <dest>/latest at it.  Returns the module result."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    stamp = timestamp or now.strftime("%Y%m%dT%H%M%SZ")
    if not TIMESTAMP.match(stamp):
        raise ValueError("timestamp must look like 20261129T193000Z")
    audits = audits or {}
    entries = [entry_from_audit(host, audits.get(host)) for host in hosts]
    doc = build_document(entries, fail_on=fail_on, generated_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"), run=run)
    text = render_text(doc)
    dest = os.path.abspath(dest)
    run_dir = os.path.join(dest, stamp)
    suffix = 1
    while os.path.exists(run_dir) and not check_mode:
        run_dir = os.path.join(dest, "%s-%d" % (stamp, suffix))
        suffix += 1
    names = {"audit.json": render_json(doc), "audit.html": render_html(doc),
             "junit.xml": render_junit(doc), "summary.txt": text}
    if not check_mode:
        if not os.path.isdir(run_dir):
            os.makedirs(run_dir)
        for name, content in names.items():
            _write(os.path.join(run_dir, name), content)
        latest = os.path.join(dest, "latest")
        tmp_link = latest + ".tmp"
        if os.path.lexists(tmp_link):
            os.unlink(tmp_link)
        os.symlink(os.path.basename(run_dir), tmp_link)
        os.rename(tmp_link, latest)
    files = [os.path.join(run_dir, n) for n in sorted(names)]
    failed = doc["summary"]["failed_hosts"]
    return {"changed": not check_mode, "report_dir": run_dir, "files": files, "summary_text": text,
            "failed_hosts": failed, "fleet_failed": bool(failed)}
