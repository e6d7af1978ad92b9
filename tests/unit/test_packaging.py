"""The run-time and development sets: requirements.txt/.lock hold what pvetune needs to run and no more,
requirements-dev.lock pins the run time the same way (so a development venv serves `make audit` too), and the
playbooks and roles use no collection beyond ansible.builtin and their own (collections/requirements.yml, which
AWX installs, is empty)."""
import ast
import glob
import os
import re
import sys

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNTIME_CODE = ["library/*.py", "module_utils/**/*.py", "action_plugins/*.py", "callback_plugins/*.py",
                "doc_fragments/*.py"]
PRODUCT_YAML = ["playbooks/**/*.yml", "roles/**/*.yml", "audit.yml", "collect.yml", "fix.yml", "rollback.yml"]
OWN = ("ansible.builtin", "pvetune.gpuhost")


def files(patterns):
    out = []
    for pattern in patterns:
        out += glob.glob(os.path.join(TOP, pattern), recursive=True)
    return sorted(set(out))


def pins(name):
    with open(os.path.join(TOP, name), encoding="utf-8") as handle:
        return {line.split("==")[0].lower(): line.strip() for line in handle
                if line.strip() and not line.startswith(("#", "-r"))}


def test_the_dev_lock_pins_the_run_time_as_the_run_time_lock_does():
    runtime, dev = pins("requirements.lock"), pins("requirements-dev.lock")
    assert "ansible-core" in runtime
    assert {name: dev.get(name) for name in runtime} == runtime


def test_the_run_time_set_is_ansible_core_alone():
    assert list(pins("requirements.txt")) == ["ansible-core"]
    with open(os.path.join(TOP, "requirements-dev.txt"), encoding="utf-8") as handle:
        assert "-r requirements.txt\n" in handle.read()
    # the packages the tests need are not in the run time
    for tool in ("pytest", "ansible-runner", "ansible-lint", "molecule", "jmespath"):
        assert tool not in pins("requirements.lock") and tool in pins("requirements-dev.lock")


def test_the_run_time_code_imports_only_the_standard_library_and_ansible():
    stdlib = set(sys.stdlib_module_names)
    seen = {}
    for path in files(RUNTIME_CODE):
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                seen.setdefault(top, os.path.relpath(path, TOP))
    assert "ansible" in seen
    assert {t: p for t, p in seen.items() if t not in stdlib and t not in ("ansible", "__future__")} == {}


def fqcn_collections(text):
    """namespace.collection of every FQCN in module, filter, test and lookup position."""
    found = set()
    for match in re.finditer(r"^\s*-?\s*([a-z0-9_]+\.[a-z0-9_]+)\.[a-z0-9_]+:", text, re.M):  # a task's module
        found.add(match.group(1))
    for match in re.finditer(r"(?:\||\bis(?: not)?|lookup\(|query\()\s*'?([a-z0-9_]+\.[a-z0-9_]+)\.[a-z0-9_]+", text):
        found.add(match.group(1))
    return found


def test_fqcn_scan_sees_modules_filters_and_lookups():
    sample = ("- name: x\n  community.general.foo:\n    a: \"{{ b | ansible.utils.ipaddr }}\"\n"
              "    c: \"{{ lookup('community.hashi_vault.x', 'y') }}\"\n")
    assert fqcn_collections(sample) == {"community.general", "ansible.utils", "community.hashi_vault"}


def test_playbooks_and_roles_need_no_other_collection():
    used = {}
    for path in files(PRODUCT_YAML):
        with open(path, encoding="utf-8") as handle:
            for coll in fqcn_collections(handle.read()):
                used.setdefault(coll, os.path.relpath(path, TOP))
    assert {c: p for c, p in used.items() if c not in OWN} == {}
    assert "json_query" not in "".join(open(p, encoding="utf-8").read() for p in files(PRODUCT_YAML))
    with open(os.path.join(TOP, "collections", "requirements.yml"), encoding="utf-8") as handle:
        assert yaml.safe_load(handle) == {"collections": []}
