"""Drift: each host against its own previous audit under the report directory (report_drift), in audit.json,
audit.html, summary.md and the terminal summary.

The demo fleet is one host's life: pve-gpu01 before the fix, pve-gpu03 with the fix configured but not rebooted,
pve-gpu02 after the reboot; auditing a host as each in turn is a host that changed between audits."""
import datetime
import json
import os

import pytest
from ansible.module_utils.pvetune.report import write as report
from ansible.module_utils.pvetune.report import drift as report_drift
from reportutil import facts_result, load_schema, parse_html, text_of, validate

NOW = datetime.datetime(2026, 11, 29, 20, 6, 52, tzinfo=datetime.timezone.utc)
UNREACHABLE = {"unreachable": True, "changed": False, "msg": "Failed to connect to the host via ssh"}


@pytest.fixture(scope="module")
def schema():
    return load_schema()


def audit(dest, stamp, audits, **kwargs):
    out = report.write_reports(sorted(audits), audits, str(dest), "high", {"playbook": "audit.yml"},
                               timestamp=stamp, now=NOW, **kwargs)
    with open(os.path.join(out["report_dir"], "audit.json")) as handle:
        return out, json.load(handle)


# The checks one host's life is told by (a check added to the catalogue later changes nothing here).
LIFE = ("cpu.scaling_driver", "cpu.epp", "cpu.cstates", "kernel.numa_balancing", "pcie.mrrs", "pcie.link",
        "kernel.version", "boot.cmdline", "lxc.gpu_devices", "iommu.mode", "lxc.resources", "kernel.known_issues")


def life(host):
    """A demo host's registered audit with only the LIFE checks: a small document of this test's own."""
    result = facts_result(host)
    result["results"] = [r for r in result["results"] if r["id"] in LIFE]
    return result


def drift_of(doc, host):
    return next(h for h in doc["hosts"] if h["host"] == host)["drift"]


def ids(changes):
    return [c["id"] for c in changes]


def read(out, name):
    with open(os.path.join(out["report_dir"], name), encoding="utf-8") as handle:
        return handle.read()


def test_one_host_before_the_fix_configured_and_after_the_reboot(tmp_path, schema):
    _, first = audit(tmp_path, "20261101T000000Z", {"gpu": life("pve-gpu01")})
    validate(first, schema)
    assert drift_of(first, "gpu")["state"] == "first_audit" and drift_of(first, "gpu")["previous"] is None
    assert first["drift"]["first_audit_hosts"] == ["gpu"] and first["drift"]["runs_searched"] == 0

    out, second = audit(tmp_path, "20261102T000000Z", {"gpu": life("pve-gpu03")})
    validate(second, schema)
    drift = drift_of(second, "gpu")
    assert drift["state"] == "changed"
    assert drift["previous"] == {"report": "20261101T000000Z", "generated_at": "2026-11-29T20:06:52Z",
                                 "verdict": "fail"}
    # configured, waiting for the reboot: a fail turned pending is not fixed yet
    assert ids(drift["pending_appeared"]) == ["cpu.scaling_driver", "cpu.cstates", "kernel.version",
                                              "boot.cmdline", "iommu.mode", "kernel.known_issues"]
    assert {(c["was"], c["now"]) for c in drift["pending_appeared"]} == {("fail", "pending")}
    assert ids(drift["fixed"]) == ["kernel.numa_balancing", "pcie.mrrs", "lxc.gpu_devices", "lxc.resources"]
    assert drift["other_changes"] == [{"id": "pcie.link", "was": "warn", "now": "pass"}]
    assert drift["new_failures"] == drift["still_failing"] == drift["new_checks"] == drift["gone_checks"] == []
    assert drift["reboot_required"] is None  # needed before (the fixes), needed now (pending)
    assert second["drift"]["changed_hosts"] == ["gpu"] and second["drift"]["compared_with"] == ["20261101T000000Z"]

    text = out["summary_text"]
    line = next(x for x in text.splitlines() if x.startswith("  gpu "))
    assert line == ("  gpu  fixed: kernel.numa_balancing, pcie.mrrs, lxc.gpu_devices, lxc.resources; now pending: "
                    "cpu.scaling_driver, cpu.cstates, kernel.version, boot.cmdline, iommu.mode, kernel.known_issues; "
                    "changed: pcie.link (since 20261101T000000Z)")
    assert text.splitlines()[-1] == "1 hosts, 0 failing: none"  # the table's last line stays last

    _, third = audit(tmp_path, "20261103T000000Z", {"gpu": life("pve-gpu02")})
    drift = drift_of(third, "gpu")
    assert drift["previous"]["report"] == "20261102T000000Z"
    assert ids(drift["pending_cleared"]) == ["cpu.scaling_driver", "cpu.cstates", "kernel.version", "boot.cmdline",
                                             "iommu.mode", "kernel.known_issues"]
    assert {(c["was"], c["now"]) for c in drift["pending_cleared"]} == {("pending", "pass")}
    assert drift["other_changes"] == [{"id": "cpu.epp", "was": "skip", "now": "pass"}]
    assert drift["reboot_required"] == {"was": True, "now": False}

    _, fourth = audit(tmp_path, "20261104T000000Z", {"gpu": life("pve-gpu02")})
    assert drift_of(fourth, "gpu")["state"] == "unchanged"
    assert fourth["drift"]["unchanged_hosts"] == 1 and fourth["drift"]["changed_hosts"] == []


