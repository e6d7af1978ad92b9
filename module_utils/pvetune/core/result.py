# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One check result (schema_version 1, docs/audit-report.schema.json): built from the catalogue entry and the
policy by ``make_result``; ``summarize`` counts a host's results against a severity threshold. Small helpers
the evaluators share live here too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible.module_utils.pvetune.core.catalogue import BY_ID, SEVERITY_RANK, render

SCHEMA_VERSION = 1


def make_result(check_id, policy, status, current, message, items=None, evidence=None, reboot_required=False):
    entry = BY_ID[check_id]
    return {
        "id": check_id,
        "title": render(check_id, "title", policy),
        "severity": entry["severity"],
        "status": status,
        "current": current,
        "expected": render(check_id, "expected", policy),
        "reboot_required": bool(reboot_required),
        "message": message,
        "rationale": entry["rationale"],
        "remediation": render(check_id, "remediation", policy),
        "fix_tag": entry["fix_tag"],
        "evidence": list(evidence or []),
        "items": list(items or []),
    }


def worst_of(check_id, policy, items, current, ok_message, evidence, skip_message=None):
    """The result of a check judged item by item: the worst of fail, error and warn (its message every such item's
    "name: message"), skip when there is no item to judge or every item skipped (``skip_message``, else the first
    item's), else pass with ``ok_message``."""
    for status in ("fail", "error", "warn"):
        bad = [i for i in items if i["status"] == status]
        if bad:
            return make_result(check_id, policy, status, current, " | ".join(
                "%s: %s" % (i["name"], i["message"]) for i in bad), items, evidence)
    if all(i["status"] == "skip" for i in items) and (skip_message or items):
        return make_result(check_id, policy, "skip", current, skip_message or items[0]["message"], items, evidence)
    return make_result(check_id, policy, "pass", current, ok_message, items, evidence)


def section_error(facts, section):
    data = facts.get(section)
    if isinstance(data, dict) and data.get("error"):
        return data["error"]
    return None


def short_list(names, limit=8):
    names = sorted(names, key=lambda n: (len(n), n))
    return ", ".join(names[:limit]) + (" and %d more" % (len(names) - limit) if len(names) > limit else "")


def summarize(results, fail_on="high"):
    """Counts per status and whether the host fails at ``fail_on`` severity or above."""
    counts = dict.fromkeys(("pass", "fail", "warn", "pending", "skip", "error"), 0)
    threshold = SEVERITY_RANK[fail_on]
    failing = []
    for res in results:
        counts[res["status"]] += 1
        if res["status"] in ("fail", "error") and SEVERITY_RANK[res["severity"]] >= threshold:
            failing.append(res["id"])
    return {"counts": counts, "failing": failing, "reboot_required": any(r["reboot_required"] for r in results)}


TOOL_VERSION = "0.1.0"
