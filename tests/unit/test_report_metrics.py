"""module_utils/pvetune/report/metrics.py: the audit document as Prometheus metrics (pvetune.prom).

The documents are the report tests' (reportutil: the demo hosts' real evaluations, every status from
test_checks' scenarios, hosts that could not be audited); every rendering is also checked by the real
``promtool check metrics`` (tests/promtool.py).
"""
import json
import os
import re

import pytest
from ansible.module_utils.pvetune.report import write as report
from ansible.module_utils.pvetune.report.metrics import (
    METRICS,
    TEXTFILE_NAME,
    audit_timestamp,
    check_document,
    escape_label,
    host_metrics,
    read_document,
    render_metrics,
)
from modharness import run_module
from promtool import promtool_check
from reportutil import MODULE_FAILED, STATUSES, UNREACHABLE, document
from reportutil import demo_entries as _demo_entries

SERIES = re.compile(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"(?:,|$)')


def parse(text):
    """[(metric, {label: unescaped value}, value)] of every series line; asserts each metric's HELP and TYPE come
    first and that every line is a comment or a series."""
    out, typed = [], set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        match = SERIES.match(line)
        assert match, line
        name, labels, value = match.groups()
        assert name in typed, line
        pairs = LABEL.findall(labels or "")
        assert ",".join('%s="%s"' % p for p in pairs) == (labels or ""), line
        unescaped = {k: re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), v) for k, v in pairs}
        out.append((name, unescaped, value))
    return out


@pytest.fixture(scope="module")
def demo_doc():
    return document(_demo_entries() + [UNREACHABLE, MODULE_FAILED])


def scenario_doc():
    """One host per status (every status the results have), from test_checks' hand-built evaluator paths."""
    from ansible.module_utils.pvetune.audit import evaluate
    from ansible.module_utils.pvetune.core.policy import merge_policy
    from test_checks import SCENARIOS, good_facts

    picked = {}
    for check_id, status, mutations, overrides, _msg, _reboot in SCENARIOS:
        if status in picked:
            continue
        facts = good_facts()
        for mutate in mutations:
            mutate(facts)
        picked[status] = evaluate(facts, merge_policy(overrides), only={check_id})
    return document([{"host": "h-" + status, "checks": results} for status, results in picked.items()])


def test_the_demo_fleet_passes_promtool_and_says_what_the_document_says(demo_doc):
    text = render_metrics(demo_doc)
    rc, out = promtool_check(text)
    assert rc == 0 and out == "", out
    series = parse(text)
    status = {(s[1]["host"], s[1]["check"]): (s[1]["status"], s[1]["severity"]) for s in series
              if s[0] == "pvetune_check_status"}
    expected = {(h["host"], c["id"]): (c["status"], c["severity"]) for h in demo_doc["hosts"] for c in h["checks"]}
    assert status == expected and len(status) == len([s for s in series if s[0] == "pvetune_check_status"])
    assert all(s[2] == "1" for s in series if s[0] in ("pvetune_check_status", "pvetune_host_verdict"))
    verdicts = {s[1]["host"]: s[1]["verdict"] for s in series if s[0] == "pvetune_host_verdict"}
    assert verdicts == {h["host"]: h["summary"]["verdict"] for h in demo_doc["hosts"]}
    assert verdicts["pve-gpu01"] == "fail" and verdicts["pve-gpu02"] == "pass"
    reboot = {s[1]["host"]: s[2] for s in series if s[0] == "pvetune_host_reboot_required"}
    pending = {s[1]["host"]: s[2] for s in series if s[0] == "pvetune_host_pending_reboot"}
    # pve-gpu03 is configured but not rebooted: pending; pve-gpu01 needs reboots for its fixes; pve-gpu02 is done
    assert reboot == {"pve-gpu01": "1", "pve-gpu02": "0", "pve-gpu03": "1"}
    assert pending == {"pve-gpu01": "0", "pve-gpu02": "0", "pve-gpu03": "1"}
    stamp = [s for s in series if s[0] == "pvetune_audit_timestamp_seconds"]
    assert stamp == [("pvetune_audit_timestamp_seconds", {}, str(audit_timestamp(demo_doc["generated_at"])))]


