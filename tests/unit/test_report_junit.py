"""junit.xml: a warn is visible to a dashboard (properties, and a failure when junit_warn_as_failure asks), a
pending result keeps its whole message, the suites are timed and stamped, and the file keeps to the JUnit
structure CI servers read (the attributes and elements of the Ant JUnit report format that Jenkins, GitLab and
pytest's junitxml use, written out below)."""
import datetime
import re
import xml.etree.ElementTree as ET

import pytest
from ansible.module_utils.pvetune.report import write as report
from reportutil import GENERATED_AT, MODULE_FAILED, UNREACHABLE, demo_entries, document

# element -> (allowed attributes, required attributes, allowed child elements)
JUNIT = {
    "testsuites": ({"name", "tests", "failures", "errors", "skipped", "time", "timestamp"},
                   {"tests", "failures", "errors"}, {"testsuite"}),
    "testsuite": ({"name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname", "id",
                   "package"}, {"name", "tests", "failures", "errors"}, {"properties", "testcase", "system-out",
                                                                         "system-err"}),
    "testcase": ({"name", "classname", "time", "file", "line"}, {"name", "classname"},
                 {"properties", "failure", "error", "skipped", "system-out", "system-err"}),
    "properties": (set(), set(), {"property"}),
    "property": ({"name", "value"}, {"name", "value"}, set()),
    "failure": ({"message", "type"}, {"message", "type"}, set()),
    "error": ({"message", "type"}, {"message"}, set()),
    "skipped": ({"message"}, set(), set()),
    "system-out": (set(), set(), set()),
    "system-err": (set(), set(), set()),
}
COUNTS = ("tests", "failures", "errors", "skipped")
ISO8601 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$")


def check_structure(root):
    """Every element and attribute is one the JUnit format has; counts and times are numbers that add up."""
    assert root.tag == "testsuites"
    for elem in root.iter():
        allowed, required, children = JUNIT[elem.tag]
        assert set(elem.attrib) <= allowed, (elem.tag, set(elem.attrib) - allowed)
        assert required <= set(elem.attrib), (elem.tag, required - set(elem.attrib))
        assert {c.tag for c in elem} <= children, (elem.tag, {c.tag for c in elem} - children)
        for key in COUNTS:
            if key in elem.attrib:
                assert re.fullmatch(r"\d+", elem.get(key)), (elem.tag, key, elem.get(key))
        if "time" in elem.attrib:
            assert float(elem.get("time")) >= 0
        if "timestamp" in elem.attrib:
            assert ISO8601.match(elem.get("timestamp")), elem.get("timestamp")
    for case in root.iter("testcase"):
        outcomes = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        assert len(outcomes) <= 1, outcomes
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == len(suite.findall("testcase/failure"))
        assert int(suite.get("errors")) == len(suite.findall("testcase/error"))
        assert int(suite.get("skipped")) == len(suite.findall("testcase/skipped"))
    for key in COUNTS:
        assert int(root.get(key)) == sum(int(s.get(key)) for s in root.iter("testsuite"))


def junit(doc, **kwargs):
    return ET.fromstring(report.render_junit(doc, **kwargs).encode("utf-8"))


@pytest.fixture(scope="module")
def doc():
    return document(demo_entries() + [UNREACHABLE, MODULE_FAILED])


@pytest.mark.parametrize("warn_as_failure", [False, True])
def test_the_file_keeps_to_the_junit_structure(doc, warn_as_failure):
    check_structure(junit(doc, warn_as_failure=warn_as_failure))


def test_every_testcase_names_its_status_and_severity(doc):
    root = junit(doc)
    for host in doc["hosts"]:
        if not host["checks"]:
            continue
        for res in host["checks"]:
            case = root.find("testsuite[@name='%s']/testcase[@name='%s']" % (host["host"], res["id"]))
            props = {p.get("name"): p.get("value") for p in case.findall("properties/property")}
            assert props == {"pvetune.status": res["status"], "pvetune.severity": res["severity"]}


