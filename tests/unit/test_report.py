"""Tests for module_utils/pvetune/report/write.py: audit.json (against docs/audit-report.schema.json),
junit.xml, audit.html and the terminal table.

The documents are built from real evaluations: the three demo hosts (gather + evaluate with the
demo policy), every hand-built scenario of test_checks.py, and unreachable host entries.
The report's newer behaviour has its own files: test_report_outcome.py (hosts that could not be audited,
verdicts, the action plugin), test_report_fix_command.py, test_report_junit.py, test_report_html.py.
"""
import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest
from ansible.module_utils.pvetune.report import write as report
from ansible.module_utils.pvetune.audit import evaluate
from ansible.module_utils.pvetune.core.catalogue import CATALOGUE, ORDER
from ansible.module_utils.pvetune.core.policy import merge_policy
from ansible.module_utils.pvetune.report.html_filter import filter_script
from reportutil import MODULE_FAILED, STATUSES, UNREACHABLE, document, load_schema, parse_html, scripts, validate
from reportutil import demo_entries as _demo_entries


@pytest.fixture(scope="module")
def schema():
    return load_schema()


def status_counts(entry):
    """The text table's PASS..ERROR cells of one entry, counted from its results."""
    return [str(sum(1 for r in entry["checks"] if r["status"] == s)) for s in STATUSES]


@pytest.fixture(scope="module")
def demo_entries():
    return _demo_entries()


# -- audit.json ----------------------------------------------------------------------------------------
def test_schema_is_a_valid_draft_2020_12_schema(schema):
    assert schema["properties"]["schema_version"] == {"const": report.SCHEMA_VERSION}


def test_demo_document_validates(schema, demo_entries):
    doc = document(demo_entries + [UNREACHABLE, MODULE_FAILED])
    validate(doc, schema)
    # the rendered text is the same document
    rendered = json.loads(report.render_json(doc))
    validate(rendered, schema)
    assert rendered == json.loads(json.dumps(doc))


def test_every_result_field_is_in_the_schema(schema, demo_entries):
    """A result as pvetune_facts returns it has every check field but the report's own fix_command; the
    document's checks have all of them."""
    check_props = set(schema["$defs"]["check"]["properties"])
    item_props = set(schema["$defs"]["item"]["properties"])
    optional = {"matrix"}  # pcie.topology's GPU matrix, where a host has two GPUs or more
    for entry in demo_entries:
        for res in entry["checks"]:
            assert set(res) - optional == check_props - {"fix_command"} - optional
            for item in res["items"]:
                assert set(item) == item_props
    for host in document(demo_entries)["hosts"]:
        for res in host["checks"]:
            assert set(res) - optional == check_props - optional


def test_every_scenario_result_validates(schema):
    """All hand-built evaluator paths of test_checks.py produce schema-valid results."""
    from test_checks import SCENARIOS, good_facts

    checks_out = []
    for check_id, _status, mutations, overrides, _msg, _reboot in SCENARIOS:
        facts = good_facts()
        for mutate in mutations:
            mutate(facts)
        checks_out.extend(evaluate(facts, merge_policy(overrides), only={check_id}))
    statuses = {r["status"] for r in checks_out}
    assert statuses == set(STATUSES)
    doc = document([{"host": "h%d" % i, "checks": [r]} for i, r in enumerate(checks_out)])
    validate(doc, schema)


MRRS_AT = ORDER.index("pcie.mrrs")     # a check with items on every demo host


