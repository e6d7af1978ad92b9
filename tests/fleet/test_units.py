"""pvetune's boot-time re-application: installed, enabled, ordered before the guests, and run at this boot."""
import json
import posixpath

import pytest
from ansible.module_utils.pvetune.boot.units import SUBCOMMANDS

HELPER = "/usr/local/sbin/pvetune-boot"
# Units fix.yml installs only where the policy opts in (boot.yml): subcommand -> policy key.
OPT_IN = {"gpu-power": "gpu_power_fix"}
RUNTIME_MANIFEST = "/usr/local/lib/pvetune/MANIFEST.json"


def test_runtime_library_matches_its_manifest(fleet):
    """The helper runs the library the fix installed: every file MANIFEST.json lists is there, unchanged."""
    doc = json.loads(fleet.read(RUNTIME_MANIFEST))
    entries = doc.get("files") if isinstance(doc, dict) else None
    assert isinstance(entries, list) and entries, "%s lists no files" % RUNTIME_MANIFEST
    listed = {e["path"]: e["sha256"] for e in entries}
    assert HELPER in listed and any(p.endswith("/boot/helper.py") for p in listed), (
        "%s does not list the helper and the boot helper module" % RUNTIME_MANIFEST)
    paths = sorted(listed)
    out = fleet.run("sha256sum -- " + " ".join(["%s"] * len(paths)), *[fleet.path(p) for p in paths])
    found = {}
    for line in out.stdout.splitlines():
        digest, _, path = line.partition("  ")
        found[path if fleet.live else "/" + path[len(fleet.root):].lstrip("/")] = digest
    bad = ["%s (%s)" % (p, "missing" if p not in found else "sha256 %s, installed %s" % (found[p], listed[p]))
           for p in paths if found.get(p) != listed[p]]
    assert bad == [], "runtime library differs from %s (fix.yml re-installs it): %s" % (
        RUNTIME_MANIFEST, "; ".join(bad))


def opted_out(fleet, policy, sub):
    """True for a unit the policy leaves out; it must then not be installed at all."""
    if sub in OPT_IN and not policy[OPT_IN[sub]]:
        unit = "/etc/systemd/system/pvetune-%s.service" % sub
        assert not fleet.exists(unit), "%s is installed although policy %s is off" % (unit, OPT_IN[sub])
        return True
    return False


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_boot_unit_installed_and_enabled(fleet, policy, sub):
    unit = "pvetune-%s.service" % sub
    if opted_out(fleet, policy, sub):
        return
    text = fleet.read("/etc/systemd/system/" + unit)
    lines = [line.strip() for line in text.splitlines()]
    assert "Before=pve-guests.service" in lines, "%s is not ordered before pve-guests.service" % unit
    assert "ExecStart=%s %s" % (HELPER, sub) in lines, "%s does not run %s %s" % (unit, HELPER, sub)
    helper = fleet.host.file(fleet.path(HELPER))
    assert helper.exists and helper.mode & 0o111, "%s is missing or not executable" % HELPER
    config = fleet.read("/etc/pvetune/%s.json" % sub)
    assert isinstance(json.loads(config), dict), "/etc/pvetune/%s.json is not a JSON object" % sub
    link = fleet.host.file(fleet.path("/etc/systemd/system/multi-user.target.wants/" + unit))
    assert link.is_symlink, "%s is not enabled (no multi-user.target.wants link)" % unit
    target = link.linked_to
    if not fleet.live:
        target = "/" + target[len(fleet.root):].lstrip("/") if target.startswith(fleet.root) else target
    assert posixpath.normpath(target) == "/etc/systemd/system/" + unit, "%s links to %s" % (unit, link.linked_to)
    if fleet.live:
        assert fleet.run("systemctl is-enabled %s", unit).stdout.strip() == "enabled"


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_boot_unit_ran_at_this_boot(fleet, policy, sub):
    """On a live host systemd runs the unit; for a tree, only when this machine's systemd loads it
    (the Molecule host containers generate their units from the tree's)."""
    unit = "pvetune-%s.service" % sub
    if opted_out(fleet, policy, sub):
        pytest.skip("policy %s is off: no %s" % (OPT_IN[sub], unit))
    out = fleet.run("systemctl show -p LoadState -p ActiveState -p Result %s", unit).stdout
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    if props.get("LoadState") != "loaded":
        if fleet.live:
            pytest.fail("%s is not loaded (LoadState=%s)" % (unit, props.get("LoadState")))
        pytest.skip("this machine's systemd does not run the tree's %s" % unit)
    assert (props.get("ActiveState"), props.get("Result")) == ("active", "success"), (
        "%s: ActiveState=%s Result=%s (journalctl -b -u %s)" % (unit, props.get("ActiveState"), props.get("Result"),
                                                                unit))
