# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""audit.html from the audit document: self-contained (inline CSS and script, nothing fetched), every host text
escaped.

A filter form (report_html_filter: shown and working only with JavaScript; without it the page shows everything),
a fleet overview (host x check, each cell a link to that check of that host, and what changed since the host's
last audit), then one section per host: what changed since its previous audit (report_drift), its checks most
severe first (then by status), each with the fix command when there is something to fix, and the effective policy
the host was audited with.  Fleet scale: what is the same on every host is written once, the checks' rationale
and remediation in a reference section at the end (one entry per distinct text: the policy fills them in), and a
policy shared with an earlier host as a link to it; consecutive items with the same status and values are one row.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import html
import json
import string

from ansible.module_utils.pvetune.core.catalogue import SEVERITY_RANK
from ansible.module_utils.pvetune.report.document import CHECK_IDS, STATUS_ORDER, one_line, unaudited_reason
from ansible.module_utils.pvetune.report.drift import CATEGORIES, drift_line
from ansible.module_utils.pvetune.report.html_filter import FILTER_CSS, filter_form, filter_script

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 28px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c4cad6}main{padding:20px 28px;max-width:1400px}
table.topo td{min-width:3em}.topo-pix{background:#d9f2e3}.topo-pxb{background:#e8f5d0}.topo-phb{background:#fdf1d0}
.topo-node{background:#fbe2cc}.topo-sys{background:#f8d4d4}
h2{margin:28px 0 10px;font-size:17px}table{border-collapse:collapse;background:#fff;width:100%}
th,td{border:1px solid #dde1e8;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}td.c{text-align:center;white-space:nowrap}td.c a{text-decoration:none}
.st{display:inline-block;min-width:56px;padding:1px 6px;border-radius:4px;font-weight:600;font-size:12px;
text-align:center}
.pass{background:#d8f3df;color:#125c2a}.fail{background:#fbd5d5;color:#8a1212}.warn{background:#fff0c2;color:#6b4e00}
.pending{background:#dbe9ff;color:#123e86}.skip{background:#eceef2;color:#59606e}.error{background:#f5d0f0;color:#6c0b61}
details{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:6px 0;padding:6px 10px}
details:target{outline:2px solid #3b6fd8}
summary{cursor:pointer}dl{display:grid;grid-template-columns:140px 1fr;gap:4px 12px;margin:8px 0}
dt{color:#59606e}dd{margin:0;white-space:pre-wrap}code,pre{font:12px ui-monospace,Menlo,Consolas,monospace}
pre{background:#f3f4f7;padding:6px 8px;border-radius:4px;white-space:pre-wrap;margin:0}
.host{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:8px 16px;margin:16px 0}
.muted{color:#59606e}.drift{margin:6px 0}.drift ul{margin:2px 0 6px;padding-left:22px}
.ref{background:#fff;border:1px solid #dde1e8;border-radius:6px;margin:6px 0;padding:6px 10px}
.ref:target{outline:2px solid #3b6fd8}.ref h3{margin:2px 0;font-size:14px}
"""
EMPTY = "\u2014"  # what a cell shows for a value that is missing (None)
_ID_SAFE = frozenset(string.ascii_letters + string.digits + "-._")


def _id_part(text):
    """``text`` as characters valid in an HTML id (also HTML 4's rules): letters, digits, '-', '.' and '_' stay,
    every other UTF-8 byte becomes :hh.  Distinct texts give distinct parts, and a part never contains '::'."""
    out = []
    for char in str(text):
        if char in _ID_SAFE:
            out.append(char)
        else:
            out.extend(":%02x" % byte for byte in char.encode("utf-8"))
    return "".join(out)


def host_anchor(host):
    return "host-" + _id_part(host)


def policy_anchor(host):
    return "policy-" + _id_part(host)


def check_anchor(host, check_id):
    return "check-%s::%s" % (_id_part(host), _id_part(check_id))


def _st(status):
    return '<span class="st %s">%s</span>' % (html.escape(status), html.escape(status))


def _value(value):
    """A value for a cell: EMPTY for a missing one, never the text None."""
    return EMPTY if value is None else html.escape(str(value))


def check_order(res):
    """Most severe first, then by status (STATUS_ORDER), then in catalogue order."""
    rank = -SEVERITY_RANK.get(res.get("severity"), -1)
    status = STATUS_ORDER.index(res["status"]) if res.get("status") in STATUS_ORDER else len(STATUS_ORDER)
    pos = CHECK_IDS.index(res["id"]) if res.get("id") in CHECK_IDS else len(CHECK_IDS)
    return rank, status, pos, str(res.get("id"))


def ref_anchor(check_id, variant=1):
    """The reference entry of a check (its rationale and remediation); variant n > 1 for the n-th distinct text."""
    return "ref-" + _id_part(check_id) + ("-%d" % variant if variant > 1 else "")


def references(doc):
    """{(check id, rationale, remediation): anchor} and the entries [(anchor, result, [host names])], each distinct
    text once, in catalogue order, a check's variants in order of first appearance."""
    anchors, entries, variants = {}, {}, {}
    for host in doc["hosts"]:
        for res in host["checks"]:
            key = (res["id"], res["rationale"], res["remediation"])
            if key not in anchors:
                variants[res["id"]] = variants.get(res["id"], 0) + 1
                anchors[key] = ref_anchor(res["id"], variants[res["id"]])
                pos = CHECK_IDS.index(res["id"]) if res["id"] in CHECK_IDS else len(CHECK_IDS)
                entries[key] = ((pos, res["id"], variants[res["id"]]), anchors[key], res, [])
            entries[key][3].append(host["host"])
    return anchors, [entry[1:] for entry in sorted(entries.values(), key=lambda entry: entry[0])]


def _drift_cell(drift):
    """The overview's short "since last audit" cell: counts per category, the whole line on hover."""
    e = html.escape
    if not drift:
        return '<td class="c muted">-</td>'
    if drift["state"] != "changed":
        return '<td class="c muted">%s</td>' % {"first_audit": "first audit", "unchanged": "=",
                                                "unaudited": "-"}[drift["state"]]
    counts = [(len(drift[key]), label) for key, label in CATEGORIES if key != "still_failing" and drift[key]]
    text = ", ".join("%d %s" % c for c in counts) or "reboot"
    return '<td class="c" title="%s">%s</td>' % (e(drift_line(drift)), e(text))


def _overview(doc):
    e = html.escape
    parts = ["<h2>Fleet overview</h2><table><tr><th>host</th><th>since last audit</th>"]
    parts += ['<th title="%s">%s</th>' % (e(cid), e(cid.replace(".", ".\u200b"))) for cid in CHECK_IDS]
    parts.append("</tr>")
    for host in doc["hosts"]:
        by_id = {r["id"]: r for r in host["checks"]}
        anchor = host_anchor(host["host"])
        parts.append('<tr data-row="%s"><td><a href="#%s">%s</a></td>%s' % (
            anchor, anchor, e(host["host"]), _drift_cell(host.get("drift"))))
        reason = unaudited_reason(host)
        if reason:
            parts.append('<td colspan="%d">%s could not be audited: %s</td></tr>' % (
                len(CHECK_IDS), _st("error"), e(reason)))
            continue
        cells = []
        for cid in CHECK_IDS:
            res = by_id.get(cid)
            if res is None:
                cells.append('<td class="c muted">-</td>')
            else:  # the hover text is short: the whole message is one click away
                cells.append('<td class="c" title="%s"><a class="st %s" href="#%s">%s</a></td>' % (
                    e(one_line(res["message"], 120)), e(res["status"]), check_anchor(host["host"], cid),
                    e(res["status"])))
        parts.append("".join(cells) + "</tr>")
    parts.append("</table>")
    return parts


def _item_groups(res):
    """Consecutive items with the same status, values and note, as [([names], item)]; for a result with a matrix
    only the items that do not pass (the matrix shows the rest)."""
    groups, last = [], None
    for item in res["items"]:
        if res.get("matrix") and item.get("status") == "pass" and not item.get("message"):
            continue
        key = (item.get("status"), item.get("current"), item.get("expected"), item.get("message"))
        if groups and key == last:
            groups[-1][0].append(item.get("name"))
        else:
            groups.append(([item.get("name")], item))
        last = key
    return groups


def _check(host, res, ref):
    e = html.escape
    parts = ['<details id="%s" data-st="%s" data-sev="%d"%s><summary>%s <b>%s</b> &middot; %s '
             '<span class="muted">[%s]%s</span></summary>' % (
                 check_anchor(host["host"], res["id"]), e(res["status"]), SEVERITY_RANK.get(res["severity"], 0),
                 " open" if res["status"] in ("fail", "error") else "", _st(res["status"]), e(res["id"]),
                 e(res["title"]), e(res["severity"]), " &middot; reboot required" if res["reboot_required"] else "")]
    parts.append('<dl><dt>current</dt><dd>%s</dd><dt>expected</dt><dd>%s</dd><dt>result</dt><dd>%s</dd>'
                 '<dt>why, fix</dt><dd><a href="#%s">why it matters and how to fix it</a></dd>' % (
                     _value(res["current"]), _value(res["expected"]), e(res["message"] or ""), ref))
    if res.get("fix_command"):
        parts.append("<dt>fix command</dt><dd><code>%s</code></dd>" % e(res["fix_command"]))
    if res["evidence"]:
        parts.append("<dt>evidence</dt><dd><pre>%s</pre></dd>" % e("\n".join(res["evidence"])))
    parts.append("</dl>")
    if res.get("matrix"):
        parts.extend(_matrix(res["matrix"]))
    groups = _item_groups(res)
    if groups:
        parts.append("<table><tr><th>item</th><th>status</th><th>current</th><th>expected</th><th>note</th></tr>")
        for names, item in groups:
            parts.append('<tr><td>%s</td><td class="c">%s</td><td>%s</td><td>%s</td><td>%s</td></tr>' % (
                "<br>".join("<code>%s</code>" % _value(n) for n in names), _st(item.get("status") or "skip"),
                _value(item.get("current")), _value(item.get("expected")), e(str(item.get("message") or ""))))
        parts.append("</table>")
    parts.append("</details>")
    return parts


def _matrix(mat):
    """The GPU-to-GPU path matrix as nvidia-smi topo -m lays it out; the GPUs' names in full below it."""
    e = html.escape
    parts = ['<table class="topo"><tr><th></th>%s</tr>' % "".join(
        '<th>GPU%d</th>' % i for i in range(len(mat["gpus"])))]
    for i, row in enumerate(mat["rows"]):
        parts.append('<tr><th>GPU%d</th>%s</tr>' % (i, "".join(
            '<td class="c topo-%s">%s</td>' % (e(c.lower()) if c != "?" else "unknown", e(c)) for c in row)))
    parts.append("</table>")
    parts.append('<p class="muted">%s</p>' % " &middot; ".join(
        "GPU%d %s" % (i, e(n)) for i, n in enumerate(mat["gpus"])))
    return parts


def _change_list(host, changes):
    e = html.escape
    out = []
    for ch in changes:
        link = '<a href="#%s">%s</a>' % (check_anchor(host["host"], ch["id"]), e(ch["id"])) if ch["now"] else e(
            ch["id"])
        out.append(link if ch["was"] == ch["now"] else "%s (%s &rarr; %s)" % (link, e(ch["was"] or "none"),
                                                                              e(ch["now"] or "none")))
    return ", ".join(out)


def _drift(host):
    """The host's "since the last audit" part."""
    e = html.escape
    drift = host.get("drift")
    if not drift:
        return []
    prev = drift["previous"]
    since = ("<code>%s</code> (%s, verdict then: %s)" % (e(prev["report"]), e(prev["generated_at"] or "-"),
                                                         e(prev["verdict"] or "-"))) if prev else ""
    parts = ['<div class="drift"><b>Since the last audit</b>: ']
    if drift["state"] == "first_audit":
        parts.append("first audit of this host (no earlier report of it in this report directory).")
    elif drift["state"] == "unaudited":
        parts.append("not compared: this run could not audit the host%s." % (
            "; last audited in %s" % since if prev else ""))
    else:
        parts.append("compared with %s%s" % (since, ": no change." if drift["state"] == "unchanged" else "."))
        rows = ["<li>%s: %s</li>" % (e(label), _change_list(host, drift[key])) for key, label in CATEGORIES
                if drift[key]]
        reboot = drift.get("reboot_required")
        if reboot:
            was, now = ("yes" if reboot[k] else "no" for k in ("was", "now"))
            rows.append("<li>reboot required: %s &rarr; %s</li>" % (was, now))
        if rows:
            parts.append("<ul>%s</ul>" % "".join(rows))
    parts.extend('<p class="muted">note: %s</p>' % e(note) for note in drift["notes"])
    parts.append("</div>")
    return ["".join(parts)]


def _policy(host, seen):
    """The effective policy in full the first time it appears, then a link to that first host's."""
    e = html.escape
    text = json.dumps(host["policy"], indent=2, sort_keys=True, default=str)
    first = seen.setdefault(text, host["host"])
    if first != host["host"]:
        return ['<p class="policy muted">effective policy: the same as <a href="#%s">%s</a>\'s</p>' % (
            policy_anchor(first), e(first))]
    return ['<details class="policy" id="%s"><summary>effective policy</summary><pre>%s</pre></details>' % (
        policy_anchor(host["host"]), e(text))]


def _host(host, refs, policies):
    e = html.escape
    s = host["summary"]
    drift = host.get("drift") or {}
    parts = ['<section class="host" id="%s" data-host="%s" data-verdict="%s" data-drift="%s"><h2>%s</h2>' % (
        host_anchor(host["host"]), e(host["host"]), e(s["verdict"]), e(drift.get("state", "")), e(host["host"]))]
    parts.append('<p class="muted">root %s &middot; %s &middot; reboot required: %s</p>' % (
        e(host["root"]), " ".join("%s %d" % (_st(k), v) for k, v in s["counts"].items() if v),
        "yes" if s["reboot_required"] else "no"))
    reason = unaudited_reason(host)
    if reason:
        parts.append("<p>%s could not be audited: %s</p>" % (_st("error"), e(reason)))
    parts.extend(_drift(host))
    if host.get("policy") is not None:
        parts.extend(_policy(host, policies))
    for res in sorted(host["checks"], key=check_order):
        parts.extend(_check(host, res, refs[(res["id"], res["rationale"], res["remediation"])]))
    parts.append("</section>")
    return parts


def _reference(entries):
    """Each check's rationale and remediation once (per distinct text), after the hosts."""
    e = html.escape
    parts = ["<h2>Checks: why they matter, how to fix them</h2>"]
    for anchor, res, hosts in entries:
        shown = ", ".join(e(h) for h in hosts[:5]) + (" and %d more" % (len(hosts) - 5) if len(hosts) > 5 else "")
        parts.append('<section class="ref" id="%s"><h3>%s &middot; %s <span class="muted">[%s]</span></h3>'
                     '<p class="muted">as audited on %s</p><dl><dt>why it matters</dt><dd>%s</dd>'
                     '<dt>fix</dt><dd>%s</dd></dl></section>' % (
                         anchor, e(res["id"]), e(res["title"]), e(res["severity"]), shown, e(res["rationale"]),
                         e(res["remediation"])))
    return parts


def _fleet_drift(doc):
    e = html.escape
    drift = doc.get("drift")
    if not drift:
        return []
    text = "%d changed, %d first audit%s, %d unchanged" % (
        len(drift["changed_hosts"]), len(drift["first_audit_hosts"]),
        "" if len(drift["first_audit_hosts"]) == 1 else "s", drift["unchanged_hosts"])
    parts = ['<p class="drift"><b>Since the last audit</b>: %s.</p>' % e(text)]
    parts.extend('<p class="drift">note: %s</p>' % e(note) for note in drift["notes"])
    return parts


def render_html(doc):
    e = html.escape
    summary = doc["summary"]
    unaudited = summary.get("unaudited_hosts") or []
    refs, entries = references(doc)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             "<title>pvetune audit %s</title>" % e(doc["generated_at"]),
             "<style>%s%s</style></head><body>" % (CSS, FILTER_CSS),
             "<header><h1>pvetune audit: Proxmox VE GPU host performance</h1>",
             "<p>%s &middot; %d hosts &middot; %d failing (severity &ge; %s) &middot; %d could not be audited "
             "&middot; schema v%d</p></header><main>" % (
                 e(doc["generated_at"]), summary["hosts"], len(summary.get("failing_hosts", summary["failed_hosts"])),
                 e(doc["run"]["fail_on"]),
                 len(unaudited), doc["schema_version"])]
    parts += _fleet_drift(doc)
    parts.append(filter_form(len(doc["hosts"])))
    parts += _overview(doc)
    policies = {}
    for host in doc["hosts"]:
        parts += _host(host, refs, policies)
    parts += _reference(entries)
    parts.append("</main><script>%s</script></body></html>" % filter_script())
    return "\n".join(parts) + "\n"
