"""pve-gpu02's "after the fix" state against the code that writes it, and the installed runtime's manifest.

scripts/demo_fleet.py writes what the fix leaves on pve-gpu02 (units, /etc/pvetune/*.json, the sysctl
drop-in, the NVIDIA majors state) as literal text, so that a fix run compared with pve-gpu02 can fail.
These tests run pvetune's real renderers and compare them with the generated demo files: a change on
either side shows up here first.  The runtime library on pve-gpu02 is what the real installer writes
(scratch_host.install_runtime): the second half tests that installer.
"""
import hashlib
import json
import os
import re
import sys

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.module_utils.pvetune.boot import units as bootunits
from ansible.module_utils.pvetune.core.changeset import ChangeSet
from ansible.module_utils.pvetune.core.fsroot import FsRoot
from ansible.module_utils.pvetune.core.policy import merge_policy
from modharness import run_module

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(TOP, "demo", "snapshots")
GPU02 = os.path.join(DEMO, "pve-gpu02")
sys.path.insert(0, os.path.join(TOP, "scripts"))
import scratch_host  # noqa: E402

REGENERATE = "the demo fleet is older than module_utils: scripts/demo_fleet.py --ensure"


def demo_file(path, host="pve-gpu02"):
    with open(os.path.join(DEMO, host, path.lstrip("/")), "rb") as handle:
        return handle.read().decode("utf-8")


@pytest.fixture(scope="module")
def policy():
    with open(os.path.join(TOP, "inventory", "demo", "group_vars", "gpu_hosts.yml")) as handle:
        return merge_policy(yaml.safe_load(handle)["pvetune_policy"])


def _trusted(value):
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    return trust_as_template(value) if isinstance(value, str) else value


def boot_configs(policy):
    """What roles/pvetune_fix's boot task passes to pvetune_runtime for the demo inventory: the task's own
    ``configs`` templated by Ansible with the role defaults and the policy (not a copy of the mapping)."""
    with open(os.path.join(TOP, "roles", "pvetune_fix", "tasks", "boot.yml")) as handle:
        (task,) = yaml.safe_load(handle)
    with open(os.path.join(TOP, "roles", "pvetune_fix", "defaults", "main.yml")) as handle:
        variables = yaml.safe_load(handle)
    variables["pvetune_fix_policy"] = policy
    return Templar(loader=DataLoader(), variables=variables).template(_trusted(task["pvetune_runtime"]["configs"]))


@pytest.fixture
def gpu02(tmp_path):
    """A scratch copy of pve-gpu02 (runtime library installed by scratch_host with the real installer)."""
    return scratch_host.make_scratch("pve-gpu02", str(tmp_path / "pve-gpu02"))


# -- the literal demo files against the renderers ------------------------------------------------------
@pytest.mark.parametrize("sub", bootunits.SUBCOMMANDS)
def test_units_are_what_render_unit_writes(sub):
    name = bootunits.unit_name(sub)
    assert demo_file(bootunits.UNIT_DIR + "/" + name) == bootunits.render_unit(sub)
    link = os.path.join(GPU02, bootunits.WANTS_DIR.lstrip("/"), name)
    assert os.readlink(link) == bootunits.UNIT_DIR + "/" + name


@pytest.mark.parametrize("sub", bootunits.SUBCOMMANDS)
def test_boot_settings_are_the_demo_policy_as_render_config_writes_it(policy, sub):
    assert demo_file("%s/%s.json" % (bootunits.CONFIG_DIR, sub)) == bootunits.render_config(boot_configs(policy)[sub])


@pytest.mark.parametrize("host", ["pve-gpu02", "pve-gpu03"])
def test_sysctl_dropin_is_what_the_sysctl_fix_writes(policy, host):
    from ansible.module_utils.pvetune.formats.sysctl_conf import render_sysctl_dropin

    # The settings sysctl.yml passes, each "{{ pvetune_fix_policy.<key> }}", with the demo policy's values.
    with open(os.path.join(TOP, "roles", "pvetune_fix", "tasks", "sysctl.yml")) as handle:
        task = yaml.safe_load(handle)[0]
    settings = task["pvetune_sysctl"]["settings"]
    expected = render_sysctl_dropin({key: str(policy[re.search(r"pvetune_fix_policy\.(\w+)", value).group(1)])
                                     for key, value in settings.items()})
    assert len(settings) == 3
    assert demo_file("/etc/sysctl.d/90-pvetune.conf", host) == expected


