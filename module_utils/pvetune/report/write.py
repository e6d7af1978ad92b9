# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet reports: audit.json (schema_version 1), audit.html, junit.xml, summary.md, a terminal table, and writing
them.

Pure functions from a list of per-host entries to text; writing the files is write_reports' job (called by the
pvetune_report module, through write_fleet_reports, and its action plugin).  The document is built in document.py
(its JSON schema is docs/audit-report.schema.json), junit.xml in junit.py, audit.html in html.py, summary.md in
markdown.py, what changed since each host's previous audit in drift.py; this module holds the
terminal table and the files, and re-exports the rest so callers import one module.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os

from ansible.module_utils.pvetune.core.catalogue import SEVERITIES, SEVERITY_RANK
from ansible.module_utils.pvetune.core.filewrite import atomic_symlink, atomic_write
from ansible.module_utils.pvetune.core.result import SCHEMA_VERSION, TOOL_VERSION
from ansible.module_utils.pvetune.report.document import (
    CHECK_IDS,
    FIX_STATUSES,
    STATUS_ORDER,
    VERDICTS,
    build_document,
    entry_from_audit,
    fix_command,
    fleet_outcome,
    host_summary,
    inventory_sources,
    one_line,
    unaudited_reason,
)
from ansible.module_utils.pvetune.report.drift import TIMESTAMP, attach_drift, read_previous, text_lines
from ansible.module_utils.pvetune.report.html import check_anchor, host_anchor, render_html
from ansible.module_utils.pvetune.report.junit import render_junit
from ansible.module_utils.pvetune.report.markdown import render_markdown
from ansible.module_utils.pvetune.report.metrics import TEXTFILE_NAME, render_metrics

__all__ = ["CHECK_IDS", "FIX_STATUSES", "SCHEMA_VERSION", "STATUS_ORDER", "TOOL_VERSION", "VERDICTS",
           "build_document", "check_anchor", "entry_from_audit", "fix_command", "fleet_outcome", "host_anchor",
           "host_summary", "inventory_sources", "render_html", "render_json", "render_junit", "render_markdown",
           "render_text", "unaudited_reason", "write_reports"]


def render_json(doc):
    """audit.json: the document's keys one per line, indented, and each host on one line of its own. json's ``indent``
    runs the pure-Python encoder: for a whole fleet that was 60% of the report step (0.6 s of CPU at 64 hosts); a
    host's compact line is the C encoder's, and the file stays readable and diffable host by host."""
    def value(key, item):
        if key == "hosts" and item:
            return "[\n    %s\n  ]" % ",\n    ".join(json.dumps(host, separators=(",", ": ")) for host in item)
        return json.dumps(item, indent=2).replace("\n", "\n  ")
    return "{\n%s\n}\n" % ",\n".join("  %s: %s" % (json.dumps(k), value(k, v)) for k, v in doc.items())


# -- terminal ------------------------------------------------------------------
TEXT_COLUMNS = ("pass", "fail", "warn", "pending", "skip", "error")


def render_text(doc, detail=True):
    """Compact fleet table (a host that could not be audited has "-" counts and the reason in the last column),
    then the non-passing checks of each host with the command that fixes each, then what changed since the last
    audit (report_drift; one line per host that changed)."""
    width = max([len("HOST")] + [len(h["host"]) for h in doc["hosts"]])
    header = " ".join("%7s" % c.upper() for c in TEXT_COLUMNS)
    lines = ["%-*s  %s  FAILING (severity >= %s)" % (width, "HOST", header, doc["run"]["fail_on"])]
    for host in doc["hosts"]:
        s = host["summary"]
        reason = unaudited_reason(host)
        if reason:
            counts, last = ["%7s" % "-"] * len(TEXT_COLUMNS), "could not be audited: %s" % one_line(reason)
        else:
            counts, last = ["%7d" % s["counts"][c] for c in TEXT_COLUMNS], ", ".join(s["failing"]) or "-"
        lines.append("%-*s  %s  %s" % (width, host["host"], " ".join(counts), last))
    if detail:
        for host in doc["hosts"]:
            rows = [r for r in host["checks"] if r["status"] not in ("pass", "skip")]
            if not rows:
                continue
            lines.append("")
            lines.append("%s:" % host["host"])
            for res in sorted(rows, key=lambda r: (STATUS_ORDER.index(r["status"]), -SEVERITY_RANK[r["severity"]])):
                flag = " [reboot]" if res["reboot_required"] else ""
                lines.append("  %-7s %-22s %s%s" % (res["status"].upper(), res["id"], one_line(res["message"]), flag))
                if res.get("fix_command"):
                    lines.append("          fix: %s" % res["fix_command"])
    drift = text_lines(doc)
    if drift:
        lines += [""] + drift
    summary = doc["summary"]
    lines.append("")
    failed = summary.get("failing_hosts", summary["failed_hosts"])
    unaudited = summary.get("unaudited_hosts") or []
    last = "%d hosts, %d failing: %s" % (summary["hosts"], len(failed), ", ".join(failed) or "none")
    if unaudited:
        last += "; %d could not be audited: %s" % (len(unaudited), ", ".join(unaudited))
    lines.append(last)
    return "\n".join(lines) + "\n"


