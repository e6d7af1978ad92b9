"""audit.html, parsed with html.parser: checks of a host most severe first, every overview cell a link to its
check's row (ids valid and unique per host and check), the effective policy per host, no "None" in cells."""
import json
import re

import pytest
from ansible.module_utils.pvetune.report import write as report
from ansible.module_utils.pvetune.report import html as report_html
from ansible.module_utils.pvetune.core.catalogue import CATALOGUE, SEVERITY_RANK
from ansible.module_utils.pvetune.report.html_filter import filter_script
from reportutil import UNREACHABLE, demo_entries, document, parse_html, scripts, text_of

# HTML 4's id rule, stricter than HTML5's (no whitespace): what any consumer of a fragment accepts.
VALID_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]*$")


@pytest.fixture(scope="module")
def entries():
    return demo_entries()


@pytest.fixture(scope="module")
def page(entries):
    return parse_html(report.render_html(document(entries + [UNREACHABLE])))


def check_rows(page):
    """[(host anchor part, check id)] of the check rows, in page order."""
    rows = [attrs["id"] for tag, attrs, _ in page.elements if tag == "details" and "id" in attrs]
    return [r for r in rows if r.startswith("check-")]


def test_checks_of_a_host_are_most_severe_first_then_by_status(entries, page):
    doc = document(entries)
    for host in doc["hosts"]:
        by_anchor = {report.check_anchor(host["host"], r["id"]): r for r in host["checks"]}
        order = [by_anchor[a] for a in check_rows(page) if a in by_anchor]
        assert len(order) == len(CATALOGUE)
        keys = [(-SEVERITY_RANK[r["severity"]], report.STATUS_ORDER.index(r["status"])) for r in order]
        assert keys == sorted(keys), host["host"]
    gpu01 = [a for a in check_rows(page) if a.startswith("check-pve-gpu01::")]
    assert gpu01[0] == "check-pve-gpu01::lxc.gpu_devices"  # the one critical check
    assert gpu01[-1] == "check-pve-gpu01::pcie.sriov"  # info last (skip after pass)


def test_every_overview_cell_links_to_its_check_row(entries, page):
    rows = check_rows(page)
    assert len(rows) == len(set(rows)) == 3 * len(CATALOGUE)
    links = [h[1:] for h in page.hrefs if h.startswith("#check-")]
    assert sorted(links) == sorted(rows)  # one link per (host, check), each to an existing row
    for tag, attrs, inside in page.elements:
        if tag == "a" and attrs.get("href", "").startswith("#check-"):
            assert [t for t, _ in inside[-2:]] == ["tr", "td"] and inside[-1][1].get("class") == "c"
    host_links = [h[1:] for h in page.hrefs if h.startswith("#host-")]
    assert sorted(host_links) == sorted(i for i in page.ids if i.startswith("host-"))
    assert all(VALID_ID.match(i) for i in page.ids), page.ids
    assert len(page.ids) == len(set(page.ids))


def test_anchors_are_unique_and_valid_for_any_host_name():
    names = ["a b", "a:20b", "a-b", "a.b", "ä", ":c3:a4", "x::y", "x:", "x", "<x>", "1host", "a_b"]
    checks = [c["id"] for c in CATALOGUE] + ["a::b.c", ":x"]
    anchors = [report.host_anchor(n) for n in names] + [report.check_anchor(n, c) for n in names for c in checks]
    assert len(set(anchors)) == len(anchors)
    assert all(VALID_ID.match(a) for a in anchors), anchors


def test_the_effective_policy_of_each_host_is_shown(entries):
    """In full the first time, then as a link to the first host's with the same policy (once at fleet scale)."""
    entries = json.loads(json.dumps(entries))
    entries[0]["policy"]["skip_checks"] = {"nvidia.driver": "</pre><script>alert('policy')</script>"}
    entries.append(dict(json.loads(json.dumps(entries[1])), host="pve-gpu02b"))  # pve-gpu02's policy again
    page = parse_html(report.render_html(document(entries + [UNREACHABLE])))
    assert scripts(page) == [filter_script()]
    full = {}  # policy anchor -> (host section, policy)
    for tag, attrs, inside in page.elements:
        if tag == "pre" and inside[-1][0] == "details" and inside[-1][1].get("class") == "policy":
            section = next(a for t, a in reversed(inside) if t == "section")
            full[inside[-1][1]["id"]] = (section["id"], json.loads(text_of(attrs)))
    shown = dict(full.values())
    for tag, attrs, inside in page.elements:
        if tag == "a" and inside[-1][0] == "p" and inside[-1][1].get("class") == "policy muted":
            section = next(a for t, a in reversed(inside) if t == "section")
            shown[section["id"]] = full[attrs["href"][1:]][1]
    assert shown == {report.host_anchor(e["host"]): e["policy"] for e in entries}  # none for the unreachable
    assert len(full) == len({json.dumps(e["policy"], sort_keys=True) for e in entries}) < len(entries)
    assert full[report_html.policy_anchor("pve-gpu02")][0] == report.host_anchor("pve-gpu02")  # the first one's
    assert shown[report.host_anchor("pve-gpu01")]["skip_checks"]["nvidia.driver"] == (
        "</pre><script>alert('policy')</script>")
    summaries = [text_of(a) for t, a, inside in page.elements
                 if t == "summary" and inside[-1][1].get("class") == "policy"]
    assert summaries == ["effective policy"] * len(full)


def test_missing_values_are_an_em_dash_not_none(entries):
    entries = json.loads(json.dumps(entries))
    res = next(r for r in entries[0]["checks"] if r["id"] == "pcie.mrrs")
    res["current"] = None
    res["items"][0].update(current=None, expected=None, message=None)
    page = parse_html(report.render_html(document(entries)))
    cells = [text_of(a) for t, a, _ in page.elements if t in ("td", "dd", "code")]
    assert "None" not in cells
    assert not [c for c in cells if "None" in c.split()]
    row = next(inside for t, a, inside in page.elements if t == "code" and text_of(a) == res["items"][0]["name"])
    tr = row[-2][1]
    assert tr is not None
    item_cells = [text_of(a) for t, a, inside in page.elements if t == "td" and inside and inside[-1][1] is tr]
    assert item_cells[2:] == ["\u2014", "\u2014", ""]  # current, expected, note (name and status hold elements)
    dd = [text_of(a) for t, a, inside in page.elements if t == "dd"
          and any(x.get("id") == report.check_anchor("pve-gpu01", "pcie.mrrs") for _, x in inside)]
    assert dd[0] == "\u2014"  # current