@pytest.mark.parametrize("breakage", [
    lambda d: d.update(schema_version=2),
    lambda d: d["hosts"][0]["checks"][0].update(status="ok"),
    lambda d: d["hosts"][0]["checks"][0].update(severity="urgent"),
    lambda d: d["hosts"][0]["checks"][0].pop("rationale"),
    lambda d: d["hosts"][0]["checks"][0].update(surprise=1),
    lambda d: d["hosts"][0]["checks"][0].update(reboot_required="yes"),
    lambda d: d["hosts"][0]["checks"][0].update(evidence="one string"),
    lambda d: d["hosts"][0]["checks"][MRRS_AT]["items"][0].update(expected=4096),
    lambda d: d["hosts"][0]["checks"][MRRS_AT]["items"][0].pop("message"),
    lambda d: d["hosts"][0]["summary"]["counts"].pop("pending"),
    lambda d: d["hosts"][0].update(reachable=None),
    lambda d: d["summary"].update(hosts=-1),
    lambda d: d["run"].pop("fail_on"),
    lambda d: d.update(generated_at="yesterday"),
])
def test_schema_rejects_malformed_documents(schema, demo_entries, breakage):
    doc = json.loads(json.dumps(document(demo_entries)))
    assert doc["hosts"][0]["checks"][MRRS_AT]["id"] == "pcie.mrrs"
    breakage(doc)
    with pytest.raises(jsonschema.ValidationError):
        validate(doc, schema)


def test_document_summary(demo_entries):
    doc = document(demo_entries + [UNREACHABLE])
    assert [h["host"] for h in doc["hosts"]] == ["pve-gpu01", "pve-gpu02", "pve-gpu03", "pve-gpu04"]
    assert doc["summary"]["failed_hosts"] == ["pve-gpu01", "pve-gpu04"]  # every host that fails the run
    assert doc["summary"]["failing_hosts"] == ["pve-gpu01"]  # failing checks; pve-gpu04 could not be audited
    assert doc["summary"]["unaudited_hosts"] == ["pve-gpu04"]
    assert doc["summary"]["unaudited"] == {"pve-gpu04": "unreachable (%s)" % UNREACHABLE["error"]}
    assert doc["summary"]["reboot_required"] == ["pve-gpu01", "pve-gpu03"]
    assert doc["summary"]["hosts"] == 4
    assert sum(doc["summary"]["counts"].values()) == 3 * len(CATALOGUE)
    assert [h["summary"]["verdict"] for h in doc["hosts"]] == ["fail", "pass", "pass", "unaudited"]
    gpu04 = doc["hosts"][3]
    assert gpu04["reachable"] is False and gpu04["summary"]["failed"] is True  # it still fails the run
    assert gpu04["summary"]["counts"] == dict.fromkeys(report.STATUS_ORDER, 0)
    gpu03 = doc["hosts"][2]
    assert gpu03["summary"]["failed"] is False
    assert "boot.cmdline" in gpu03["summary"]["pending"]
    assert doc["run"]["fail_on"] == "high" and doc["run"]["playbook"] == "audit.yml"


def test_fail_on_threshold_changes_failing(demo_entries):
    high = document(demo_entries, "high")["hosts"][0]["summary"]["failing"]
    medium = document(demo_entries, "medium")["hosts"][0]["summary"]["failing"]
    critical = document(demo_entries, "critical")["hosts"][0]["summary"]["failing"]
    assert "kernel.version" not in high and "kernel.version" in medium
    assert critical == ["lxc.gpu_devices"]


def test_module_failure_is_unaudited_but_reachable(demo_entries):
    doc = document([MODULE_FAILED])
    host = doc["hosts"][0]
    assert host["reachable"] is True
    assert host["summary"]["failed"] is True and host["summary"]["verdict"] == "unaudited"
    assert doc["summary"]["failed_hosts"] == ["pve-gpu05"] and doc["summary"]["failing_hosts"] == []
    assert doc["summary"]["unaudited"] == {"pve-gpu05": MODULE_FAILED["error"]}


# -- junit.xml --------------------------------------------------------------------------------------------
def test_junit_one_testcase_per_host_and_check(demo_entries):
    doc = document(demo_entries + [UNREACHABLE])
    root = ET.fromstring(report.render_junit(doc).encode("utf-8"))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["pve-gpu01", "pve-gpu02", "pve-gpu03", "pve-gpu04"]
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite, host in zip(suites, doc["hosts"]):
        cases = suite.findall("testcase")
        statuses = [r["status"] for r in host["checks"]]
        if host["checks"]:
            assert [c.get("name") for c in cases] == [r["id"] for r in host["checks"]]
            assert {c.get("classname") for c in cases} == {host["host"]}
        else:
            assert [c.get("name") for c in cases] == ["audit"]
            statuses = ["error"]
        want = {"tests": len(statuses), "failures": statuses.count("fail"), "errors": statuses.count("error"),
                "skipped": statuses.count("skip") + statuses.count("pending")}
        got = {k: int(suite.get(k)) for k in want}
        assert got == want, host["host"]
        assert len(suite.findall("testcase/failure")) == want["failures"]
        assert len(suite.findall("testcase/error")) == want["errors"]
        assert len(suite.findall("testcase/skipped")) == want["skipped"]
        for key in total:
            total[key] += want[key]
    assert {k: int(root.get(k)) for k in total} == total


