# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit document (report/document.py, audit.json) as Prometheus metrics, in the text exposition format
node_exporter's textfile collector reads (pvetune.prom).

One pure renderer for both places the metrics go: write_reports puts the whole fleet into
``<report dir>/pvetune.prom`` on the controller, and playbooks/metrics.yml gives each host the same text filtered
to that host (``render_metrics(doc, hosts=[host])``).  Every series but the timestamp carries the host's inventory
name as ``host``, so the fleet file and a host's own file say the same thing about it.

``check_document`` validates what the renderer reads, so a hand-edited or truncated audit.json handed to
metrics.yml is an error naming the file and the key, not a traceback.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import time

from ansible.module_utils.pvetune.core.catalogue import SEVERITIES
from ansible.module_utils.pvetune.report.textfile import TEXTFILE_NAME
from ansible.module_utils.pvetune.report.document import STATUS_ORDER, VERDICTS

__all__ = ["TEXTFILE_NAME", "audit_timestamp", "check_document", "escape_help", "escape_label", "host_metrics",
           "read_document", "render_metrics"]
GENERATED_AT_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

# (name, help); all gauges.  Names follow the Prometheus naming conventions: the application prefix, snake case,
# the base unit as suffix (seconds), no _total (none is a counter).
METRICS = (
    ("pvetune_audit_timestamp_seconds", "When the pvetune audit these metrics come from ran, as Unix time."),
    ("pvetune_host_verdict", "The host's verdict in the audit (1): pass, fail (a check fails at or above the "
                             "run's fail_on severity) or unaudited (the host could not be audited)."),
    ("pvetune_check_status", "Status of one pvetune check on the host (1): pass, fail, warn, pending "
                             "(configured, effective after a reboot), skip or error."),
    ("pvetune_host_reboot_required", "1 when a check of the host needs a reboot to take effect (pending, or a "
                                     "failure whose fix reboots), else 0; absent for a host not audited."),
    ("pvetune_host_pending_reboot", "1 when a fix is configured on the host but not yet effective (a pending "
                                    "check, until the next reboot), else 0; absent for a host not audited."),
)


def escape_label(value):
    """A label value as the text format writes it: backslash, double quote and line feed escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text):
    """HELP text: backslash and line feed escaped (a double quote stays as it is)."""
    return str(text).replace("\\", "\\\\").replace("\n", "\\n")


def audit_timestamp(generated_at):
    """generated_at (``2026-11-29T20:06:52Z``, UTC) as Unix seconds."""
    return calendar.timegm(time.strptime(generated_at, GENERATED_AT_FORMAT))


def _text(value, where, choices=None):
    if not isinstance(value, str) or not value:
        raise ValueError("%s: expected a non-empty string, got %r" % (where, value))
    if choices and value not in choices:
        raise ValueError("%s: %r is not one of %s" % (where, value, ", ".join(choices)))
    return value


def check_document(doc, source="the audit document"):
    """Raise ValueError naming ``source`` and the key when ``doc`` lacks what render_metrics reads."""
    try:
        if not isinstance(doc, dict):
            raise ValueError("expected a JSON object (an audit.json), got %s" % type(doc).__name__)
        try:
            audit_timestamp(_text(doc.get("generated_at"), "generated_at"))
        except (TypeError, ValueError) as exc:
            raise ValueError("generated_at: not a time like 2026-11-29T20:06:52Z (%s)" % exc)
        hosts = doc.get("hosts")
        if not isinstance(hosts, list):
            raise ValueError("hosts: expected a list")
        seen = set()
        for h, host in enumerate(hosts):
            where = "hosts[%d]" % h
            if not isinstance(host, dict):
                raise ValueError("%s: expected an object" % where)
            name = _text(host.get("host"), where + ".host")
            if name in seen:
                raise ValueError("%s.host: %s is in the document twice" % (where, name))
            seen.add(name)
            summary = host.get("summary")
            if not isinstance(summary, dict):
                raise ValueError("%s.summary: expected an object" % where)
            _text(summary.get("verdict"), where + ".summary.verdict", VERDICTS)
            if not isinstance(summary.get("reboot_required"), bool):
                raise ValueError("%s.summary.reboot_required: expected true or false" % where)
            if not isinstance(host.get("checks"), list):
                raise ValueError("%s.checks: expected a list" % where)
            ids = set()
            for c, res in enumerate(host["checks"]):
                at = "%s.checks[%d]" % (where, c)
                if not isinstance(res, dict):
                    raise ValueError("%s: expected an object" % at)
                check_id = _text(res.get("id"), at + ".id")
                if check_id in ids:
                    raise ValueError("%s.id: %s is twice in %s's checks" % (at, check_id, name))
                ids.add(check_id)
                _text(res.get("status"), at + ".status", STATUS_ORDER)
                _text(res.get("severity"), at + ".severity", SEVERITIES)
    except ValueError as exc:
        raise ValueError("%s: %s" % (source, exc))
    return doc


def _series(name, labels, value):
    inner = ",".join('%s="%s"' % (key, escape_label(val)) for key, val in labels)
    return "%s{%s} %s" % (name, inner, value) if inner else "%s %s" % (name, value)


def render_metrics(doc, hosts=None, source="the audit document"):
    """The text exposition of ``doc`` (every host, or only the names in ``hosts``): for each metric its # HELP and
    # TYPE lines, then its series; a metric without series (no audited host) keeps its HELP and TYPE."""
    return _render(check_document(doc, source), hosts)