def test_every_metric_has_help_and_type_once_in_order(demo_doc):
    text = render_metrics(demo_doc)
    helps = [line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")]
    types = [line.split()[2:] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert helps == [name for name, _help in METRICS]
    assert types == [[name, "gauge"] for name, _help in METRICS]
    assert all(re.match(r"^pvetune_[a-z_]+$", name) for name in helps)


def test_a_host_that_could_not_be_audited_has_only_its_verdict(demo_doc):
    series = parse(render_metrics(demo_doc, hosts=["pve-gpu04", "pve-gpu05"]))
    assert sorted((s[0], s[1].get("host")) for s in series) == [
        ("pvetune_audit_timestamp_seconds", None), ("pvetune_host_verdict", "pve-gpu04"),
        ("pvetune_host_verdict", "pve-gpu05")]
    assert {s[1]["verdict"] for s in series if s[1]} == {"unaudited"}
    # a fleet of hosts none of which was audited is still a valid exposition (HELP and TYPE, no series)
    assert promtool_check(render_metrics(document([UNREACHABLE])))[0] == 0


def test_every_status_is_rendered_and_valid():
    doc = scenario_doc()
    text = render_metrics(doc)
    assert promtool_check(text)[0] == 0
    statuses = {s[1]["status"] for s in parse(text) if s[0] == "pvetune_check_status"}
    assert statuses == set(STATUSES)


def test_label_values_are_escaped_and_read_back_by_promtool(demo_doc):
    """A host name with a backslash, a double quote and a line feed (an inventory name can hold any of them)."""
    name = 'gpu\\07 "rack 3"\nrow'
    doc = json.loads(json.dumps(demo_doc))
    doc["hosts"][1]["host"] = name
    text = render_metrics(doc)
    assert 'host="gpu\\\\07 \\"rack 3\\"\\nrow"' in text
    assert "\nrow" not in text   # the line feed is escaped, not written
    rc, out = promtool_check(text)
    assert rc == 0, out
    assert {s[1]["host"] for s in parse(text) if s[0] == "pvetune_host_verdict"} >= {name}
    assert escape_label('a\\b"c\nd') == 'a\\\\b\\"c\\nd'


def test_a_hosts_own_text_is_the_fleet_files_lines_of_that_host(demo_doc):
    fleet = render_metrics(demo_doc).splitlines()
    texts, missing = host_metrics(demo_doc, ["pve-gpu01", "pve-gpu03", "pve-gpu09"])
    assert missing == ["pve-gpu09"] and sorted(texts) == ["pve-gpu01", "pve-gpu03"]
    for host, text in texts.items():
        assert promtool_check(text)[0] == 0
        lines = text.splitlines()
        assert [line for line in lines if 'host="' in line] == [line for line in fleet if 'host="%s"' % host in line]
        assert [line for line in lines if 'host="' not in line] == [line for line in fleet if 'host="' not in line]


@pytest.mark.parametrize("breakage, message", [
    (lambda d: d.update(generated_at="yesterday"), r"generated_at: not a time"),
    (lambda d: d.pop("hosts"), r"hosts: expected a list"),
    (lambda d: d["hosts"][1].update(host=""), r"hosts\[1\]\.host: expected a non-empty string"),
    (lambda d: d["hosts"][2].update(host="pve-gpu01"), r"hosts\[2\]\.host: pve-gpu01 is in the document twice"),
    (lambda d: d["hosts"][0]["summary"].update(verdict="ok"), r"hosts\[0\]\.summary\.verdict: 'ok' is not one of"),
    (lambda d: d["hosts"][0]["summary"].pop("reboot_required"),
     r"hosts\[0\]\.summary\.reboot_required: expected true or"),
    (lambda d: d["hosts"][0]["checks"][3].update(status="ok"), r"hosts\[0\]\.checks\[3\]\.status: 'ok' is not"),
    (lambda d: d["hosts"][0]["checks"][1].update(id=d["hosts"][0]["checks"][0]["id"]),
     r"hosts\[0\]\.checks\[1\]\.id: .* twice"),
    (lambda d: d["hosts"][0]["checks"].__setitem__(0, "x"), r"hosts\[0\]\.checks\[0\]: expected an object"),
])
def test_a_bad_document_is_an_error_naming_the_file_and_the_key(demo_doc, breakage, message):
    doc = json.loads(json.dumps(demo_doc))
    breakage(doc)
    with pytest.raises(ValueError, match=r"^/r/audit\.json: " + message):
        check_document(doc, "/r/audit.json")


def test_read_document_names_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"audit\.json: cannot read the audit report .*run audit\.yml first"):
        read_document(str(tmp_path / "audit.json"))
    (tmp_path / "audit.json").write_text("{truncated")
    with pytest.raises(ValueError, match=r"audit\.json: not an audit\.json"):
        read_document(str(tmp_path / "audit.json"))
    (tmp_path / "audit.json").write_text("[]")
    with pytest.raises(ValueError, match=r"audit\.json: expected a JSON object"):
        read_document(str(tmp_path / "audit.json"))


def test_write_reports_writes_pvetune_prom_with_the_other_reports(tmp_path):
    from reportutil import facts_result

    audits = {"pve-gpu01": facts_result("pve-gpu01"), "pve-gpu02": facts_result("pve-gpu02")}
    planned = report.write_reports(["pve-gpu01", "pve-gpu02"], audits, str(tmp_path), timestamp="20261129T200652Z",
                                   check_mode=True)
    assert os.path.join(planned["report_dir"], TEXTFILE_NAME) in planned["files"]
    assert os.listdir(str(tmp_path)) == []          # check mode: nothing, as for the other reports
    out = report.write_reports(["pve-gpu01", "pve-gpu02"], audits, str(tmp_path), timestamp="20261129T200652Z")
    prom = os.path.join(out["report_dir"], TEXTFILE_NAME)
    with open(prom) as handle:
        text = handle.read()
    assert sorted(os.listdir(out["report_dir"])) == sorted(os.path.basename(f) for f in out["files"])  # no temporary
    assert text == render_metrics(read_document(os.path.join(out["report_dir"], "audit.json")))
    assert promtool_check(text)[0] == 0


# -- the modules ------------------------------------------------------------------------------------------------
def test_pvetune_metrics_renders_the_hosts_of_a_report_file(tmp_path, demo_doc):
    path = tmp_path / "audit.json"
    path.write_text(report.render_json(demo_doc))
    res = run_module("pvetune_metrics", {"report": str(path), "hosts": ["pve-gpu02", "pve-gpu07"]})
    assert not res.get("failed"), res
    assert res["changed"] is False and res["missing"] == ["pve-gpu07"] and list(res["metrics"]) == ["pve-gpu02"]
    assert res["metrics"]["pve-gpu02"] == render_metrics(demo_doc, ["pve-gpu02"])
    assert res["generated_at"] == demo_doc["generated_at"]
    path.write_text('{"hosts": []}')
    bad = run_module("pvetune_metrics", {"report": str(path), "hosts": ["pve-gpu02"]})
    assert bad["failed"] and bad["msg"].startswith(str(path) + ": generated_at"), bad


@pytest.fixture
def textfile_root(tmp_path):
    root = tmp_path / "host"
    (root / "var/lib/prometheus/node-exporter").mkdir(parents=True)
    return root


def textfile(root):
    return root / "var/lib/prometheus/node-exporter" / TEXTFILE_NAME


def test_pvetune_textfile_check_mode_writes_nothing_and_shows_the_diff(textfile_root, demo_doc):
    text = render_metrics(demo_doc, ["pve-gpu01"])
    res = run_module("pvetune_textfile", {"root": str(textfile_root), "content": text}, check_mode=True, diff=True)
    assert res["changed"] is True and res["path"] == "/var/lib/prometheus/node-exporter/pvetune.prom"
    assert res["diff"]["before_header"].endswith("pvetune.prom (absent)") and res["diff"]["after"] == text
    assert os.listdir(str(textfile(textfile_root).parent)) == []


def test_pvetune_textfile_writes_atomically_once_and_removes(textfile_root, demo_doc):
    text = render_metrics(demo_doc, ["pve-gpu01"])
    res = run_module("pvetune_textfile", {"root": str(textfile_root), "content": text})
    assert res["changed"] is True and not res.get("failed"), res
    path = textfile(textfile_root)
    assert path.read_text() == text and (path.stat().st_mode & 0o777) == 0o644
    assert os.listdir(str(path.parent)) == [TEXTFILE_NAME]   # no temporary file left
    inode = path.stat().st_ino
    again = run_module("pvetune_textfile", {"root": str(textfile_root), "content": text}, diff=True)
    assert again["changed"] is False and "diff" not in again and path.stat().st_ino == inode
    newer = render_metrics(demo_doc, ["pve-gpu02"])
    changed = run_module("pvetune_textfile", {"root": str(textfile_root), "content": newer}, diff=True)
    assert changed["changed"] and changed["diff"]["before"] == text and path.read_text() == newer
    assert path.stat().st_ino != inode                      # a new file renamed over the old one
    gone = run_module("pvetune_textfile", {"root": str(textfile_root), "state": "absent"}, check_mode=True)
    assert gone["changed"] and path.exists()
    gone = run_module("pvetune_textfile", {"root": str(textfile_root), "state": "absent"})
    assert gone["changed"] and not path.exists()
    assert run_module("pvetune_textfile", {"root": str(textfile_root), "state": "absent"})["changed"] is False


@pytest.mark.parametrize("directory", ["var/lib/node-exporter", "/var/lib/../etc", "/var/lib/prometheus/", "/",
                                       "/var//lib", "/var/lib/$(id)", "/var/lib/a b", "/var/lib/x\n"])
def test_pvetune_textfile_refuses_a_bad_directory_naming_the_variable(textfile_root, directory):
    res = run_module("pvetune_textfile", {"root": str(textfile_root), "dir": directory, "content": "# x\n"})
    assert res["failed"] and res["msg"].startswith("pvetune_textfile_dir must be an absolute, normalised"), res
    assert os.listdir(str(textfile(textfile_root).parent)) == []


def test_pvetune_textfile_fails_without_the_collectors_directory_and_never_through_a_link(tmp_path, textfile_root):
    (tmp_path / "empty").mkdir()
    res = run_module("pvetune_textfile", {"root": str(tmp_path / "empty"), "content": "# x\n"})
    assert res["failed"] and "install prometheus-node-exporter" in res["msg"], res
    assert list((tmp_path / "empty").iterdir()) == []  # the directory is never created
    os.symlink("/etc/passwd", str(textfile(textfile_root)))
    res = run_module("pvetune_textfile", {"root": str(textfile_root), "content": "# x\n"})
    assert res["failed"] and "is a symlink to /etc/passwd; not writing through it" in res["msg"], res
    assert os.readlink(str(textfile(textfile_root))) == "/etc/passwd"
    bad = run_module("pvetune_textfile", {"root": str(textfile_root), "content": "no line feed"})
    assert bad["failed"] and "ending with a line feed" in bad["msg"]
