"""The collection layout (scripts/build_collection.sh --layout): every plugin of the project in its collection
place, nothing left importing the project's path, and the boot runtime the collection's pvetune_runtime installs
byte for byte the project's (a host fixed from either has the same files and no drift)."""
import glob
import hashlib
import json
import os
import subprocess
import sys

import pytest
import yaml
from ansible.module_utils.pvetune.boot import units as bootunits
from ansible.module_utils.pvetune.core.result import TOOL_VERSION

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(TOP, "scripts", "build_collection.sh")
COLLECTION_PKG = "ansible_collections.pvetune.gpuhost.plugins.module_utils.pvetune"


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    build = tmp_path_factory.mktemp("build")
    env = dict(os.environ, PVETUNE_BUILD_DIR=str(build))
    out = subprocess.run([SCRIPT, "--layout"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    coll = out.stdout.strip().splitlines()[-1]
    assert coll == str(build / "ansible_collections" / "pvetune" / "gpuhost")
    return build, coll


def names(pattern):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(TOP, pattern)))


def test_galaxy_metadata_is_the_tools():
    with open(os.path.join(TOP, "collection", "galaxy.yml"), encoding="utf-8") as handle:
        meta = yaml.safe_load(handle)
    assert (meta["namespace"], meta["name"]) == ("pvetune", "gpuhost")
    assert meta["version"] == TOOL_VERSION  # the reports' tool version is the collection's
    assert meta["dependencies"] == {}


def test_every_plugin_role_and_playbook_has_its_collection_place(layout):
    _, coll = layout
    placed = {
        "library/*.py": "plugins/modules/*.py",
        "action_plugins/*.py": "plugins/action/*.py",
        "callback_plugins/*.py": "plugins/callback/*.py",
        "doc_fragments/*.py": "plugins/doc_fragments/*.py",
        "playbooks/*.yml": "playbooks/*.yml",
        "roles/*": "roles/*",
    }
    for source, target in placed.items():
        assert names(source), source
        assert sorted(os.path.basename(p) for p in glob.glob(os.path.join(coll, target))) == names(source), target
    mu = sorted(os.path.relpath(p, os.path.join(TOP, "module_utils"))
                for p in glob.glob(os.path.join(TOP, "module_utils", "pvetune", "**", "*.py"), recursive=True))
    assert sorted(os.path.relpath(p, os.path.join(coll, "plugins", "module_utils"))
                  for p in glob.glob(os.path.join(coll, "plugins", "module_utils", "pvetune", "**", "*.py"),
                                     recursive=True)) == mu
    with open(os.path.join(coll, "meta", "runtime.yml"), encoding="utf-8") as handle:
        assert yaml.safe_load(handle)["requires_ansible"].startswith(">=")


def test_python_files_import_the_collection_path_and_docs_name_fqcns(layout):
    _, coll = layout
    with open(os.path.join(coll, "plugins", "modules", "pvetune_facts.py"), encoding="utf-8") as handle:
        facts = handle.read()
    assert "from %s." % COLLECTION_PKG in facts
    assert "  - pvetune.gpuhost.pvetune\n" in facts  # the doc fragment by its FQCN
    with open(os.path.join(coll, "plugins", "action", "pvetune_report.py"), encoding="utf-8") as handle:
        assert "from %s.report.write import ARGUMENT_SPEC, write_fleet_reports" % COLLECTION_PKG in handle.read()
    with open(os.path.join(coll, "plugins", "action", "pvetune_run_check.py"), encoding="utf-8") as handle:
        assert "from %s.core.runcheck import (" % COLLECTION_PKG in handle.read()


def test_the_collection_installs_the_same_boot_runtime_bytes(layout):
    """bootunits read from the collection's module_utils (as a collection module's payload carries them)
    renames the imports back: the host gets exactly what the project's modules install."""
    build, _ = layout
    probe = ("import hashlib, json, sys\n"
             "from %s.boot import units as bootunits\n"
             "assert bootunits.PACKAGE == %r, bootunits.PACKAGE\n"
             "print(json.dumps([[p, hashlib.sha256(d).hexdigest(), m] for p, d, m in bootunits.runtime_files()]))\n"
             % (COLLECTION_PKG, COLLECTION_PKG))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(build)
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=str(build), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    ours = [[p, hashlib.sha256(d).hexdigest(), m] for p, d, m in bootunits.runtime_files()]
    assert json.loads(out.stdout) == ours
    assert len(ours) > 10  # the helper's whole import closure, not only boot/helper.py


def test_the_helper_stub_imports_the_hosts_package_name():
    stub = {p: d for p, d, _ in bootunits.runtime_files()}[bootunits.HELPER].decode()
    assert "from ansible.module_utils.pvetune.boot.helper import main" in stub