def test_junit_failure_carries_message_and_details(demo_entries):
    root = ET.fromstring(report.render_junit(document(demo_entries)).encode("utf-8"))
    case = root.find("testsuite[@name='pve-gpu01']/testcase[@name='pcie.mrrs']")
    failure = case.find("failure")
    assert failure.get("type") == "high"
    assert failure.get("message").startswith("[high] 8 of 8 GPUs below MaxReadReq 4096")
    assert "0000:e1:00.0" in failure.get("message")
    assert "remediation: Masked write of Device Control" in failure.text
    pending = root.find("testsuite[@name='pve-gpu03']/testcase[@name='boot.cmdline']/skipped")
    assert pending.get("message").startswith("pending: ")


def test_junit_unreachable_host_is_one_error(demo_entries):
    root = ET.fromstring(report.render_junit(document([UNREACHABLE])).encode("utf-8"))
    err = root.find("testsuite/testcase[@name='audit']/error")
    assert err.get("message") == "could not be audited: unreachable (%s)" % UNREACHABLE["error"]
    assert err.get("type") == "unaudited"
    assert root.get("errors") == "1" and root.get("tests") == "1"


def test_junit_survives_control_characters_and_markup():
    """Messages and evidence quote host files; XML 1.0 cannot carry C0 control characters."""
    res = evaluate({"errors": []}, merge_policy(None), only={"iommu.mode"})[0]
    res.update(status="fail", message='bad arg \x1b[31m<b>&"x"\x00', current="a\x0cb",
               evidence=["/proc/cmdline: ro quiet \x07 <x>"])
    root = ET.fromstring(report.render_junit(document([{"host": "h<1>&", "checks": [res]}])).encode("utf-8"))
    failure = root.find("testsuite/testcase/failure")
    assert failure.get("message") == '[medium] bad arg \\x1b[31m<b>&"x"\\x00'
    assert "/proc/cmdline: ro quiet \\x07 <x>" in failure.text
    assert "current: a\\x0cb" in failure.text
    assert root.find("testsuite").get("name") == "h<1>&"


# -- audit.html -----------------------------------------------------------------------------------------------
def test_html_parses_and_covers_every_host_and_check(demo_entries):
    doc = document(demo_entries + [UNREACHABLE])
    page = parse_html(report.render_html(doc))
    assert [i for i in page.ids if i.startswith("host-")] == [
        "host-pve-gpu01", "host-pve-gpu02", "host-pve-gpu03", "host-pve-gpu04"]
    text = "".join(page.text)
    for entry in demo_entries:
        for res in entry["checks"]:
            assert res["id"] in text
    checks = [attrs for tag, attrs, _ in page.elements if tag == "details" and attrs.get("id", "").startswith("check-")]
    assert len(checks) == 3 * len(CATALOGUE)
    # and the effective policies: each distinct one once (a host with the same policy links to it)
    policies = {json.dumps(e["policy"], sort_keys=True) for e in demo_entries}
    assert page.tags.count("details") == 3 * len(CATALOGUE) + len(policies)
    assert scripts(page) == [filter_script()]  # the filter's, and nothing else
    assert UNREACHABLE["error"] in text  # shown as text, escaped