def test_nvidia_majors_state_is_what_the_lxc_fix_records():
    from ansible.module_utils.pvetune.concerns.lxcgpu import fix as lxcgpu_fix
    from ansible.module_utils.pvetune.concerns.lxcgpu import state as lxcgpu_state

    # The majors of pve-gpu02's boot, as its /proc/devices lists them (read here, not from the generator).
    devices = demo_file("/proc/devices").split("Block devices:")[0]
    majors = {name: int(major) for major, name in (line.split() for line in devices.splitlines()[1:] if line)
              if name.startswith("nvidia")}
    state, changed = lxcgpu_fix.updated_state(lxcgpu_state.empty_state(), majors, "20261118T140000Z", "fix",
                                              now="2026-11-18T14:00:00Z")
    assert changed
    rendered = lxcgpu_fix.render_state(state)
    assert demo_file(lxcgpu_fix.STATE_FILE) == (rendered.decode("utf-8") if isinstance(rendered, bytes) else rendered)


def test_runtime_manifest_is_what_the_installer_writes_now():
    files = bootunits.runtime_files()
    assert demo_file(bootunits.MANIFEST) == bootunits.render_manifest(files), (
        "%s is stale: the runtime library changed; %s" % (bootunits.MANIFEST, REGENERATE))
    assert demo_file(bootunits.HELPER) == bootunits.HELPER_STUB
    assert os.stat(os.path.join(GPU02, bootunits.HELPER.lstrip("/"))).st_mode & 0o777 == 0o755


def test_demo_gpu02_has_the_installed_library_and_nothing_to_install(policy):
    """The tree holds what the installer writes, so fix.yml --check on pve-gpu02 plans no runtime change."""
    assert plan(GPU02, bootunits.SUBCOMMANDS, boot_configs(policy)).files == []
    for path, data, mode in bootunits.runtime_files():
        real = os.path.join(GPU02, path.lstrip("/"))
        with open(real, "rb") as handle:
            assert handle.read() == data, path
        assert os.stat(real).st_mode & 0o777 == mode, path


def test_runtime_install_on_gpu02_changes_nothing(gpu02, policy):
    """The whole of pvetune_runtime's part of the fix (library, helper, manifest, settings, units, links)."""
    out = run_module("pvetune_runtime", {"root": gpu02, "run_id": "t1", "subcommands": list(bootunits.SUBCOMMANDS),
                                         "configs": boot_configs(policy)}, check_mode=True, diff=True)
    assert out.get("failed") is not True, out
    assert (out["changed"], out["changes"]["files"]) == (False, [])
    assert not out.get("warnings")


# -- the installer and its manifest --------------------------------------------------------------------
def plan(root, subcommands=(), configs=None, **kw):
    changes = ChangeSet(FsRoot(str(root)), check_mode=True, run_id="t")
    bootunits.plan_install(changes, list(subcommands), configs or {}, **kw)
    return changes


def sha(data):
    return hashlib.sha256(data).hexdigest()


def test_manifest_lists_every_library_file_with_its_sha256_and_mode():
    files = bootunits.runtime_files()
    doc = json.loads(bootunits.render_manifest(files))
    assert (doc["tool"], doc["version"], doc["manifest_version"]) == ("pvetune", "0.1.0", 1)
    assert [e["path"] for e in doc["files"]] == sorted(p for p, _, _ in files)
    entries = {e["path"]: e for e in doc["files"]}
    boothelper = bootunits.PKG_DIR + "/boot/helper.py"
    assert entries[boothelper]["sha256"] == sha(bootunits.library_files()["boot/helper.py"])
    assert entries[bootunits.HELPER]["mode"] == "0755" and entries[boothelper]["mode"] == "0644"
    assert bootunits.MANIFEST not in entries


def test_scratch_copy_of_gpu02_is_installed(gpu02):
    assert plan(gpu02).files == []
    assert bootunits.manifest_drift(ChangeSet(FsRoot(gpu02), check_mode=True).read) == []
    for path, data, mode in bootunits.runtime_files():
        real = os.path.join(gpu02, path.lstrip("/"))
        with open(real, "rb") as handle:
            assert handle.read() == data, path
        assert os.stat(real).st_mode & 0o777 == mode, path


