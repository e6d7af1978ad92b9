# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvetune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter of audit.html: a form and an inline script (no network, no library).

The form carries the `hidden` attribute and only the script shows it, so a browser without JavaScript shows the
whole report and no control that does nothing.  The script reads what report_html writes on the elements:
section.host[data-host, data-verdict, data-drift] (drift state), tr[data-row] (the overview row of the host
section with that id) and details[data-st, data-sev] (each check's status and severity rank).  hostShown and
checkShown are pure (tests/unit/test_report_scale.py runs them and the form under node).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import html

from ansible.module_utils.pvetune.core.catalogue import SEVERITY_RANK
from ansible.module_utils.pvetune.report.document import STATUS_ORDER

FILTER_CSS = """
#pvt-filter{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:8px 12px;margin:12px 0;
display:flex;flex-wrap:wrap;gap:6px 18px;align-items:center}#pvt-filter label{white-space:nowrap}
[hidden]{display:none!important}
"""
HOST_CHOICES = (("all", "all hosts"), ("failing", "failing or not audited"), ("changed", "changed since last audit"))

# ES5, so any browser a report is opened in runs it.
SCRIPT = r"""
(function () {
  "use strict";
  function checkShown(c, f) {
    return (!f.status || c.st === f.status) && c.sev >= f.sev;
  }
  function narrowed(f) {
    return !!f.status || f.sev >= 0;
  }
  function hostShown(h, f) {
    if (f.hosts === "failing" && h.verdict === "pass") { return false; }
    if (f.hosts === "changed" && h.drift !== "changed") { return false; }
    if (f.text && h.name.toLowerCase().indexOf(f.text.toLowerCase()) < 0) { return false; }
    if (!narrowed(f)) { return true; }
    if (h.verdict === "unaudited") { return !f.status || f.status === "error"; }
    for (var i = 0; i < h.checks.length; i++) {
      if (checkShown(h.checks[i], f)) { return true; }
    }
    return false;
  }
  var api = {checkShown: checkShown, hostShown: hostShown};
  if (typeof module !== "undefined" && module.exports) { module.exports = api; }
  if (typeof document === "undefined") { return; }
  var form = document.getElementById("pvt-filter");
  if (!form) { return; }
  var rows = {};
  var trs = document.querySelectorAll("tr[data-row]");
  for (var r = 0; r < trs.length; r++) { rows[trs[r].getAttribute("data-row")] = trs[r]; }
  function value(name) { return form.elements[name].value; }
  function apply() {
    var f = {hosts: value("hosts"), status: value("status"), sev: Number(value("sev")),
             text: value("q").replace(/^\s+|\s+$/g, "")};
    var sections = document.querySelectorAll("section.host[data-host]");
    var shown = 0;
    for (var i = 0; i < sections.length; i++) {
      var sec = sections[i], details = sec.querySelectorAll("details[data-st]"), checks = [];
      for (var j = 0; j < details.length; j++) {
        checks.push({st: details[j].getAttribute("data-st"), sev: Number(details[j].getAttribute("data-sev"))});
      }
      var h = {name: sec.getAttribute("data-host"), verdict: sec.getAttribute("data-verdict"),
               drift: sec.getAttribute("data-drift"), checks: checks};
      var visible = hostShown(h, f);
      sec.hidden = !visible;
      if (rows[sec.id]) { rows[sec.id].hidden = !visible; }
      for (var k = 0; k < details.length; k++) {
        details[k].hidden = visible && narrowed(f) && !checkShown(checks[k], f);
      }
      if (visible) { shown++; }
    }
    document.getElementById("pvt-count").textContent = shown + " of " + sections.length + " hosts shown";
  }
  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("submit", function (ev) { ev.preventDefault(); });
  form.hidden = false;
  apply();
}());
"""


def _select(name, label, choices):
    options = "".join('<option value="%s">%s</option>' % (html.escape(v), html.escape(t)) for v, t in choices)
    return '<label>%s <select name="%s">%s</select></label>' % (html.escape(label), name, options)


def filter_form(total):
    """The filter controls (hidden until the script runs)."""
    statuses = [("", "any")] + [(s, s) for s in STATUS_ORDER]
    by_rank = sorted(SEVERITY_RANK, key=SEVERITY_RANK.get, reverse=True)
    severities = [("-1", "any")] + [(str(SEVERITY_RANK[s]), s) for s in by_rank]
    return ('<form id="pvt-filter" hidden><b>Filter</b>%s%s%s<label>host name <input name="q" type="search" '
            'size="16"></label><span id="pvt-count" class="muted">%d of %d hosts shown</span></form>' % (
                _select("hosts", "hosts", HOST_CHOICES), _select("status", "checks with status", statuses),
                _select("sev", "severity at least", severities), total, total))


def filter_script():
    return SCRIPT.strip()
