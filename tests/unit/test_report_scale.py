"""audit.html at fleet scale: 256 hosts (the demo fleet's real audits repeated, no playbook) stay under a size
bound with each check's rationale written once, nothing is fetched, and the filter (inline script) works: run
under node against the page's own elements, it shows exactly the hosts and checks asked for; without JavaScript
the form stays hidden and everything is shown."""
import datetime
import html
import json
import re
import shutil
import subprocess

import pytest
from ansible.module_utils.pvetune.report import write as report
from ansible.module_utils.pvetune.report import html as report_html
from ansible.module_utils.pvetune.core.catalogue import CATALOGUE, SEVERITY_RANK
from ansible.module_utils.pvetune.report.html_filter import filter_script
from reportutil import facts_result, fleet_entries, parse_html, scripts

# bench/report_size.py measures it (README): 15.1 MB at 256 hosts before rationale, policies and repeated item
# rows were written once, 9.9 MB after (20 checks), 12.8 MB with 26. The bound grows with the catalogue: ~2.1 KB
# per host and check, so a page that repeats per-host text again fails it.
MAX_BYTES_256 = 2100 * 256 * len(CATALOGUE)
NOW = datetime.datetime(2026, 11, 29, 20, 6, 52, tzinfo=datetime.timezone.utc)


@pytest.fixture(scope="module")
def fleet():
    doc = report.build_document(fleet_entries(256), generated_at="2026-11-29T20:06:52Z",
                                run={"playbook": "audit.yml", "inventory": ["inventory/demo"]})
    return doc, report.render_html(doc)


def test_256_hosts_fit_the_size_bound_with_each_rationale_once(fleet):
    doc, page = fleet
    assert len(doc["hosts"]) == 256
    assert len(page.encode("utf-8")) < MAX_BYTES_256
    texts = {(r["id"], r["rationale"], r["remediation"]) for h in doc["hosts"] for r in h["checks"]}
    for _cid, rationale, _remediation in texts:  # in the reference section only, once per distinct entry
        assert page.count(html.escape(rationale)) == len([t for t in texts if t[1] == rationale]), rationale
    assert page.count('<section class="ref"') == len(texts)
    assert page.count('href="#ref-') == sum(len(h["checks"]) for h in doc["hosts"])  # every check links to its
    policies = {json.dumps(h["policy"], sort_keys=True) for h in doc["hosts"]}
    assert page.count('<details class="policy"') == len(policies) < 256
    assert page.count('<p class="policy muted">') == 256 - len(policies)
    assert page.count('<section class="host"') == 256


def test_nothing_is_fetched(fleet):
    _, page = fleet
    assert not re.findall(r'\s(?:src|href|action)="(?!#)', page)  # only links inside the page
    assert "<link" not in page and "url(" not in page and "@import" not in page
    assert re.findall(r"<script[^>]*>", page) == ["<script>"]  # one inline script, no src


def test_consecutive_equal_items_are_one_row_and_the_matrix_replaces_its_items():
    doc = report.build_document([report.entry_from_audit("gpu", facts_result("pve-gpu01"))])
    page = parse_html(report.render_html(doc))
    checks = {a["id"]: (a, inside) for t, a, inside in page.elements if t == "details" and "data-st" in a}
    rows = {}
    for tag, attrs, inside in page.elements:
        if tag == "code" and any(t == "details" for t, _ in inside) and inside[-2][0] == "tr":
            det = next(a for t, a in reversed(inside) if t == "details")
            tr = next(a for t, a in reversed(inside) if t == "tr")
            rows.setdefault(det.get("id"), {}).setdefault(id(tr), []).append("".join(attrs.get("_text", [])))
    mrrs = list(rows[report.check_anchor("gpu", "pcie.mrrs")].values())
    res = next(r for r in doc["hosts"][0]["checks"] if r["id"] == "pcie.mrrs")
    assert mrrs == [[i["name"] for i in res["items"]]]  # 8 GPUs, one MaxReadReq 512 row
    assert report.check_anchor("gpu", "pcie.topology") not in rows  # every GPU's row is in the matrix
    assert report.check_anchor("gpu", "pcie.topology") in checks


NODE_SHIM = r"""
const data = JSON.parse(require("fs").readFileSync(0, "utf8"));
function el(attrs) {
  return {attrs: attrs, id: attrs.id, hidden: "hidden" in attrs,
          getAttribute(n) { return n in this.attrs ? this.attrs[n] : null; }};
}
const sections = data.sections.map(s => {
  const e = el(s.attrs);
  e.details = s.details.map(el);
  e.querySelectorAll = sel => { if (sel !== "details[data-st]") { throw new Error(sel); } return e.details; };
  return e;
});
const rows = data.rows.map(el);
const form = el(data.form);
const listeners = {};
form.elements = {hosts: {value: "all"}, status: {value: ""}, sev: {value: "-1"}, q: {value: ""}};
form.addEventListener = (type, fn) => { listeners[type] = fn; };
const count = {textContent: ""};
global.document = {
  getElementById: id => ({"pvt-filter": form, "pvt-count": count})[id] || null,
  querySelectorAll: sel => {
    if (sel === "tr[data-row]") { return rows; }
    if (sel === "section.host[data-host]") { return sections; }
    throw new Error(sel);
  },
};
const mod = {exports: {}};
new Function("module", data.script)(mod);
const out = [{form_hidden: form.hidden, count: count.textContent, pure: Object.keys(mod.exports).sort()}];
for (const f of data.filters) {
  for (const k of Object.keys(f)) { form.elements[k].value = f[k]; }
  listeners.change();
  out.push({count: count.textContent,
            hosts: sections.filter(s => !s.hidden).map(s => s.attrs["data-host"]),
            rows: rows.filter(r => !r.hidden).map(r => r.attrs["data-row"]),
            checks: sections.filter(s => !s.hidden).map(s => s.details.filter(d => !d.hidden).length)});
}
process.stdout.write(JSON.stringify(out));
"""
FILTERS = [{}, {"hosts": "failing"}, {"hosts": "changed"}, {"hosts": "all", "status": "pending"},
           {"status": "fail", "sev": "4"}, {"status": "error", "sev": "-1"}, {"status": "", "q": "PVE-B"},
           {"q": "", "hosts": "failing", "status": "warn"}]