def test_html_escapes_script_in_messages(demo_entries):
    entries = json.loads(json.dumps(demo_entries))
    res = entries[0]["checks"][0]
    res["message"] = "<script>alert('msg')</script>"
    res["evidence"] = ["</pre><script>alert('ev')</script>"]
    res["items"][0]["name"] = "<img src=x onerror=alert(1)>"
    res["current"] = '"><script>alert("cur")</script>'
    out = report.render_html(document(entries))
    page = parse_html(out)
    assert scripts(page) == [filter_script()] and "img" not in page.tags
    assert out.count("<script") == 1
    assert "&lt;script&gt;alert(&#x27;msg&#x27;)&lt;/script&gt;" in out
    text = "".join(page.text)
    assert "<script>alert('msg')</script>" in text
    assert "</pre><script>alert('ev')</script>" in text


def test_html_host_name_is_escaped_in_ids_and_links():
    entry = {"host": 'x"><script>alert(1)</script>', "checks": [], "error": "down"}
    out = report.render_html(document([entry]))
    page = parse_html(out)
    assert scripts(page) == [filter_script()]
    ids = [i for i in page.ids if not i.startswith("pvt-")]  # pvt-: the filter form's own
    assert ids == ["host-x:22:3e:3cscript:3ealert:281:29:3c:2fscript:3e"]  # id characters only
    assert page.hrefs == ["#" + ids[0]]
    assert 'x"><script>alert(1)</script>' in "".join(page.text)  # the name itself shown as text


# -- terminal table --------------------------------------------------------------------------------------------
def test_text_lists_failing_hosts(demo_entries):
    text = report.render_text(document(demo_entries + [UNREACHABLE]))
    lines = text.splitlines()
    assert lines[0].split()[:7] == ["HOST", "PASS", "FAIL", "WARN", "PENDING", "SKIP", "ERROR"]
    assert lines[0].endswith("FAILING (severity >= high)")
    # The counts are the entries' own (whatever checks the catalogue has); the failing list names the reference
    # host's known problems.
    row = next(line for line in lines if line.startswith("pve-gpu01 "))
    assert ("cpu.scaling_driver, cpu.cstates, cpu.boost, kernel.numa_balancing, pcie.mrrs, boot.cmdline, "
            "lxc.gpu_devices, lxc.resources, kernel.known_issues") in row
    assert row.split()[1:7] == status_counts(demo_entries[0])
    row2 = next(line for line in lines if line.startswith("pve-gpu02 "))
    assert row2.split()[1:8] == status_counts(demo_entries[1]) + ["-"]
    row4 = next(line for line in lines if line.startswith("pve-gpu04 "))
    assert row4.split()[1:7] == ["-"] * 6
    assert row4.split(None, 7)[7] == "could not be audited: unreachable (%s)" % UNREACHABLE["error"]
    assert lines[-1] == "4 hosts, 1 failing: pve-gpu01; 1 could not be audited: pve-gpu04"


def test_text_details_list_non_passing_checks_worst_first(demo_entries):
    text = report.render_text(document(demo_entries))
    block = text.split("\npve-gpu03:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    results = [line for line in block if not line.startswith("          fix: ")]
    # the one failure (GPU 3's leftover applications clocks), what waits for the reboot, then the CT's memlock
    assert results[0].startswith("  FAIL    gpu.clocks")
    assert all(line.startswith("  PENDING ") for line in results[1:-1])
    assert results[-1].startswith("  WARN    lxc.shm_memlock")
    assert any("boot.cmdline" in line and line.endswith("[reboot]") for line in results)
    gpu01 = [line for line in text.split("\npve-gpu01:\n", 1)[1].split("\n\n", 1)[0].splitlines()
             if not line.startswith("          fix: ")]
    assert gpu01[0].startswith("  FAIL    lxc.gpu_devices")  # critical first
    statuses = [line.split()[0] for line in gpu01]
    assert statuses == sorted(statuses, key=["FAIL", "ERROR", "PENDING", "WARN"].index) and "WARN" in statuses
    assert any(line.startswith("  WARN    pcie.link") for line in gpu01)
    assert "pve-gpu02:" not in text  # nothing to list for the clean host


def test_text_without_failures(demo_entries):
    text = report.render_text(document(demo_entries[1:2]), detail=False)
    assert text.splitlines()[-1] == "1 hosts, 0 failing: none"
    assert "PASS" in text.splitlines()[0] and len(text.splitlines()) == 4
