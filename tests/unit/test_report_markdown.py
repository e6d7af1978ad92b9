"""summary.md: the fleet verdict and counts, the failing hosts with their failing checks and the document's own fix
commands, the hosts that could not be audited, what changed since the last audit; short, deterministic, and every
host text escaped."""
import datetime
import json
import os
import re

from ansible.module_utils.pvetune.report import write as report
from ansible.module_utils.pvetune.report import markdown as report_markdown
from reportutil import (DEMO_HOSTS, GENERATED_AT, MODULE_FAILED, UNREACHABLE, demo_entries, document, facts_result,
                        fleet_entries)

NOW = datetime.datetime(2026, 11, 29, 20, 6, 52, tzinfo=datetime.timezone.utc)


def test_the_demo_summary(tmp_path):
    first = {"pve-gpu01": facts_result("pve-gpu01"), "pve-gpu02": facts_result("pve-gpu03")}
    report.write_reports(sorted(first), first, str(tmp_path), "high", {"inventory": ["inventory/demo"]},
                         timestamp="20261101T000000Z", now=NOW)
    audits = {"pve-gpu01": facts_result("pve-gpu01"), "pve-gpu02": facts_result("pve-gpu02"),
              "pve-gpu04": facts_result("pve-gpu04"), "down": {"unreachable": True, "msg": "ssh: timed out"}}
    out = report.write_reports(sorted(audits), audits, str(tmp_path), "high", {"inventory": ["inventory/demo"]},
                               timestamp="20261102T000000Z", now=NOW)
    with open(os.path.join(out["report_dir"], "summary.md"), encoding="utf-8") as handle:
        text = handle.read()
    with open(os.path.join(out["report_dir"], "audit.json"), encoding="utf-8") as handle:
        doc = json.load(handle)
    assert report.render_markdown(doc) == text  # from the document alone
    lines = text.splitlines()
    assert lines[0] == "# pvetune audit 2026-11-29T20:06:52Z: FAIL"
    counts = doc["summary"]["counts"]
    assert lines[2] == ("4 hosts: 2 failing (severity >= high), 1 could not be audited, 1 pass. Checks: %d fail, "
                        "%d error, %d pending, %d warn, %d pass, %d skip." % tuple(
                            counts[s] for s in ("fail", "error", "pending", "warn", "pass", "skip")))
    assert lines[3] == "Reboot required: pve-gpu01, pve-gpu04."
    hosts = {h["host"]: h for h in doc["hosts"]}
    for name in ("pve-gpu01", "pve-gpu04"):
        host = hosts[name]
        assert "- **%s**: %d failing" % (name, len(host["summary"]["failing"])) in lines
        for cid in host["summary"]["failing"]:
            res = next(r for r in host["checks"] if r["id"] == cid)
            assert any(x.startswith("  - `%s` %s (%s): " % (cid, res["status"], res["severity"])) for x in lines)
        # each distinct fix command of the failing checks once, naming the checks it fixes
        commands = {r["fix_command"] for r in host["checks"] if r["id"] in host["summary"]["failing"]
                    and r["fix_command"]}
        shown = [x for x in lines if x.startswith("  - fix ") and "-l %s " % name in x]
        assert sorted(re.search(r": `(.*)`$", x).group(1) for x in shown) == sorted(commands)
    assert "  - not fixed by pvetune (see audit.html): `lxc.resources`, `nvidia.stack`, `gpu.health`" in lines  # 04
    assert lines[lines.index("## Could not be audited") + 2] == "- **down**: unreachable (ssh: timed out)"
    since = lines[lines.index("## Since the last audit") + 2:]
    assert since[0].startswith("- **pve-gpu02** (since 20261101T000000Z): fixed: `gpu.clocks`; no longer pending: "
                               "`cpu.scaling_driver`")
    assert since[1:] == ["- first audit: pve-gpu04", "- unchanged: 1 host"]
    assert len(text) < 6000


def test_a_passing_fleet_is_a_few_lines():
    (entry,) = [e for e in demo_entries() if e["host"] == "pve-gpu02"]
    passed, skipped = (sum(1 for r in entry["checks"] if r["status"] == s) for s in ("pass", "skip"))
    assert passed + skipped == len(entry["checks"])  # the host after the fix: nothing else
    text = report.render_markdown(document([entry]))
    assert text == ("# pvetune audit %s: PASS\n\n1 hosts: 0 failing (severity >= high), 0 could not be audited, "
                    "1 pass. Checks: 0 fail, 0 error, 0 pending, 0 warn, %d pass, %d skip.\n"
                    % (GENERATED_AT, passed, skipped))


def test_host_texts_are_escaped():
    entries = json.loads(json.dumps(demo_entries()))
    res = next(r for r in entries[0]["checks"] if r["id"] == "pcie.mrrs")
    res["message"] = "*all* [GPUs](http://x) <script>alert(1)</script> | `x` _y_ intel_idle &amp;"
    entries[0]["host"] = "host_*1*"
    broken = dict(MODULE_FAILED, error="bad | value `v`")
    text = report.render_markdown(document(entries + [UNREACHABLE, broken]))
    assert ("  - `pcie.mrrs` fail (high): \\*all\\* \\[GPUs\\](http://x) \\<script\\>alert(1)\\</script\\> \\| "
            "\\`x\\` \\_y\\_ intel_idle \\&amp;") in text
    assert "- **host\\_\\*1\\***: " in text
    assert "- **pve-gpu05**: bad \\| value \\`v\\`" in text
    assert "<script>" not in text


def test_code_spans_hold_any_backticks():
    assert report_markdown.md_code("a") == "`a`"
    assert report_markdown.md_code("a `b` c") == "``a `b` c``"
    assert report_markdown.md_code("`a``") == "``` `a`` ```"


def test_a_large_failing_fleet_stays_short():
    doc = report.build_document(fleet_entries(80), generated_at=GENERATED_AT)
    text = report.render_markdown(doc)
    failing = doc["summary"]["failing_hosts"]
    # host i is audited like demo host i mod 5: those whose demo host fails a high check (today 01, 04, 05)
    fails = [any(r["status"] == "fail" and r["severity"] in ("critical", "high") for r in facts_result(h)["results"])
             for h in DEMO_HOSTS]
    assert failing == ["pve-gpu%03d" % (i + 1) for i in range(80) if fails[i % len(DEMO_HOSTS)]]
    assert len(failing) > report_markdown.MAX_HOSTS + 30
    shown = [x for x in text.splitlines() if x.startswith("- **")]
    assert [x.split("**")[1] for x in shown] == failing[:report_markdown.MAX_HOSTS]
    rest = failing[report_markdown.MAX_HOSTS:]
    assert "- ... and %d more: %s (+%d more)" % (len(rest), ", ".join(rest[:30]), len(rest) - 30) in text
    assert text.count("Reboot required: ") == 1 and "(+" in text.split("Reboot required: ")[1].splitlines()[0]
    assert len(text) < 18500  # 17.6 KB: ten hosts in full (their fix commands the most of it), then names