def test_a_regression_is_a_new_failure_and_a_failing_check_stays_failing(tmp_path):
    audit(tmp_path, "20261101T000000Z", {"gpu": facts_result("pve-gpu02")})
    _, doc = audit(tmp_path, "20261102T000000Z", {"gpu": facts_result("pve-gpu01")})
    drift = drift_of(doc, "gpu")
    failing = [r["id"] for r in doc["hosts"][0]["checks"] if r["status"] == "fail"]
    assert ids(drift["new_failures"]) == failing and len(failing) > 1
    assert drift["new_failures"][0] == {"id": "cpu.scaling_driver", "was": "pass", "now": "fail"}
    assert drift["reboot_required"] == {"was": False, "now": True}
    _, doc = audit(tmp_path, "20261103T000000Z", {"gpu": facts_result("pve-gpu01")})
    drift = drift_of(doc, "gpu")
    assert drift["state"] == "unchanged" and ids(drift["still_failing"]) == failing  # still failing is no change


def test_each_host_finds_its_own_previous_audit_across_limited_runs(tmp_path):
    audit(tmp_path, "20261101T000000Z", {"a": facts_result("pve-gpu01"), "b": facts_result("pve-gpu01")})
    audit(tmp_path, "20261102T000000Z", {"a": facts_result("pve-gpu03")})  # --limit a
    audit(tmp_path, "20261103T000000Z", {"c": facts_result("pve-gpu02")})  # --limit c
    _, doc = audit(tmp_path, "20261104T000000Z", {"a": facts_result("pve-gpu02"), "b": facts_result("pve-gpu03"),
                                                   "c": facts_result("pve-gpu02"), "d": facts_result("pve-gpu02")})
    assert drift_of(doc, "a")["previous"]["report"] == "20261102T000000Z"
    assert drift_of(doc, "b")["previous"]["report"] == "20261101T000000Z"
    assert drift_of(doc, "c")["state"] == "unchanged"
    assert drift_of(doc, "d")["state"] == "first_audit"
    assert ids(drift_of(doc, "b")["pending_appeared"])[0] == "cpu.scaling_driver"
    assert doc["drift"]["runs_searched"] == 3 and doc["drift"]["first_audit_hosts"] == ["d"]
    assert doc["drift"]["compared_with"] == ["20261101T000000Z", "20261102T000000Z", "20261103T000000Z"]


def test_a_run_that_could_not_audit_the_host_is_not_its_previous_audit(tmp_path, schema):
    audit(tmp_path, "20261101T000000Z", {"gpu": facts_result("pve-gpu01")})
    _, down = audit(tmp_path, "20261102T000000Z", {"gpu": UNREACHABLE})
    validate(down, schema)
    drift = drift_of(down, "gpu")
    assert drift["state"] == "unaudited" and drift["previous"]["report"] == "20261101T000000Z"  # last audited then
    _, doc = audit(tmp_path, "20261103T000000Z", {"gpu": facts_result("pve-gpu03")})
    assert drift_of(doc, "gpu")["previous"]["report"] == "20261101T000000Z"