# -- writing -------------------------------------------------------------------

# The module's options (library/pvetune_report.py documents them); its action plugin validates with the same spec.
ARGUMENT_SPEC = dict(
    hosts=dict(type="list", elements="str", required=True),
    audits=dict(type="dict", default={}),
    dest=dict(type="path", required=True),
    fail_on=dict(type="str", default="high", choices=list(SEVERITIES)),
    run=dict(type="dict", default={}),
    timestamp=dict(type="str"),
    junit_warn_as_failure=dict(type="bool", default=False),
    not_audited=dict(type="dict", default={}),
)


def write_fleet_reports(params, run_command, check_mode, diff):
    """pvetune_report's one call, made by the module and, in-process, by the action plugin of the same name:
    ``(failed, result, warnings)`` of write_reports with the module's options; a bad option fails by name."""
    try:
        result = write_reports(params["hosts"], params["audits"], params["dest"], params["fail_on"], params["run"],
                               params["timestamp"], check_mode, junit_warn_as_failure=params["junit_warn_as_failure"],
                               not_audited=params["not_audited"])
    except (ValueError, OSError, IOError) as exc:
        return True, {"msg": str(exc)}, []
    return False, result, []


def write_reports(hosts, audits, dest, fail_on="high", run=None, timestamp=None, check_mode=False, now=None,
                  junit_warn_as_failure=False, not_audited=None):
    """Render and (unless check_mode) write <dest>/<timestamp>/{audit.json,audit.html,junit.xml,summary.txt,
    summary.md,pvetune.prom}
    and point <dest>/latest at it; each host's drift is against its previous audit under <dest> (report_drift).
    ``not_audited`` ({host: why}) are hosts not audited because their pvetune_policy is invalid (the run check's
    bad_policy). Returns the module result (fleet_outcome's keys, the files, the summary)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    stamp = timestamp or now.strftime("%Y%m%dT%H%M%SZ")
    if not TIMESTAMP.match(stamp):
        raise ValueError("timestamp must look like 20261129T193000Z")
    audits = dict(audits or {})
    for host, why in (not_audited or {}).items():
        audits[host] = {"failed": True, "policy_invalid": True, "msg": why}
    entries = [entry_from_audit(host, audits.get(host)) for host in hosts]
    doc = build_document(entries, fail_on=fail_on, generated_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"), run=run)
    dest = os.path.abspath(dest)
    run_dir = os.path.join(dest, stamp)
    suffix = 1
    while os.path.exists(run_dir) and not check_mode:
        run_dir = os.path.join(dest, "%s-%d" % (stamp, suffix))
        suffix += 1
    # each host against its own previous audit under dest (hosts of a --limit run find theirs further back)
    doc = attach_drift(doc, read_previous(dest, os.path.basename(run_dir), [h["host"] for h in doc["hosts"]]))
    text = render_text(doc)
    names = {"audit.json": render_json(doc), "audit.html": render_html(doc), "summary.md": render_markdown(doc),
             "junit.xml": render_junit(doc, warn_as_failure=junit_warn_as_failure), "summary.txt": text}
    names[TEXTFILE_NAME] = render_metrics(doc)  # pvetune.prom: the fleet's metrics (metrics.py)
    if not check_mode:
        if not os.path.isdir(run_dir):
            os.makedirs(run_dir)
        for name, content in names.items():
            atomic_write(os.path.join(run_dir, name), content.encode("utf-8"), 0o644)
        atomic_symlink(os.path.join(dest, "latest"), os.path.basename(run_dir))
    files = [os.path.join(run_dir, n) for n in sorted(names)]
    return dict(fleet_outcome(doc), changed=not check_mode, report_dir=run_dir, files=files, summary_text=text)