def _page_for_the_filter(tmp_path):
    """Two runs, so that the second has drift: a and b change, c stays, d is new, e cannot be audited."""
    first = {"pve-a": facts_result("pve-gpu01"), "pve-b": facts_result("pve-gpu03"),
             "pve-c": facts_result("pve-gpu05")}
    report.write_reports(sorted(first), first, str(tmp_path), "high", {}, timestamp="20261101T000000Z", now=NOW)
    second = {"pve-a": facts_result("pve-gpu03"), "pve-b": facts_result("pve-gpu02"),
              "pve-c": facts_result("pve-gpu05"), "pve-d": facts_result("pve-gpu04"),
              "pve-e": {"unreachable": True, "msg": "ssh down"}}
    out = report.write_reports(sorted(second), second, str(tmp_path), "high", {}, timestamp="20261102T000000Z",
                               now=NOW)
    with open(out["report_dir"] + "/audit.json") as handle:
        doc = json.load(handle)
    with open(out["report_dir"] + "/audit.html") as handle:
        return doc, handle.read()


def _expected(doc, f):
    status, sev, text = f.get("status", ""), int(f.get("sev", "-1")), f.get("q", "")
    hosts, checks = [], []
    for host in doc["hosts"]:
        verdict = host["summary"]["verdict"]
        if f.get("hosts") == "failing" and verdict == "pass":
            continue
        if f.get("hosts") == "changed" and host["drift"]["state"] != "changed":
            continue
        if text.lower() not in host["host"].lower():
            continue
        match = [r for r in host["checks"] if (not status or r["status"] == status)
                 and SEVERITY_RANK[r["severity"]] >= sev]
        if status or sev >= 0:
            if verdict == "unaudited" and status not in ("", "error"):
                continue
            if verdict != "unaudited" and not match:
                continue
        hosts.append(host["host"])
        checks.append(len(match))
    return hosts, checks


@pytest.mark.skipif(shutil.which("node") is None, reason="node (the machine's Node.js) runs the report's script")
def test_the_filter_shows_the_hosts_and_checks_asked_for(tmp_path):
    doc, text = _page_for_the_filter(tmp_path)
    page = parse_html(text)
    assert scripts(page) == [filter_script()]
    form = next(a for t, a, _ in page.elements if t == "form")
    assert "hidden" in form  # without JavaScript no control is shown...
    hidden = [(t, a.get("id")) for t, a, _ in page.elements if "hidden" in a and t != "form"]
    assert hidden == []  # ...and nothing else is hidden
    sections, rows = [], []
    for tag, attrs, _ in page.elements:
        if tag == "section" and "data-host" in attrs:
            sections.append({"attrs": {k: v for k, v in attrs.items() if k != "_text"}, "details": []})
        elif tag == "details" and "data-st" in attrs:
            sections[-1]["details"].append({k: v for k, v in attrs.items() if k != "_text"})
        elif tag == "tr" and "data-row" in attrs:
            rows.append({"data-row": attrs["data-row"]})
    data = {"script": scripts(page)[0], "sections": sections, "rows": rows, "filters": FILTERS,
            "form": {k: v for k, v in form.items() if k != "_text"}}
    proc = subprocess.run(["node", "-e", NODE_SHIM], input=json.dumps(data), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out[0] == {"form_hidden": False, "count": "5 of 5 hosts shown", "pure": ["checkShown", "hostShown"]}
    anchors = {h["host"]: report.host_anchor(h["host"]) for h in doc["hosts"]}
    for f, got in zip(FILTERS, out[1:]):
        hosts, checks = _expected(doc, f)
        assert got["hosts"] == hosts, f
        assert got["rows"] == [anchors[h] for h in hosts], f  # the overview follows the sections
        if f.get("status") or int(f.get("sev", "-1")) >= 0:
            assert got["checks"] == checks, f
        else:
            assert got["checks"] == [len(h["checks"]) for h in doc["hosts"] if h["host"] in hosts], f
        assert got["count"] == "%d of 5 hosts shown" % len(hosts)
    # the cases say something: each filter narrows differently
    assert [g["hosts"] for g in out[1:]] == [
        ["pve-a", "pve-b", "pve-c", "pve-d", "pve-e"], ["pve-c", "pve-d", "pve-e"], ["pve-a", "pve-b"],
        ["pve-a"], ["pve-d"], ["pve-e"], ["pve-b"], ["pve-c", "pve-d"]]


def test_filter_controls_name_every_status_and_severity():
    form = parse_html(report_html.filter_form(3))
    options = [a["value"] for t, a, _ in form.elements if t == "option"]
    assert options == ["all", "failing", "changed", "", "fail", "error", "pending", "warn", "pass", "skip",
                       "-1", "4", "3", "2", "1", "0"]
