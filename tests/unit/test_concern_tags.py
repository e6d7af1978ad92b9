"""The check catalogue's fix_tag is the one list of fix concerns; every other place that spells it is held to it.

Spelled outside the catalogue: the tags of roles/pvetune_fix/tasks/main.yml (one task file per tag), the map of
tags to boot subcommands in boot.yml (module_utils/pvetune/boot/units.py SUBCOMMANDS), and the per-concern
changes of the rollout's record. The rollout's audit gate takes the tags from the audit results instead.
"""
import os

import yaml
from ansible.module_utils.pvetune.boot.units import SUBCOMMANDS
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


def test_the_gates_take_their_scope_from_the_audit_module_not_from_tag_lists():
    """core/scope.py decides what a run answers for (tests/unit/test_scope.py); the audit gate and the sorting play
    pass the run's tags to pvetune_facts and read its scope, naming no tag themselves."""
    tasks = load(os.path.join(ROLLOUT_TASKS, "gates.yml")) + load(os.path.join(ROLLOUT_TASKS, "sort.yml"))
    audits = [t["pvetune_facts"] for t in tasks if "pvetune_facts" in t]
    assert len(audits) == 2 and all(a["run_tags"] == "{{ ansible_run_tags }}" and
                                    a["skip_tags"] == "{{ ansible_skip_tags }}" for a in audits)
    gate = next(t for t in tasks if t["name"].startswith("Audit gate"))
    text = " ".join(str(v) for v in gate["vars"].values())
    assert "pvetune_rollout_after.scope" in text and "fix_tag" not in text
    assert not [tag for tag in CATALOGUE_TAGS if "'%s'" % tag in text], text


def test_lxc_regeneration_after_the_reboot_passes_what_the_fix_passes():
    """The rollout's second pvetune_lxc_gpu call (after the reboot) takes the same options as the fix's own: a
    dropped option (fail_on_refused was) would make the two calls judge the same CT differently."""
    (fix_task,) = [t for t in load(os.path.join(FIX_TASKS, "lxc.yml")) if "pvetune_lxc_gpu" in t]
    (after_task,) = load(os.path.join(ROLLOUT_TASKS, "lxc_after.yml"))
    assert after_task["pvetune_lxc_gpu"] == fix_task["pvetune_lxc_gpu"]
