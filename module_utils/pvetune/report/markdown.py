# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""summary.md from the audit document: a short Markdown summary to paste into a ticket.

The fleet verdict and counts, each failing host with its failing checks (at or above fail_on) and the fix
commands the document already carries (one line per distinct command, naming the checks it fixes), the hosts that
could not be audited, and what changed since each host's previous audit (report_drift).  Deterministic: only the
document's contents, in its order; long lists are cut with a count.  Every text from a host is escaped.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.pvetune.report.document import STATUS_ORDER, one_line, unaudited_reason
from ansible.module_utils.pvetune.report.drift import drift_line

MAX_HOSTS = 10  # failing hosts shown in full; the rest by name
MAX_CHANGED = 50
# CommonMark: any ASCII punctuation may be backslash-escaped; these are the ones that can start markup inline
# (an underscore only next to a non-alphanumeric: intel_idle stays readable, as no emphasis starts inside a word).
_SPECIAL = re.compile(r"([\\`*\[\]<>|&#~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def md_text(text, limit=200):
    return _SPECIAL.sub(lambda m: "\\" + m.group(1), one_line(text, limit))


def md_code(text):
    """An inline code span holding `text` whatever backticks it contains (CommonMark's fence rule)."""
    text = " ".join(str(text).split())
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * (max(runs) + 1 if runs else 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return "%s%s%s%s%s" % (fence, pad, text, pad, fence)


def _fix_lines(host, failing):
    """One bullet per distinct fix command of the host's failing checks, in check order."""
    commands = {}
    for res in host["checks"]:
        if res["id"] in failing and res.get("fix_command"):
            commands.setdefault(res["fix_command"], []).append(res["id"])
    return ["  - fix %s: %s" % (", ".join(md_code(c) for c in ids), md_code(cmd)) for cmd, ids in commands.items()]


def _host_block(host):
    failing = host["summary"]["failing"]
    by_id = {r["id"]: r for r in host["checks"]}
    lines = ["- **%s**: %d failing" % (md_text(host["host"]), len(failing))]
    for cid in failing:
        res = by_id[cid]
        lines.append("  - %s %s (%s): %s" % (md_code(cid), res["status"], res["severity"],
                                             md_text(res["message"], 120)))
    manual = [cid for cid in failing if not by_id[cid].get("fix_command")]
    lines.extend(_fix_lines(host, failing))
    if manual:
        lines.append("  - not fixed by pvetune (see audit.html): %s" % ", ".join(md_code(c) for c in manual))
    return lines


def _names(hosts, limit=30):
    more = " (+%d more)" % (len(hosts) - limit) if len(hosts) > limit else ""
    return ", ".join(md_text(h) for h in hosts[:limit]) + more


def _drift_part(doc):
    drift = doc.get("drift")
    if not drift:
        return []
    lines = ["", "## Since the last audit", ""]
    changed = [h for h in doc["hosts"] if h.get("drift") and h["drift"]["state"] == "changed"]
    for host in changed[:MAX_CHANGED]:
        since = md_text(host["drift"]["previous"]["report"])
        line = drift_line(host["drift"], code=md_code)
        lines.append("- **%s** (since %s): %s" % (md_text(host["host"]), since, line))
    if len(changed) > MAX_CHANGED:
        lines.append("- ... and %d more changed hosts (audit.json)" % (len(changed) - MAX_CHANGED))
    if drift["first_audit_hosts"]:
        lines.append("- first audit: %s" % _names(drift["first_audit_hosts"]))
    unchanged = drift["unchanged_hosts"]
    if unchanged:
        lines.append("- unchanged: %d host%s" % (unchanged, "" if unchanged == 1 else "s"))
    if not changed and not drift["first_audit_hosts"] and not unchanged:
        lines.append("- nothing to compare (no host was audited)")
    lines.extend("- note: %s" % md_text(note) for note in drift["notes"])
    return lines


def render_markdown(doc):
    summary, fail_on = doc["summary"], doc["run"].get("fail_on", "high")
    failing = [h for h in doc["hosts"] if h["summary"]["verdict"] == "fail"]
    unaudited = [h for h in doc["hosts"] if h["summary"]["verdict"] == "unaudited"]
    verdict = "FAIL" if summary["failed_hosts"] else "PASS"
    counts = ", ".join("%d %s" % (summary["counts"].get(s, 0), s) for s in STATUS_ORDER)
    lines = ["# pvetune audit %s: %s" % (md_text(doc.get("generated_at") or "-"), verdict), "",
             "%d hosts: %d failing (severity >= %s), %d could not be audited, %d pass. Checks: %s." % (
                 summary["hosts"], len(failing), fail_on, len(unaudited),
                 summary["hosts"] - len(failing) - len(unaudited), counts)]
    if summary["reboot_required"]:
        lines.append("Reboot required: %s." % _names(summary["reboot_required"]))
    if failing:
        lines += ["", "## Failing hosts", ""]
        for host in failing[:MAX_HOSTS]:
            lines.extend(_host_block(host))
        if len(failing) > MAX_HOSTS:
            rest = [h["host"] for h in failing[MAX_HOSTS:]]
            lines.append("- ... and %d more: %s" % (len(rest), _names(rest)))
    if unaudited:
        lines += ["", "## Could not be audited", ""]
        lines.extend("- **%s**: %s" % (md_text(h["host"]), md_text(unaudited_reason(h))) for h in unaudited)
    lines.extend(_drift_part(doc))
    return "\n".join(lines) + "\n"
