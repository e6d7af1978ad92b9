# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit.json document (schema_version 1, docs/audit-report.schema.json) from per-host entries.

A host ends with one verdict: ``pass``, ``fail`` (a fail/error result at or above fail_on) or ``unaudited`` (it
could not be audited: unreachable, or the audit module failed).  Both of the last two fail the run; the document
lists both in summary.failed_hosts (what fails the run, as schema_version 1 always said) and keeps them apart in
summary.failing_hosts and summary.unaudited.  Each check result of the document also carries the fix.yml command
line that fixes it on that host (``fix_command``), derived from the catalogue's fix tags and reboot field and the
run's inventory sources and host pattern; a host audited from a snapshot gets a placeholder for the live
inventory, since the snapshot inventory would point fix.yml at the captured tree.
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
DEFAULT_PATTERN = "gpu_hosts"
LIVE_INVENTORY = "<inventory of the live host>"
POLICY_NOT_AUDITED = ("could not be audited: its pvetune_policy is invalid (said once above; the reason is in the "
                      "report)")


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
             # roles/pvetune_audit: not audited because the run check found its policy invalid
             "policy_invalid": bool(audit.get("policy_invalid")),
             # seconds pvetune_facts took on the host; junit.xml times the host's testsuite by it
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


def fix_argv(host, check_id, reboot_required, inventory=(), pattern=DEFAULT_PATTERN):
    """The argv of pvetune's fix for one check on one host, or None when pvetune has no fix for it:
    ansible-playbook [-i <source>]... fix.yml -l <host> --tags <tags> [-e pvetune_hosts=<pattern>]
    [-e pvetune_reboot_ok=true]."""
    tags = fix_tags(check_id) if check_id in BY_ID else []
    if not tags:
        return None
    argv = ["ansible-playbook"]
    for source in inventory:
        argv += ["-i", source]
    argv += [FIX_PLAYBOOK, "-l", host, "--tags", ",".join(tags)]
    if pattern and pattern != DEFAULT_PATTERN:
        argv += ["-e", "pvetune_hosts=%s" % pattern]
    if fix_needs_reboot(check_id, reboot_required):
        argv += ["-e", "pvetune_reboot_ok=true"]
    return argv


def fix_command(host, res, inventory=(), root="/", pattern=DEFAULT_PATTERN):
    """fix_argv as one shell-quoted line for a result with something to fix, or None.  A host audited from a
    snapshot (root other than /) gets LIVE_INVENTORY for -i: its audit inventory points at the tree."""
    if res.get("status") not in FIX_STATUSES or res.get("fix_tag") == "":
        return None     # "": this result names nothing pvetune's fix changes (lxc.resources' CPU counts, memory)
    if root not in ("/", "", None):
        inventory = [LIVE_INVENTORY]
    argv = fix_argv(host, res.get("id"), res.get("reboot_required"), inventory, pattern)
    return " ".join(shlex.quote(arg) for arg in argv) if argv else None


def build_document(entries, fail_on="high", generated_at="", run=None):
    """The audit.json document."""
    run = dict(run or {}, fail_on=fail_on)
    # pvetune_fix_inventory: where fix.yml finds the hosts when that is not the audit's inventory (AWX, snapshots)
    inventory = inventory_sources(run.get("fix_inventory") or run.get("inventory"))
    pattern = run.get("hosts_pattern") or DEFAULT_PATTERN
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
            "checks": [dict(res, fix_command=fix_command(entry["host"], res, inventory, entry.get("root", "/"),
                                                         pattern))
                       for res in entry.get("checks") or []],
            "policy_invalid": entry.get("policy_invalid", False),
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
                    "failed_hosts": [h["host"] for h in hosts if h["summary"]["verdict"] != "pass"],
                    "failing_hosts": [h["host"] for h in hosts if h["summary"]["verdict"] == "fail"],
                    "unaudited_hosts": sorted(unaudited), "unaudited": unaudited, "counts": totals,
                    "reboot_required": [h["host"] for h in hosts if h["summary"]["reboot_required"]]},
        "hosts": hosts,
    }


def host_message(host, fail_on):
    """What the playbook says of a host of the document that does not pass (None for one that passes)."""
    verdict = host["summary"]["verdict"]
    if verdict == "pass":
        return None
    if host.get("policy_invalid"):
        return "%s %s" % (host["host"], POLICY_NOT_AUDITED)
    if verdict == "unaudited":
        return "%s could not be audited: %s" % (host["host"], unaudited_reason(host))
    failing = ", ".join(host["summary"]["failing"])
    return "%s fails checks of severity %s or higher: %s" % (host["host"], fail_on, failing)


def fleet_outcome(doc):
    """What the playbook decides the run from: failed_hosts (every host that fails the run), failing_hosts and
    hosts_failing ({host: check ids failing at or above fail_on}), unaudited_hosts and unaudited ({host: reason}),
    host_verdicts ({host: pass|fail|unaudited}), host_messages ({host: what to say}, hosts that do not pass) and
    fleet_failed."""
    summary, fail_on = doc["summary"], doc["run"].get("fail_on", "high")
    return {"failed_hosts": list(summary["failed_hosts"]), "failing_hosts": list(summary["failing_hosts"]),
            "unaudited_hosts": list(summary["unaudited_hosts"]), "unaudited": dict(summary["unaudited"]),
            "hosts_failing": {h["host"]: list(h["summary"]["failing"]) for h in doc["hosts"]
                              if h["summary"]["verdict"] == "fail"},
            "host_verdicts": {h["host"]: h["summary"]["verdict"] for h in doc["hosts"]},
            "host_messages": {h["host"]: host_message(h, fail_on) for h in doc["hosts"]
                              if h["summary"]["verdict"] != "pass"},
            "fleet_failed": bool(summary["failed_hosts"])}
