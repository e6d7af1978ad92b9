# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""audit.html from the audit document: self-contained (inline CSS, no script), every host text escaped.

A fleet overview (host x check, each cell a link to that check of that host), then one section per host: its
checks most severe first (then by status), each with the fix command when there is something to fix, and the
effective policy the host was audited with.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import html
import json
import string

from ansible.module_utils.pvetune.core.catalogue import SEVERITY_RANK
from ansible.module_utils.pvetune.report_document import CHECK_IDS, STATUS_ORDER, one_line, unaudited_reason

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
.muted{color:#59606e}
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


def _overview(doc):
    e = html.escape
    parts = ["<h2>Fleet overview</h2><table><tr><th>host</th>"]
    parts += ['<th title="%s">%s</th>' % (e(cid), e(cid.replace(".", ".\u200b"))) for cid in CHECK_IDS]
    parts.append("</tr>")
    for host in doc["hosts"]:
        by_id = {r["id"]: r for r in host["checks"]}
        parts.append('<tr><td><a href="#%s">%s</a></td>' % (host_anchor(host["host"]), e(host["host"])))
        reason = unaudited_reason(host)
        if reason:
            parts.append('<td colspan="%d">%s could not be audited: %s</td></tr>' % (
                len(CHECK_IDS), _st("error"), e(reason)))
            continue
        for cid in CHECK_IDS:
            res = by_id.get(cid)
            if res is None:
                parts.append('<td class="c muted">-</td>')
            else:
                parts.append('<td class="c" title="%s"><a href="#%s">%s</a></td>' % (
                    e(one_line(res["message"], 300)), check_anchor(host["host"], cid), _st(res["status"])))
        parts.append("</tr>")
    parts.append("</table>")
    return parts


def _check(host, res):
    e = html.escape
    parts = ['<details id="%s"%s><summary>%s <b>%s</b> &middot; %s <span class="muted">[%s]%s</span></summary>' % (
        check_anchor(host["host"], res["id"]), " open" if res["status"] in ("fail", "error") else "",
        _st(res["status"]), e(res["id"]), e(res["title"]), e(res["severity"]),
        " &middot; reboot required" if res["reboot_required"] else "")]
    parts.append("<dl><dt>current</dt><dd>%s</dd><dt>expected</dt><dd>%s</dd><dt>result</dt><dd>%s</dd>"
                 "<dt>why it matters</dt><dd>%s</dd><dt>fix</dt><dd>%s</dd>" % (
                     _value(res["current"]), _value(res["expected"]), e(res["message"] or ""),
                     e(res["rationale"]), e(res["remediation"])))
    if res.get("fix_command"):
        parts.append("<dt>fix command</dt><dd><code>%s</code></dd>" % e(res["fix_command"]))
    if res["evidence"]:
        parts.append("<dt>evidence</dt><dd><pre>%s</pre></dd>" % e("\n".join(res["evidence"])))
    parts.append("</dl>")
    if res.get("matrix"):
        parts.extend(_matrix(res["matrix"]))
    if res["items"]:
        parts.append("<table><tr><th>item</th><th>status</th><th>current</th><th>expected</th><th>note</th></tr>")
        for item in res["items"]:
            parts.append('<tr><td><code>%s</code></td><td class="c">%s</td><td>%s</td><td>%s</td><td>%s</td></tr>'
                         % (_value(item.get("name")), _st(item.get("status") or "skip"), _value(item.get("current")),
                            _value(item.get("expected")), e(str(item.get("message") or ""))))
        parts.append("</table>")
    parts.append("</details>")
    return parts


def _matrix(mat):
    """The GPU-to-GPU path matrix as nvidia-smi topo -m lays it out; names in full on hover."""
    e = html.escape
    parts = ['<table class="topo"><tr><th></th>%s</tr>' % "".join(
        '<th title="%s">GPU%d</th>' % (e(n), i) for i, n in enumerate(mat["gpus"]))]
    for i, (name, row) in enumerate(zip(mat["gpus"], mat["rows"])):
        parts.append('<tr><th title="%s">GPU%d</th>%s</tr>' % (e(name), i, "".join(
            '<td class="c topo-%s">%s</td>' % (e(c.lower()) if c != "?" else "unknown", e(c)) for c in row)))
    parts.append("</table>")
    parts.append('<p class="muted">%s</p>' % " &middot; ".join(
        "GPU%d %s" % (i, e(n)) for i, n in enumerate(mat["gpus"])))
    return parts


def _host(host):
    e = html.escape
    s = host["summary"]
    parts = ['<section class="host" id="%s"><h2>%s</h2>' % (host_anchor(host["host"]), e(host["host"]))]
    parts.append('<p class="muted">root %s &middot; %s &middot; reboot required: %s</p>' % (
        e(host["root"]), " ".join("%s %d" % (_st(k), v) for k, v in s["counts"].items() if v),
        "yes" if s["reboot_required"] else "no"))
    reason = unaudited_reason(host)
    if reason:
        parts.append("<p>%s could not be audited: %s</p>" % (_st("error"), e(reason)))
    if host.get("policy") is not None:
        parts.append('<details class="policy"><summary>effective policy</summary><pre>%s</pre></details>' % e(
            json.dumps(host["policy"], indent=2, sort_keys=True, default=str)))
    for res in sorted(host["checks"], key=check_order):
        parts.extend(_check(host, res))
    parts.append("</section>")
    return parts


def render_html(doc):
    e = html.escape
    summary = doc["summary"]
    unaudited = summary.get("unaudited_hosts") or []
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             "<title>pvetune audit %s</title>" % e(doc["generated_at"]), "<style>%s</style></head><body>" % CSS,
             "<header><h1>pvetune audit: Proxmox VE GPU host performance</h1>",
             "<p>%s &middot; %d hosts &middot; %d failing (severity &ge; %s) &middot; %d could not be audited "
             "&middot; schema v%d</p></header><main>" % (
                 e(doc["generated_at"]), summary["hosts"], len(summary.get("failing_hosts", summary["failed_hosts"])),
                 e(doc["run"]["fail_on"]),
                 len(unaudited), doc["schema_version"])]
    parts += _overview(doc)
    for host in doc["hosts"]:
        parts += _host(host)
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"
