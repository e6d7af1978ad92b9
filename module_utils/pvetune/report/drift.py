# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What changed on each host since its previous audit (the "drift" of audit.json, audit.html, summary.md and
the terminal summary).

The previous audit of a host is the most recent earlier run directory (<report_dir>/<timestamp>[-n]/) whose
audit.json audited that host: hosts audited in different runs (--limit) each find their own.  read_previous is
the one reader (it lists and reads the report directory); everything else is pure.  An earlier audit.json that
cannot be read, is not JSON or not of schema_version 1 is skipped with a note naming the file, never raised.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible.module_utils.pvetune.core.result import SCHEMA_VERSION

# A run directory's name: the timestamp, and -n when a run of the same second already had it.
TIMESTAMP = re.compile(r"^(\d{8}T\d{6}Z)(?:-(\d{1,3}))?\Z")
# Earlier runs read at most (newest first): bounds the search for a host that was never audited.
MAX_RUNS = 100
FAILING = ("fail", "error")
STATES = ("first_audit", "changed", "unchanged", "unaudited")
# Drift categories in the order every report shows them; (key, short label for one-line summaries).
CATEGORIES = (("new_failures", "new failures"), ("fixed", "fixed"), ("pending_appeared", "now pending"),
              ("pending_cleared", "no longer pending"), ("other_changes", "changed"), ("new_checks", "new checks"),
              ("gone_checks", "checks gone"), ("still_failing", "still failing"))
# still_failing alone is not a change.
CHANGE_KEYS = tuple(key for key, _label in CATEGORIES if key != "still_failing")


class PreviousReportError(ValueError):
    """An earlier audit.json that cannot be compared with (the message says why)."""


def run_key(name):
    """Sort key of a run directory name ((timestamp, n)), None for anything else (latest, stray files)."""
    match = TIMESTAMP.match(name or "")
    return (match.group(1), int(match.group(2) or 0)) if match else None


def earlier_runs(names, current):
    """The run directory names before `current`, newest first."""
    limit = run_key(current)
    keyed = [(run_key(n), n) for n in names]
    return [n for k, n in sorted(((k, n) for k, n in keyed if k is not None), reverse=True)
            if limit is None or k < limit]


def _fail(where, what):
    raise PreviousReportError("%s %s" % (where, what))


def previous_hosts(doc):
    """{host: {"checks": {id: status}, "reboot_required", "verdict"}} of the hosts an earlier audit.json audited,
    checked as far as drift reads it; PreviousReportError says what is wrong otherwise."""
    if not isinstance(doc, dict):
        _fail("the document", "is not a JSON object")
    if doc.get("schema_version") != SCHEMA_VERSION:
        _fail("schema_version", "is %s, not %d" % (json.dumps(doc.get("schema_version")), SCHEMA_VERSION))
    hosts = doc.get("hosts")
    if not isinstance(hosts, list):
        _fail("hosts", "is not a list")
    out = {}
    for i, host in enumerate(hosts):
        where = "hosts[%d]" % i
        if not isinstance(host, dict) or not isinstance(host.get("host"), str):
            _fail(where, "has no host name")
        checks = host.get("checks")
        if not isinstance(checks, list):
            _fail(where + ".checks", "is not a list")
        statuses = {}
        for j, res in enumerate(checks):
            if not (isinstance(res, dict) and isinstance(res.get("id"), str) and isinstance(res.get("status"), str)):
                _fail("%s.checks[%d]" % (where, j), "has no id or status")
            statuses[res["id"]] = res["status"]
        summary = host.get("summary") if isinstance(host.get("summary"), dict) else {}
        if host.get("error") or host.get("reachable") is False or summary.get("verdict") == "unaudited":
            continue  # in that run but not audited: its audit is older still
        out[host["host"]] = {"checks": statuses, "reboot_required": bool(summary.get("reboot_required")),
                             "verdict": summary.get("verdict")}
    return out


def _mentions(text, host):
    return json.dumps(host) in text or json.dumps(host, ensure_ascii=False) in text


def read_previous(dest, current, hosts, limit=MAX_RUNS):
    """The previous audit of each of `hosts` under the report directory `dest`, before run directory `current`.

    Returns {"found": {host: {"report", "generated_at", "checks", "reboot_required", "verdict"}},
    "notes": [fleet-wide notes], "host_notes": {host: [notes]}, "runs_searched": n}.  Stops once every host is
    found; an unusable audit.json is a note and the search goes on to older runs."""
    found, notes, host_notes = {}, [], {}
    try:
        names = os.listdir(dest)
    except OSError:
        names = []  # no report directory yet: every host's first audit
    runs = earlier_runs(names, current)
    searched = 0
    for name in runs[:limit]:
        wanted = [h for h in hosts if h not in found]
        if not wanted:
            break
        searched += 1
        path = os.path.join(dest, name, "audit.json")
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            continue  # a run directory the report writer never finished, or not ours
        except (OSError, UnicodeDecodeError) as exc:
            notes.append("%s could not be read (%s): skipped" % (path, exc))
            continue
        named = [h for h in wanted if _mentions(text, h)]
        if not named:
            continue  # cheap: most runs of a --limit fleet do not name the host at all
        try:
            doc = json.loads(text)
            audited = previous_hosts(doc)
        except ValueError as exc:  # json's errors and PreviousReportError
            reason = "%s is not a pvetune audit.json of schema_version %d (%s): skipped" % (path, SCHEMA_VERSION,
                                                                                            exc)
            notes.append(reason)
            for host in named:
                host_notes.setdefault(host, []).append(reason)
            continue
        for host in named:
            if host in audited:
                found[host] = dict(audited[host], report=name, generated_at=str(doc.get("generated_at") or ""))
    if len(runs) > limit and len(found) < len(hosts):
        notes.append("only the %d most recent earlier runs of %s were searched" % (limit, dest))
    return {"found": found, "notes": notes, "host_notes": host_notes, "runs_searched": searched}