def test_edited_library_file_is_reinstalled_with_a_warning(gpu02):
    edited = bootunits.PKG_DIR + "/boot/helper.py"
    real = os.path.join(gpu02, edited.lstrip("/"))
    with open(real, "ab") as handle:
        handle.write(b"# local hack\n")
    assert bootunits.manifest_drift(ChangeSet(FsRoot(gpu02), check_mode=True).read) == [edited]
    assert [f["path"] for f in plan(gpu02).files] == [edited]
    out = run_module("pvetune_runtime", {"root": gpu02, "run_id": "t2", "subcommands": [], "configs": {}})
    assert out.get("failed") is not True, out
    assert out["changed"] is True
    # (newer ansible-core returns warnings as structured summaries: look at their text)
    assert any(edited in str(w) and "re-installing" in str(w) for w in out["warnings"]), out.get("warnings")
    with open(real, "rb") as handle:
        assert handle.read() == bootunits.library_files()["boot/helper.py"]
    assert plan(gpu02).files == []


def write_manifest(root, entries):
    real = os.path.join(str(root), bootunits.MANIFEST.lstrip("/"))
    with open(real, "w") as handle:
        json.dump({"tool": "pvetune", "version": "0.0.9", "files": entries}, handle)


def test_file_an_earlier_install_shipped_is_removed_unless_changed(gpu02):
    old = bootunits.PKG_DIR + "/oldmodule.py"
    kept = bootunits.PKG_DIR + "/edited_since.py"
    for path, text in ((old, b"old\n"), (kept, b"edited\n")):
        with open(os.path.join(gpu02, path.lstrip("/")), "wb") as handle:
            handle.write(text)
    entries = [{"path": p, "sha256": sha(d), "mode": "%04o" % m} for p, d, m in bootunits.runtime_files()]
    entries += [{"path": old, "sha256": sha(b"old\n")}, {"path": kept, "sha256": sha(b"as installed\n")}]
    write_manifest(gpu02, entries)
    planned = plan(gpu02)
    assert [(f["path"], f["remove"]) for f in planned.files] == [(old, True), (bootunits.MANIFEST, False)]


@pytest.mark.parametrize("entries", [
    "not a list",
    [{"path": "/etc/passwd", "sha256": "x"}, {"path": bootunits.LIB_DIR + "/../../../etc/hostname"},
     {"path": bootunits.LIB_DIR + "/../../../etc/hostname", "sha256": sha(b"pve-gpu02\n")},
     {"path": bootunits.MANIFEST, "sha256": "x"}, {"path": 7}, "junk"],
])
def test_damaged_manifest_never_removes_anything_else(gpu02, entries):
    write_manifest(gpu02, entries)
    planned = plan(gpu02)
    assert [f["path"] for f in planned.files] == [bootunits.MANIFEST]
    assert bootunits.parse_manifest(b"{not json") == {}


def test_install_and_rollback_leave_no_manifest_behind(tmp_path, policy):
    root = scratch_host.make_scratch("pve-gpu01", str(tmp_path / "pve-gpu01"))
    before = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, names in os.walk(root) for f in names)
    out = run_module("pvetune_runtime", {"root": root, "run_id": "t3", "subcommands": list(bootunits.SUBCOMMANDS),
                                         "configs": boot_configs(policy)})
    assert out.get("failed") is not True, out
    assert os.path.exists(os.path.join(root, bootunits.MANIFEST.lstrip("/")))
    assert bootunits.MANIFEST in out["paths"]
    with open(os.path.join(root, "var/lib/pvetune/manifest.json")) as handle:
        recorded = json.load(handle)["files"]
    assert recorded[bootunits.MANIFEST]["existed"] is False
    out = run_module("pvetune_rollback", {"root": root, "run_id": "t4"})
    assert out.get("failed") is not True, out
    after = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, names in os.walk(root) for f in names)
    after = [p for p in after if not p.startswith(("var/lib/pvetune", ".pvetune/calls.log"))]
    assert after == [p for p in before if not p.startswith("var/lib/pvetune")]
    assert not os.path.exists(os.path.join(root, bootunits.LIB_DIR.lstrip("/")))