def _render(doc, hosts):
    wanted = None if hosts is None else set(hosts)
    chosen = [h for h in doc["hosts"] if wanted is None or h["host"] in wanted]
    fail_on = doc.get("run", {}).get("fail_on") if isinstance(doc.get("run"), dict) else None
    series = {name: [] for name, _help in METRICS}
    series["pvetune_audit_timestamp_seconds"].append(_series("pvetune_audit_timestamp_seconds", (),
                                                             audit_timestamp(doc["generated_at"])))
    for host in chosen:
        name, summary = host["host"], host["summary"]
        labels = [("host", name), ("verdict", summary["verdict"])]
        if fail_on:
            labels.append(("fail_on", fail_on))
        series["pvetune_host_verdict"].append(_series("pvetune_host_verdict", labels, 1))
        if summary["verdict"] == "unaudited":
            continue    # nothing is known of its checks or reboots; the verdict says why there are no series
        for res in host["checks"]:
            series["pvetune_check_status"].append(_series("pvetune_check_status", (
                ("host", name), ("check", res["id"]), ("severity", res["severity"]), ("status", res["status"])), 1))
        pending = any(res["status"] == "pending" for res in host["checks"])
        series["pvetune_host_reboot_required"].append(
            _series("pvetune_host_reboot_required", (("host", name),), int(summary["reboot_required"])))
        series["pvetune_host_pending_reboot"].append(
            _series("pvetune_host_pending_reboot", (("host", name),), int(pending)))
    lines = []
    for metric, help_text in METRICS:
        lines.append("# HELP %s %s" % (metric, escape_help(help_text)))
        lines.append("# TYPE %s gauge" % metric)
        lines.extend(series[metric])
    return "\n".join(lines) + "\n"


def host_metrics(doc, hosts, source="the audit document"):
    """({host: its own text} for the names of ``hosts`` the document has, [the names it does not have])."""
    check_document(doc, source)
    present = {h["host"] for h in doc["hosts"]}
    texts = {name: _render(doc, [name]) for name in hosts if name in present}
    return texts, [name for name in hosts if name not in present]


def read_document(path):
    """The audit.json at ``path``, checked; ValueError naming the file for anything the renderer cannot use."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except (IOError, OSError) as exc:
        raise ValueError("%s: cannot read the audit report (%s); run audit.yml first, or name the audit.json with "
                         "pvetune_metrics_report" % (path, exc.strerror or exc))
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError("%s: not an audit.json (%s)" % (path, exc))
    return check_document(doc, path)


def read_host_metrics(params, run_command, check_mode, diff):
    """pvetune_metrics' one call: ``(failed, result, warnings)``, the result naming each of ``hosts`` the audit.json at
    ``report`` has with its own text (``metrics``) and those it does not have (``missing``).  Nothing is written."""
    try:
        doc = read_document(params["report"])
        metrics, missing = host_metrics(doc, params["hosts"], params["report"])
    except ValueError as exc:
        return True, {"msg": str(exc)}, []
    return False, {"changed": False, "metrics": metrics, "missing": missing, "generated_at": doc["generated_at"],
                   "report": params["report"]}, []