def _change(cid, was, now):
    return {"id": cid, "was": was, "now": now}


def compare(previous, current):
    """The drift categories from {id: status} before and now: each a list of {"id", "was", "now"} in the order of
    `current` (gone checks in the order of `previous`)."""
    out = {key: [] for key, _label in CATEGORIES}
    for cid, now in current.items():
        if cid not in previous:
            out["new_checks"].append(_change(cid, None, now))
            continue
        was = previous[cid]
        if was in FAILING and now in FAILING:
            key = "still_failing"
        elif now in FAILING:
            key = "new_failures"
        elif was in FAILING and now == "pass":
            key = "fixed"
        elif now == "pending" and was != "pending":
            key = "pending_appeared"
        elif was == "pending" and now != "pending":
            key = "pending_cleared"
        elif was != now:
            key = "other_changes"
        else:
            continue
        out[key].append(_change(cid, was, now))
    out["gone_checks"] = [_change(cid, was, None) for cid, was in previous.items() if cid not in current]
    return out


def host_drift(host, previous, notes=()):
    """The drift of one host of the document against its previous audit (read_previous's entry, or None)."""
    audited = host["summary"]["verdict"] != "unaudited"
    now_reboot = bool(host["summary"]["reboot_required"])
    drift = {key: [] for key, _label in CATEGORIES}
    drift.update(previous=None, reboot_required=None, notes=list(notes))
    if previous:
        drift["previous"] = {"report": previous["report"], "generated_at": previous["generated_at"],
                             "verdict": previous.get("verdict")}
    if not audited:
        drift["state"] = "unaudited"
        return drift
    if not previous:
        drift["state"] = "first_audit"
        return drift
    drift.update(compare(previous["checks"], {r["id"]: r["status"] for r in host["checks"]}))
    if bool(previous.get("reboot_required")) != now_reboot:
        drift["reboot_required"] = {"was": bool(previous.get("reboot_required")), "now": now_reboot}
    changed = any(drift[key] for key in CHANGE_KEYS) or drift["reboot_required"] is not None
    drift["state"] = "changed" if changed else "unchanged"
    return drift


def attach_drift(doc, previous):
    """The document with each host's "drift" and the run's "drift" summary, from read_previous's result."""
    found, host_notes = previous["found"], previous["host_notes"]
    by_state = {state: [] for state in STATES}
    for host in doc["hosts"]:
        host["drift"] = host_drift(host, found.get(host["host"]), host_notes.get(host["host"], ()))
        by_state[host["drift"]["state"]].append(host["host"])
    doc["drift"] = {"runs_searched": previous["runs_searched"], "notes": list(previous["notes"]),
                    "compared_with": sorted({f["report"] for f in found.values()}),
                    "changed_hosts": by_state["changed"], "first_audit_hosts": by_state["first_audit"],
                    "unchanged_hosts": len(by_state["unchanged"])}
    return doc


def _ids(changes, code, limit=6):
    ids = [code(c["id"]) for c in changes]
    return ", ".join(ids[:limit]) + (" (+%d more)" % (len(ids) - limit) if len(ids) > limit else "")


def drift_line(drift, code=str):
    """One short line of what changed on a host ("" when nothing did); still failing checks are not a change.
    `code` formats a check id (summary.md: as code)."""
    if drift is None or drift["state"] in ("first_audit", "unaudited", "unchanged"):
        return ""
    parts = ["%s: %s" % (label, _ids(drift[key], code)) for key, label in CATEGORIES
             if key in CHANGE_KEYS and drift[key]]
    reboot = drift.get("reboot_required")
    if reboot:
        parts.append("reboot now required" if reboot["now"] else "no reboot required any more")
    return "; ".join(parts)


def _names(hosts, limit=8):
    return ", ".join(hosts[:limit]) + (" (+%d more)" % (len(hosts) - limit) if len(hosts) > limit else "")


def text_lines(doc, limit=50):
    """The terminal summary's "since the last audit" part: one line per host that changed (at most `limit`),
    the first audits and the unchanged hosts in one line each, and the notes."""
    drift = doc.get("drift")
    if not drift:
        return []
    hosts = [h for h in doc["hosts"] if h.get("drift") and h["drift"]["state"] == "changed"]
    width = max([len(h["host"]) for h in hosts] + [0])
    lines = ["Since the last audit:"]
    for host in hosts[:limit]:
        since = host["drift"]["previous"]["report"]
        lines.append("  %-*s  %s (since %s)" % (width, host["host"], drift_line(host["drift"]), since))
    if len(hosts) > limit:
        lines.append("  ... and %d more changed hosts (audit.json, audit.html)" % (len(hosts) - limit))
    if drift["first_audit_hosts"]:
        lines.append("  first audit: %s" % _names(drift["first_audit_hosts"]))
    if drift["unchanged_hosts"]:
        lines.append("  unchanged: %d host%s" % (drift["unchanged_hosts"], "" if drift["unchanged_hosts"] == 1
                                                 else "s"))
    lines.extend("  note: %s" % note for note in drift["notes"])
    return lines
