"""Every variable a pvetune_rollout task reads is in its scope: a role default, a fact or a registered result of the
role's own tasks, the vars of the task or of the block around it, or a name Ansible provides.

A name that is only in scope inside another role (pvetune_fix's ``pvetune_fix_policy``, which fixes.yml passes on the
import) fails at run time only on the path that reads it: lxc_after.yml runs after a reboot, which only the VM lab
takes, so the lab was the first to see it. This test sees it in a second.
"""
import os
import sys

import pytest
import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))
# The Jinja reader the variable reference uses too (scripts/role_vars.py): one parser of what a template reads.
from role_vars import ANSIBLE_NAMES, referenced, strings  # noqa: E402

ROLE = os.path.join(TOP, "roles", "pvetune_rollout")
TASKS = os.path.join(ROLE, "tasks")
# Besides ANSIBLE_NAMES and ansible_*: an inventory or extra var a task reads only behind default() or an
# "is defined" test is allowed where it is read.


def load(name, base=TASKS):
    with open(os.path.join(base, name)) as handle:
        return yaml.safe_load(handle) or []


def walk(tasks, inherited, out, base=TASKS):
    """(task, names in scope from enclosing blocks) for every task, with imports followed."""
    for task in tasks:
        scope = inherited | set(task.get("vars") or {})
        for key in ("block", "rescue", "always"):
            if key in task:
                walk(task[key], scope, out, base)
        if "ansible.builtin.import_tasks" in task:
            walk(load(task["ansible.builtin.import_tasks"], base), scope, out, base)
        elif not any(k in task for k in ("block", "rescue", "always")):
            out.append((task, scope))
    return out


def defined_by_tasks(pairs):
    names = set()
    for task, _scope in pairs:
        names.add(task.get("register"))
        names |= set(task.get("ansible.builtin.set_fact") or {})
    return names - {None}


def test_every_rollout_task_reads_only_names_in_its_scope():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        defaults = set(yaml.safe_load(handle))
    pairs = walk(load("main.yml"), set(), [])
    assert len(pairs) > 15, "the walk must reach the imported task files"
    # A registered result is a host variable: what pvetune_fix's tasks register is read here after the import.
    fix_tasks = os.path.join(TOP, "roles", "pvetune_fix", "tasks")
    fix_pairs = walk(load("main.yml", fix_tasks), set(), [], fix_tasks)
    everywhere = defaults | defined_by_tasks(pairs) | {t.get("register") for t, _ in fix_pairs} | ANSIBLE_NAMES
    problems = []
    for task, scope in pairs:
        if "ansible.builtin.import_role" in task:
            continue   # the role's own tasks are that role's scope (its argument spec)
        body = {k: v for k, v in task.items() if k not in ("name", "tags", "vars")}
        names = referenced(body) | referenced(task.get("vars") or {})
        loose = {n for n in names - everywhere - scope if not n.startswith("ansible_")}
        # A name read only behind default() or "is defined" is an optional inventory or extra var.
        loose = {n for n in loose if not any(("%s | default" % n) in s or ("%s is defined" % n) in s
                                             or ("%s is not defined" % n) in s or ("%s|default" % n) in s
                                             for s in strings(task))}
        if loose:
            problems.append("%s: %s" % (task.get("name"), sorted(loose)))
    assert problems == []


@pytest.mark.parametrize("text, names", [
    ("{{ pvetune_fix_policy.lxc_numa_pin | bool }}", {"pvetune_fix_policy"}),
    ("plain text, 0644", set()),
    ("{{ x | map(attribute='id') | list if 'all' in y else z }}", {"x", "y", "z"}),
])
def test_referenced_names(text, names):
    assert referenced(text) == names


def test_conditionals_are_expressions():
    assert referenced({"when": ["not ansible_check_mode", "a is skipped"], "msg": "b"}) == {"ansible_check_mode", "a"}
