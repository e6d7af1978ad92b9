"""The check catalogue's fix_tag is the one list of fix concerns; every other place that spells it is held to it.

Spelled outside the catalogue: the tags of roles/pvetune_fix/tasks/main.yml (one task file per tag), the map of
tags to boot subcommands in boot.yml (module_utils/pvetune/bootunits.py SUBCOMMANDS), and the per-concern
changes of the rollout's record. The rollout's audit gate takes the tags from the audit results instead.
"""
import os

import yaml
from ansible.module_utils.pvetune.bootunits import SUBCOMMANDS
from ansible.module_utils.pvetune.core.catalogue import CATALOGUE

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX_TASKS = os.path.join(TOP, "roles", "pvetune_fix", "tasks")
ROLLOUT_TASKS = os.path.join(TOP, "roles", "pvetune_rollout", "tasks")
CATALOGUE_TAGS = {c["fix_tag"] for c in CATALOGUE if c["fix_tag"]}


def load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def imports_of_fix_role():
    """{imported task file: set of tags} of pvetune_fix's main.yml."""
    return {t["ansible.builtin.import_tasks"]: set(t.get("tags", []))
            for t in load(os.path.join(FIX_TASKS, "main.yml")) if "ansible.builtin.import_tasks" in t}


def boot_task():
    (task,) = load(os.path.join(FIX_TASKS, "boot.yml"))
    return task


def test_catalogue_names_fix_tags():
    assert CATALOGUE_TAGS, "no check has a fix_tag"


def test_fix_role_tags_are_the_catalogue_fix_tags():
    tags = set().union(*imports_of_fix_role().values())
    assert tags == CATALOGUE_TAGS


def test_every_fix_tag_has_its_task_file_imported_under_its_tag():
    imports = imports_of_fix_role()
    for tag in sorted(CATALOGUE_TAGS):
        assert os.path.isfile(os.path.join(FIX_TASKS, tag + ".yml")), tag
        assert imports.get(tag + ".yml") == {tag}, (tag, imports)


def test_boot_units_are_the_boot_helper_subcommands():
    task = boot_task()
    units = task["vars"]["pvetune_boot_units"]
    assert sorted(units.values()) == sorted(SUBCOMMANDS)
    assert set(task["pvetune_runtime"]["configs"]) == set(SUBCOMMANDS)
    assert set(units) <= CATALOGUE_TAGS, set(units) - CATALOGUE_TAGS
    # The boot task runs under exactly the tags whose units it installs.
    assert imports_of_fix_role()["boot.yml"] == set(units)


def test_rollout_record_has_one_change_entry_per_fix_tag():
    record = next(t for t in load(os.path.join(ROLLOUT_TASKS, "record.yml"))
                  if t["name"] == "Write this host's fix record")
    assert set(record["vars"]["record"]["changes"]) == CATALOGUE_TAGS


def test_audit_gate_takes_the_tags_from_the_audit_results():
    gate = next(t for t in load(os.path.join(ROLLOUT_TASKS, "gates.yml")) if t["name"].startswith("Audit gate"))
    text = " ".join(str(v) for v in gate["vars"].values())
    assert "map(attribute='fix_tag')" in text
    assert not [tag for tag in CATALOGUE_TAGS if "'%s'" % tag in text], text


def test_lxc_regeneration_after_the_reboot_passes_what_the_fix_passes():
    """The rollout's second pvetune_lxc_gpu call (after the reboot) takes the same options as the fix's own: a
    dropped option (fail_on_refused was) would make the two calls judge the same CT differently."""
    (fix_task,) = [t for t in load(os.path.join(FIX_TASKS, "lxc.yml")) if "pvetune_lxc_gpu" in t]
    (after_task,) = load(os.path.join(ROLLOUT_TASKS, "lxc_after.yml"))
    assert after_task["pvetune_lxc_gpu"] == fix_task["pvetune_lxc_gpu"]
