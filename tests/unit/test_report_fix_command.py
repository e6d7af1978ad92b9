"""The fix command of a check on a host: derived by the report from the catalogue (fix_tags, reboot) and the
run's inventory sources, never written into the catalogue's remediation texts (copied as they were, those acted
on every host of the default inventory)."""
import json
import shlex

import pytest
from ansible.module_utils.pvetune.report import write as report
from ansible.module_utils.pvetune.core.catalogue import CATALOGUE, fix_needs_reboot, fix_tags
from reportutil import INVENTORY, demo_entries, document, load_schema, parse_html, text_of, validate

SOURCES = ["/srv/pvetune/inventory/prod", "inventory/extra hosts.yml"]


def live_entries():
    """The demo hosts as if audited live (root /): the commands name the audit's inventory."""
    return [dict(e, root="/") for e in demo_entries()]


@pytest.fixture(scope="module")
def doc():
    return document(live_entries(), inventory=SOURCES)


def test_a_snapshot_audit_names_the_live_inventory_not_the_snapshot_one():
    snap = document(demo_entries(), inventory=SOURCES)  # roots: demo/snapshots/<host>
    assert checks_of(snap, "pve-gpu01")["pcie.mrrs"]["fix_command"] == (
        "ansible-playbook -i '<inventory of the live host>' fix.yml -l pve-gpu01 --tags pcie")


def test_a_custom_host_pattern_and_fix_inventory_are_named():
    doc = report.build_document(live_entries(), run={"hosts_pattern": "rack7", "inventory": ["/tmp/awx_inv"],
                                                     "fix_inventory": ["inventory/prod"]})
    assert checks_of(doc, "pve-gpu01")["pcie.mrrs"]["fix_command"] == (
        "ansible-playbook -i inventory/prod fix.yml -l pve-gpu01 --tags pcie -e pvetune_hosts=rack7")


def checks_of(doc, host):
    return {c["id"]: c for h in doc["hosts"] if h["host"] == host for c in h["checks"]}


def test_the_catalogue_remediations_name_no_command():
    for entry in CATALOGUE:
        assert "ansible-playbook" not in entry["remediation"] and "fix.yml" not in entry["remediation"], entry["id"]


def test_fix_tags_come_from_the_catalogue():
    fix_role_tags = {c["fix_tag"] for c in CATALOGUE if c["fix_tag"]}  # test_concern_tags holds the role to these
    for entry in CATALOGUE:
        tags = fix_tags(entry["id"])
        assert tags == (list(entry["fix_tags"]) if "fix_tags" in entry else [entry["fix_tag"]] * bool(entry["fix_tag"]))
        assert set(tags) <= fix_role_tags, entry["id"]
        assert (entry["fix_tag"] in tags) == bool(entry["fix_tag"]), entry["id"]
    assert fix_tags("cpu.scaling_driver") == ["cpu", "cmdline"]
    assert fix_tags("cpu.cstates") == ["cmdline", "cpu"]
    assert fix_tags("pcie.link") == []


@pytest.mark.parametrize("check_id,asked,needed", [
    ("kernel.version", False, True), ("boot.cmdline", False, True), ("cpu.cstates", False, True),  # reboot: yes
    ("cpu.scaling_driver", True, True), ("cpu.scaling_driver", False, False),  # when the driver is not loaded
    ("kernel.numa_balancing", True, False), ("lxc.gpu_devices", False, False),  # reboot: no
])
def test_fix_needs_reboot(check_id, asked, needed):
    assert fix_needs_reboot(check_id, asked) is needed


def test_commands_of_the_failing_demo_host(doc):
    checks = checks_of(doc, "pve-gpu01")
    inv = "-i /srv/pvetune/inventory/prod -i 'inventory/extra hosts.yml'"
    assert checks["lxc.gpu_devices"]["fix_command"] == (
        "ansible-playbook %s fix.yml -l pve-gpu01 --tags lxc" % inv)
    assert checks["kernel.version"]["fix_command"] == (
        "ansible-playbook %s fix.yml -l pve-gpu01 --tags kernel -e pvetune_reboot_ok=true" % inv)
    # pve-gpu01 runs acpi-cpufreq: the driver needs the boot argument, so the fix reboots.
    assert checks["cpu.scaling_driver"]["reboot_required"] is True
    assert checks["cpu.scaling_driver"]["fix_command"] == (
        "ansible-playbook %s fix.yml -l pve-gpu01 --tags cpu,cmdline -e pvetune_reboot_ok=true" % inv)
    assert checks["kernel.numa_balancing"]["fix_command"] == (
        "ansible-playbook %s fix.yml -l pve-gpu01 --tags sysctl" % inv)
    assert checks["pcie.link"]["status"] == "warn" and checks["pcie.link"]["fix_command"] is None  # no pvetune fix


