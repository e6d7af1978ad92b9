# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""junit.xml from the audit document: one testsuite per host (hostname, time, timestamp), one testcase per check.

fail -> <failure>, error -> <error>, skip and pending -> <skipped> (pending with its whole message: it names what
the reboot will bring), warn -> a passing testcase, or with warn_as_failure a <failure type="warn">.  Every
testcase carries <properties> pvetune.status and pvetune.severity, so a dashboard can tell a warn from a pass.
A host that could not be audited is one testcase "audit" with an <error type="unaudited">.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from xml.sax.saxutils import escape as _xml_escape
from xml.sax.saxutils import quoteattr as _quoteattr

from ansible.module_utils.pvetune.report.document import one_line, unaudited_reason

# XML 1.0 cannot carry most C0 control characters, not even as character references; messages and
# evidence quote host files (/proc/cmdline, GRUB values), so such characters are shown as \xNN.
_XML_INVALID = re.compile(u"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_safe(text):
    return _XML_INVALID.sub(lambda m: "\\x%02x" % ord(m.group()), text)


def quoteattr(text):
    return _quoteattr(_xml_safe(str(text)))


def xml_escape(text):
    return _xml_escape(_xml_safe(str(text)))


def _text(value):
    return "-" if value is None else str(value)


def _body(res):
    lines = ["current: %s" % _text(res.get("current")), "expected: %s" % _text(res.get("expected")),
             _text(res.get("message")), "remediation: %s" % _text(res.get("remediation"))]
    if res.get("fix_command"):
        lines.append("fix: %s" % res["fix_command"])
    lines.append("evidence:\n  %s" % "\n  ".join(res.get("evidence") or []))
    return "\n".join(lines)


def _outcome(res, warn_as_failure):
    """failure, error, skipped or None (a passing testcase) for one result."""
    status = res["status"]
    if status == "fail" or (status == "warn" and warn_as_failure):
        return "failure"
    if status == "error":
        return "error"
    if status in ("skip", "pending"):
        return "skipped"
    return None


def _suite_counts(host, warn_as_failure):
    if unaudited_reason(host):
        return {"tests": 1, "failures": 0, "errors": 1, "skipped": 0}
    outcomes = [_outcome(r, warn_as_failure) for r in host["checks"]]
    return {"tests": len(outcomes), "failures": outcomes.count("failure"), "errors": outcomes.count("error"),
            "skipped": outcomes.count("skipped")}


def _seconds(value):
    return "%.3f" % (value or 0)


def _testcase(host, res, warn_as_failure):
    out = ['    <testcase classname=%s name=%s time="0">' % (quoteattr(host["host"]), quoteattr(res["id"])),
           "      <properties>",
           '        <property name="pvetune.status" value=%s/>' % quoteattr(res["status"]),
           '        <property name="pvetune.severity" value=%s/>' % quoteattr(res["severity"]),
           "      </properties>"]
    body = xml_escape(_body(res))
    outcome = _outcome(res, warn_as_failure)
    if outcome == "failure":
        # A fail is typed by its severity (as before); a warn counted as a failure says warn.
        kind = "warn" if res["status"] == "warn" else res["severity"]
        label = "warn: " if res["status"] == "warn" else ""
        msg = quoteattr("[%s] %s%s" % (res["severity"], label, one_line(res["message"], 300)))
        out.append("      <failure message=%s type=%s>%s</failure>" % (msg, quoteattr(kind), body))
    elif outcome == "error":
        msg = quoteattr("[%s] %s" % (res["severity"], one_line(res["message"], 300)))
        out.append("      <error message=%s type=\"error\">%s</error>" % (msg, body))
    elif outcome == "skipped":
        msg = quoteattr("%s: %s" % (res["status"], _text(res["message"])))
        out.append("      <skipped message=%s>%s</skipped>" % (msg, body))
    else:
        out.append("      <system-out>%s</system-out>" % xml_escape("%s: %s" % (res["status"], _body(res))))
    out.append("    </testcase>")
    return out


def render_junit(doc, warn_as_failure=False):
    stamp = doc.get("generated_at") or ""
    stamp_attr = ' timestamp=%s' % quoteattr(stamp) if stamp else ""
    counts = [_suite_counts(h, warn_as_failure) for h in doc["hosts"]]
    total = {k: sum(c[k] for c in counts) for k in ("tests", "failures", "errors", "skipped")}
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuites name="pvetune audit" tests="%(tests)d" failures="%(failures)d" errors="%(errors)d" '
           'skipped="%(skipped)d"' % total
           + ' time="%s"%s>' % (_seconds(sum(h.get("duration") or 0 for h in doc["hosts"])), stamp_attr)]
    for host, count in zip(doc["hosts"], counts):
        out.append('  <testsuite name=%s hostname=%s tests="%d" failures="%d" errors="%d" skipped="%d" time="%s"%s>'
                   % (quoteattr(host["host"]), quoteattr(host["host"]), count["tests"], count["failures"],
                      count["errors"], count["skipped"], _seconds(host.get("duration")), stamp_attr))
        reason = unaudited_reason(host)
        if reason:
            out.append('    <testcase classname=%s name="audit" time="0">' % quoteattr(host["host"]))
            out.append('      <error message=%s type="unaudited">%s</error>' % (
                quoteattr("could not be audited: %s" % one_line(reason, 300)),
                xml_escape("could not be audited: %s" % reason)))
            out.append("    </testcase>")
        else:
            for res in host["checks"]:
                out.extend(_testcase(host, res, warn_as_failure))
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"