def test_unusable_earlier_reports_are_notes_naming_the_file(tmp_path, schema):
    audit(tmp_path, "20261101T000000Z", {"gpu": facts_result("pve-gpu01")})
    broken = tmp_path / "20261102T000000Z"
    broken.mkdir()
    (broken / "audit.json").write_text('{"hosts": [{"host": "gpu", "checks": [')  # cut short
    other = tmp_path / "20261103T000000Z"
    other.mkdir()
    (other / "audit.json").write_text(json.dumps({"schema_version": 2, "hosts": [{"host": "gpu"}]}))
    odd = tmp_path / "20261104T000000Z"
    odd.mkdir()
    (odd / "audit.json").write_text(json.dumps({"schema_version": 1, "hosts": [{"host": "gpu", "checks": [{}]}]}))
    unreadable = tmp_path / "20261105T000000Z"
    (unreadable / "audit.json").mkdir(parents=True)  # reading it fails (EISDIR), as an unreadable file would
    (tmp_path / "20261106T000000Z").mkdir()  # a run that wrote nothing: not a note
    (tmp_path / "notes.txt").write_text("not a run")
    out, doc = audit(tmp_path, "20261107T000000Z", {"gpu": facts_result("pve-gpu03")})
    validate(doc, schema)
    drift = drift_of(doc, "gpu")
    assert drift["previous"]["report"] == "20261101T000000Z"  # the newest one that could be used
    notes = doc["drift"]["notes"]
    assert len(notes) == 4
    assert notes[0].startswith("%s could not be read (" % (unreadable / "audit.json"))
    assert notes[1] == ("%s is not a pvetune audit.json of schema_version 1 (hosts[0].checks[0] has no id or "
                        "status): skipped" % (odd / "audit.json"))
    assert notes[2] == ("%s is not a pvetune audit.json of schema_version 1 (schema_version is 2, not 1): skipped"
                        % (other / "audit.json"))
    assert notes[3].startswith("%s is not a pvetune audit.json of schema_version 1 (Expecting" % (
        broken / "audit.json"))
    assert drift["notes"] == notes[1:]  # the ones that named this host
    assert "  note: %s" % notes[2] in out["summary_text"].splitlines()
    page = parse_html(read(out, "audit.html"))
    assert "note: %s" % notes[2] in [text_of(a) for t, a, _ in page.elements if t == "p"]
    assert "- note: " in read(out, "summary.md")


def test_run_directories_are_ordered_by_time_then_suffix():
    names = ["20261101T000000Z-10", "latest", "20261101T000000Z", "20261101T000000Z-2", "x", "20261031T235959Z",
             "20261102T000000Z"]
    assert report_drift.earlier_runs(names, "20261101T000000Z-10") == [
        "20261101T000000Z-2", "20261101T000000Z", "20261031T235959Z"]
    assert report_drift.earlier_runs(names, "20261101T000000Z") == ["20261031T235959Z"]


def test_the_search_is_bounded(tmp_path):
    for day in range(1, 5):
        audit(tmp_path, "202611%02dT000000Z" % day, {"other": facts_result("pve-gpu02")})
    prev = report_drift.read_previous(str(tmp_path), "20261105T000000Z", ["other"], limit=2)
    assert prev["runs_searched"] == 1 and list(prev["found"]) == ["other"]  # stops once every host is found...
    assert prev["notes"] == []
    prev = report_drift.read_previous(str(tmp_path), "20261105T000000Z", ["gpu"], limit=2)
    assert prev["runs_searched"] == 2 and prev["found"] == {}  # ...and after `limit` runs, saying so
    assert prev["notes"] == ["only the 2 most recent earlier runs of %s were searched" % tmp_path]
    assert report_drift.read_previous(str(tmp_path / "none"), "20261105T000000Z", ["gpu"])["found"] == {}


def test_compare_puts_each_check_in_one_category():
    before = {"a": "pass", "b": "fail", "c": "fail", "d": "pending", "e": "pass", "f": "fail", "g": "warn",
              "h": "error", "i": "pending", "gone": "pass", "same": "skip"}
    now = {"a": "fail", "b": "pass", "c": "error", "d": "pass", "e": "pending", "f": "warn", "g": "pass",
           "h": "fail", "i": "fail", "new": "fail", "same": "skip"}
    out = report_drift.compare(before, now)
    flat = {c["id"]: key for key, changes in out.items() for c in changes}
    assert flat == {"a": "new_failures", "i": "new_failures", "b": "fixed", "c": "still_failing",
                    "h": "still_failing", "d": "pending_cleared", "e": "pending_appeared", "f": "other_changes",
                    "g": "other_changes", "new": "new_checks", "gone": "gone_checks"}
    assert out["gone_checks"] == [{"id": "gone", "was": "pass", "now": None}]
    assert out["new_checks"] == [{"id": "new", "was": None, "now": "fail"}]


def test_a_document_without_drift_renders_as_before():
    doc = report.build_document([report.entry_from_audit("gpu", facts_result("pve-gpu02"))])
    assert "drift" not in doc
    assert "Since the last audit" not in report.render_text(doc)
    assert "Since the last audit" not in report.render_html(doc)
    assert "Since the last audit" not in report.render_markdown(doc)


def test_check_mode_compares_and_writes_nothing(tmp_path):
    audit(tmp_path, "20261101T000000Z", {"gpu": facts_result("pve-gpu01")})
    out = report.write_reports(["gpu"], {"gpu": facts_result("pve-gpu02")}, str(tmp_path), "high", {},
                               timestamp="20261102T000000Z", now=NOW, check_mode=True)
    assert "  gpu  fixed: " in out["summary_text"]
    assert sorted(os.listdir(str(tmp_path))) == ["20261101T000000Z", "latest"]