def test_only_results_with_something_to_fix_have_a_command(doc):
    seen = set()
    for host in doc["hosts"]:
        for res in host["checks"]:
            # A result can say pvetune's fix does not answer for it (fix_tag "": lxc.resources' CPU counts, memory).
            wanted = (res["status"] in ("fail", "warn", "pending", "error") and bool(fix_tags(res["id"]))
                      and res["fix_tag"] != "")
            assert (res["fix_command"] is not None) == wanted, (host["host"], res["id"], res["status"])
            if res["fix_command"]:
                argv = shlex.split(res["fix_command"])
                assert argv[argv.index("-l") + 1] == host["host"]
                assert argv[argv.index("--tags") + 1] == ",".join(fix_tags(res["id"]))
                seen.add(res["status"])
    # the demo's pending checks (pve-gpu03) are fixed by a reboot; pve-gpu01's HMM warning is not pvetune's to fix
    # there (policy nvidia_uvm_hmm_fix is off in the demo)
    assert seen == {"fail", "pending"}
    gpu03 = checks_of(doc, "pve-gpu03")
    assert gpu03["boot.cmdline"]["fix_command"].endswith("--tags cmdline -e pvetune_reboot_ok=true")


def test_every_inventory_source_is_one_quoted_argument(doc):
    argv = shlex.split(checks_of(doc, "pve-gpu01")["pcie.mrrs"]["fix_command"])
    assert argv == ["ansible-playbook", "-i", SOURCES[0], "-i", SOURCES[1], "fix.yml", "-l", "pve-gpu01",
                    "--tags", "pcie"]


def test_no_inventory_no_i():
    doc = document(live_entries(), inventory=[])
    assert checks_of(doc, "pve-gpu01")["pcie.mrrs"]["fix_command"] == (
        "ansible-playbook fix.yml -l pve-gpu01 --tags pcie")
    single = report.build_document(live_entries(), run={"inventory": "/etc/ansible/hosts"})  # one source as a string
    assert checks_of(single, "pve-gpu01")["pcie.mrrs"]["fix_command"].startswith(
        "ansible-playbook -i /etc/ansible/hosts fix.yml")


def test_host_names_and_sources_are_shell_quoted():
    res = dict(checks_of(document(live_entries()), "pve-gpu01")["pcie.mrrs"])
    cmd = report.fix_command("gpu$(reboot); x", res, ["inv`id`.yml"])
    assert shlex.split(cmd) == ["ansible-playbook", "-i", "inv`id`.yml", "fix.yml", "-l", "gpu$(reboot); x",
                                "--tags", "pcie"]
    assert "'gpu$(reboot); x'" in cmd


def test_the_per_host_remediation_text_still_comes_from_the_cpu_profile(doc):
    res = checks_of(doc, "pve-gpu01")["cpu.scaling_driver"]
    assert res["remediation"].startswith("Add amd_pstate=active to the kernel command line")
    assert "echo active > /sys/devices/system/cpu/amd_pstate/status" in res["remediation"]
    assert "{" not in res["remediation"] and "fix.yml" not in res["remediation"]


def test_the_command_is_in_the_json_html_and_text(doc):
    validate(json.loads(report.render_json(doc)), load_schema())
    commands = {c["fix_command"] for c in checks_of(doc, "pve-gpu01").values() if c["fix_command"]}
    assert len(commands) == 8      # cpu.boost: --tags cpu alone (cpu.scaling_driver needs cmdline,cpu)

    page = parse_html(report.render_html(doc))
    shown = set()
    for tag, attrs, inside in page.elements:
        owner = next((a.get("id", "") for t, a in reversed(inside) if t == "details"), "")
        if tag == "code" and inside[-1][0] == "dd" and owner.startswith("check-pve-gpu01::"):
            text = text_of(attrs)
            if text.startswith("ansible-playbook"):
                shown.add(text)
    assert shown == commands

    lines = report.render_text(doc).splitlines()
    assert {line[len("          fix: "):] for line in lines if line.startswith("          fix: ")
            and "-l pve-gpu01 " in line} == commands


def test_inventory_as_the_playbook_passes_it():
    doc = document(live_entries(), inventory=None)
    assert checks_of(doc, "pve-gpu01")["pcie.mrrs"]["fix_command"] == (
        "ansible-playbook -i %s fix.yml -l pve-gpu01 --tags pcie" % INVENTORY[0])
