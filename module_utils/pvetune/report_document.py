# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit.json document (schema_version 1, docs/audit-report.schema.json) from per-host entries.

A host ends with one verdict: ``pass``, ``fail`` (a fail/error result at or above fail_on) or ``unaudited`` (it
could not be audited: unreachable, or the audit module failed).  Both of the last two fail the run; the document
keeps them apart (summary.failed_hosts, summary.unaudited).  Each check result of the document also carries the
fix.yml command line that fixes it on that host (``fix_command``), derived from the catalogue's fix tags and
reboot field and the run's inventory sources.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

from ansible.module_utils.pvetune.core.catalogue import BY_ID, CATALOGUE, SEVERITY_RANK, fix_needs_reboot, fix_tags
from ansible.module_utils.pvetune.core.result import SCHEMA_VERSION, TOOL_VERSION

STATUS_ORDER = ("fail", "error", "pending", "warn", "pass", "skip")
CHECK_IDS = [c["id"] for c in CATALOGUE]
# Results whose fix command the reports show (a pass or skip has nothing to fix).
FIX_STATUSES = ("fail", "error", "pending", "warn")
VERDICTS = ("pass", "fail", "unaudited")
NOT_RUN = "the audit did not run on this host"
FIX_PLAYBOOK = "fix.yml"


def one_line(text, limit=150):
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _seconds(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return float(value)


def entry_from_audit(host, audit):
    """A report entry from a host name and its registered pvetune_facts result (or None)."""
    audit = audit if isinstance(audit, dict) else {}
    checks = audit.get("results")
    policy = audit.get("policy")
    entry = {"host": host, "root": audit.get("root") or "/", "checks": checks if isinstance(checks, list) else [],
             "unreachable": bool(audit.get("unreachable")), "error": None,
             "policy": policy if isinstance(policy, dict) else None,
             # pvetune_facts returns no duration today; a result that carries one (seconds) is timed in junit.xml.
             "duration": _seconds(audit.get("duration"))}
    if not isinstance(checks, list):
        entry["error"] = audit.get("msg") or NOT_RUN
    return entry


def unaudited_reason(host):
    """Why a host (an entry, or a host of the document) could not be audited; None when it was audited."""
    unreachable = bool(host.get("unreachable")) or host.get("reachable") is False
    error = host.get("error")
    if unreachable:
        detail = " ".join(str(error or "").split())
        return "unreachable (%s)" % detail if detail and detail != NOT_RUN else "unreachable"
    if error:
        return str(error)
    return None


def host_summary(entry, fail_on):
    counts = dict.fromkeys(STATUS_ORDER, 0)
    failing = []
    threshold = SEVERITY_RANK[fail_on]
    checks = entry.get("checks") or []
    for res in checks:
        counts[res["status"]] = counts.get(res["status"], 0) + 1
        if res["status"] in ("fail", "error") and SEVERITY_RANK.get(res["severity"], 0) >= threshold:
            failing.append(res["id"])
    verdict = "unaudited" if unaudited_reason(entry) else ("fail" if failing else "pass")
    return {
        "counts": counts,
        "failing": failing,
        "failed": verdict != "pass",
        "verdict": verdict,
        "reboot_required": any(r.get("reboot_required") for r in checks),
        "pending": [r["id"] for r in checks if r["status"] == "pending"],
    }


def inventory_sources(value):
    """run.inventory as a list of non-empty strings (a single source may come as a string)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return []
    return [str(v) for v in value if v not in (None, "")]


def fix_command(host, res, inventory=()):
    """The command line that runs pvetune's fix for one check on one host, or None (nothing to fix, or pvetune
    has no fix for it): ansible-playbook [-i <source>]... fix.yml -l <host> --tags <tags> [-e
    pvetune_reboot_ok=true], every argument shell-quoted."""
    check_id = res.get("id")
    if res.get("status") not in FIX_STATUSES or check_id not in BY_ID:
        return None
    tags = fix_tags(check_id)
    if not tags:
        return None
    argv = ["ansible-playbook"]
    for source in inventory:
        argv += ["-i", source]
    argv += [FIX_PLAYBOOK, "-l", host, "--tags", ",".join(tags)]
    if fix_needs_reboot(check_id, res.get("reboot_required")):
        argv += ["-e", "pvetune_reboot_ok=true"]
    return " ".join(shlex.quote(arg) for arg in argv)


def build_document(entries, fail_on="high", generated_at="", run=None):
    """The audit.json document."""
    run = dict(run or {}, fail_on=fail_on)
    inventory = inventory_sources(run.get("inventory"))
    hosts = []
    for entry in sorted(entries, key=lambda e: e["host"]):
        hosts.append({
            "host": entry["host"],
            "root": entry.get("root", "/"),
            "reachable": not entry.get("unreachable"),
            "error": entry.get("error"),
            "summary": host_summary(entry, fail_on),
            "policy": entry.get("policy"),
            "duration": entry.get("duration"),
            "checks": [dict(res, fix_command=fix_command(entry["host"], res, inventory))
                       for res in entry.get("checks") or []],
        })
    totals = dict.fromkeys(STATUS_ORDER, 0)
    for item in hosts:
        for key, val in item["summary"]["counts"].items():
            totals[key] += val
    unaudited = {h["host"]: unaudited_reason(h) for h in hosts if h["summary"]["verdict"] == "unaudited"}
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "pvetune", "version": TOOL_VERSION},
        "generated_at": generated_at,
        "run": run,
        "summary": {"hosts": len(hosts),
                    "failed_hosts": [h["host"] for h in hosts if h["summary"]["verdict"] == "fail"],
                    "unaudited_hosts": sorted(unaudited), "unaudited": unaudited, "counts": totals,
                    "reboot_required": [h["host"] for h in hosts if h["summary"]["reboot_required"]]},
        "hosts": hosts,
    }


def fleet_outcome(doc):
    """What the playbook decides the run from: failed_hosts (failing checks at or above fail_on) and hosts_failing
    ({host: those check ids}), unaudited_hosts and unaudited ({host: reason}), host_verdicts ({host:
    pass|fail|unaudited}) and fleet_failed (failed_hosts or unaudited_hosts not empty)."""
    summary = doc["summary"]
    return {"failed_hosts": list(summary["failed_hosts"]), "unaudited_hosts": list(summary["unaudited_hosts"]),
            "unaudited": dict(summary["unaudited"]),
            "hosts_failing": {h["host"]: list(h["summary"]["failing"]) for h in doc["hosts"]
                              if h["summary"]["verdict"] == "fail"},
            "host_verdicts": {h["host"]: h["summary"]["verdict"] for h in doc["hosts"]},
            "fleet_failed": bool(summary["failed_hosts"] or summary["unaudited_hosts"])}