def test_a_warn_passes_by_default_but_says_warn(doc):
    case = junit(doc).find("testsuite[@name='pve-gpu01']/testcase[@name='pcie.link']")
    assert case.find("failure") is None and case.find("skipped") is None
    assert case.find("properties/property[@name='pvetune.status']").get("value") == "warn"
    assert case.find("system-out").text.startswith("warn: current: ")


def test_junit_warn_as_failure_makes_a_warn_a_failure(doc):
    plain, strict = junit(doc), junit(doc, warn_as_failure=True)
    warns = sum(1 for h in doc["hosts"] for r in h["checks"] if r["status"] == "warn")
    gpu01_warns = sum(1 for h in doc["hosts"] if h["host"] == "pve-gpu01" for r in h["checks"] if r["status"] == "warn")
    assert warns >= gpu01_warns >= 1
    failure = strict.find("testsuite[@name='pve-gpu01']/testcase[@name='pcie.link']/failure")
    assert failure.get("type") == "warn"
    assert failure.get("message").startswith("[medium] warn: 6 of 8 GPUs below capable speed")
    assert "expected: LnkSta speed and width equal to LnkCap" in failure.text
    assert int(strict.get("failures")) == int(plain.get("failures")) + warns
    suite = strict.find("testsuite[@name='pve-gpu01']")
    assert int(suite.get("failures")) == int(plain.find("testsuite[@name='pve-gpu01']").get("failures")) + gpu01_warns
    # A real failure still says its severity.
    assert strict.find("testsuite[@name='pve-gpu01']/testcase[@name='pcie.mrrs']/failure").get("type") == "high"


def test_a_pending_result_keeps_its_whole_message(doc):
    res = next(c for h in doc["hosts"] if h["host"] == "pve-gpu03" for c in h["checks"]
               if c["id"] == "cpu.scaling_driver")
    assert res["status"] == "pending" and len(res["message"]) > 150  # longer than the old cut (150)
    skipped = junit(doc).find("testsuite[@name='pve-gpu03']/testcase[@name='cpu.scaling_driver']/skipped")
    assert skipped.get("message") == "pending: " + res["message"]
    assert res["message"] in skipped.text
    assert "fix: " + res["fix_command"] in skipped.text


def test_suites_carry_time_timestamp_and_hostname(doc):
    root = junit(doc)
    assert root.get("timestamp") == GENERATED_AT
    for suite in root.findall("testsuite"):
        assert suite.get("timestamp") == GENERATED_AT
        assert suite.get("hostname") == suite.get("name")
        assert suite.get("time") == "0.000"  # these synthetic entries carry no duration
    assert datetime.datetime.strptime(root.get("timestamp"), "%Y-%m-%dT%H:%M:%SZ")


def test_a_facts_result_with_a_duration_times_its_suite():
    entries = demo_entries()
    timed = report.entry_from_audit("pve-gpu09", {"results": entries[1]["checks"], "duration": 2.5})
    bogus = report.entry_from_audit("pve-gpu10", {"results": entries[1]["checks"], "duration": "soon"})
    root = junit(document([timed, bogus]))
    assert root.find("testsuite[@name='pve-gpu09']").get("time") == "2.500"
    assert root.find("testsuite[@name='pve-gpu10']").get("time") == "0.000"
    assert root.get("time") == "2.500"


def test_a_document_without_generated_at_has_no_timestamp():
    root = junit(report.build_document(demo_entries()[1:2]))
    assert "timestamp" not in root.attrib and "timestamp" not in root.find("testsuite").attrib
    check_structure(root)


def test_an_unaudited_host_is_one_error_with_the_reason(doc):
    root = junit(doc)
    reasons = {"pve-gpu04": "unreachable (%s)" % UNREACHABLE["error"], "pve-gpu05": MODULE_FAILED["error"]}
    for name, reason in reasons.items():
        suite = root.find("testsuite[@name='%s']" % name)
        (case,) = suite.findall("testcase")
        assert case.get("name") == "audit"
        assert case.find("error").get("type") == "unaudited"
        assert case.find("error").get("message") == "could not be audited: " + reason
        assert case.find("error").text == "could not be audited: " + reason
