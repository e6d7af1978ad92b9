"""The collection as a user gets it: the tarball `make collection` builds, installed with ansible-galaxy into a
fresh virtualenv that has ansible-core (requirements.lock) and nothing of the project: no ansible.cfg, no
library/ or roles/ path, its own HOME. Every module documents itself by FQCN, the audit runs by FQCN on the
demo fleet with the project's result, and pvetune_runtime by FQCN installs a boot helper that runs.

Phase sanity (scripts/run_tests.sh), after ansible-test on the same tarball. The venv's wheels are cached in
~/.cache/pvetune/wheels/runtime/ (downloaded from PyPI the first time, offline after that).
"""
import hashlib
import json
import os
import subprocess
import sys

import pytest
from ansible.module_utils.pvetune.boot import units as bootunits

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Outside the clone, so a fresh clone (CI) on this machine installs offline.
WHEELS = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                      "pvetune", "wheels", "runtime")
LOCK = os.path.join(TOP, "requirements.lock")
DEMO_INVENTORY = os.path.join(TOP, "inventory", "demo")
MODULES = sorted(f[:-3] for f in os.listdir(os.path.join(TOP, "library")) if f.endswith(".py"))
DEMO_VERDICTS = {"pve-gpu01": "fail", "pve-gpu02": "pass", "pve-gpu03": "pass", "pve-gpu04": "fail",
                 "pve-gpu05": "fail"}


def run(cmd, timeout=600, **kwargs):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=timeout, check=False, **kwargs)


def fresh_venv(path):
    """A virtualenv with requirements.lock only, from the wheel cache (filled from PyPI when it lacks one)."""
    out = run([sys.executable, "-m", "venv", path])
    assert out.returncode == 0, out.stderr
    pip = [os.path.join(path, "bin", "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    install = pip + ["install", "--no-index", "--find-links", WHEELS, "-r", LOCK]
    if not os.path.isdir(WHEELS) or run(install).returncode != 0:
        out = run(pip + ["download", "--dest", WHEELS, "-r", LOCK])
        assert out.returncode == 0, out.stderr
        out = run(install)
        assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """(env, collections path, work dir) of a user who installed only ansible-core and the tarball."""
    base = tmp_path_factory.mktemp("collection-user")
    build = base / "build"
    out = run([os.path.join(TOP, "scripts", "build_collection.sh")], env=dict(os.environ, PVETUNE_BUILD_DIR=str(build)))
    assert out.returncode == 0, out.stderr
    tarball = out.stdout.strip().splitlines()[-1]
    assert os.path.isfile(tarball) and tarball.startswith(str(build))
    venv = str(base / "venv")
    fresh_venv(venv)
    for d in ("home", "work"):
        (base / d).mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE", "PYTHON", "PVETUNE", "VIRTUAL_ENV"))}
    env.update(PATH=os.path.join(venv, "bin") + ":/usr/local/bin:/usr/bin:/bin", HOME=str(base / "home"),
               ANSIBLE_COLLECTIONS_PATH=str(base / "collections"), ANSIBLE_NOCOLOR="1")
    out = run(["ansible-galaxy", "collection", "install", tarball, "-p", str(base / "collections")], env=env,
              cwd=str(base / "work"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "pvetune.gpuhost:0.1.0 was installed successfully" in out.stdout
    return env, base / "collections" / "ansible_collections" / "pvetune" / "gpuhost", base / "work"


def test_the_venv_is_the_run_time_set_only(user):
    env, _, work = user
    out = run(["python", "-m", "pip", "freeze"], env=env, cwd=str(work))
    with open(LOCK, encoding="utf-8") as handle:
        locked = sorted(line.strip() for line in handle if line.strip() and not line.startswith("#"))
    assert sorted(out.stdout.split()) == locked
    out = run(["ansible-config", "dump", "--only-changed"], env=env, cwd=str(work))
    assert out.returncode == 0 and TOP not in out.stdout  # nothing of the project's configuration


def test_every_module_and_the_callback_document_themselves_by_fqcn(user):
    env, _, work = user
    out = run(["ansible-doc", "--json"] + ["pvetune.gpuhost." + m for m in MODULES], env=env, cwd=str(work))
    assert out.returncode == 0, out.stderr
    docs = json.loads(out.stdout)
    assert sorted(docs) == ["pvetune.gpuhost." + m for m in MODULES]
    for name, doc in docs.items():
        assert doc["doc"]["short_description"], name
        assert doc["doc"]["collection"] == "pvetune.gpuhost"
        # the controller-side modules (reports, the run check, snapshots, the metrics renderer, the wave planner) have
        # no root
        assert "root" in doc["doc"]["options"] or name.endswith(
            ("_report", "_run_check", "_snapshot", "_metrics", "_waves")), name
    out = run(["ansible-doc", "--json", "-t", "callback", "pvetune.gpuhost.pvetune"], env=env, cwd=str(work))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["pvetune.gpuhost.pvetune"]["doc"]["type"] == "stdout"


def normalised(doc):
    doc = dict(doc, generated_at=None)
    doc["hosts"] = [dict(h, duration=None) for h in doc["hosts"]]
    return doc


def test_the_audit_playbook_by_fqcn_audits_the_demo_fleet_as_the_project_does(user, tmp_path):
    env, coll, work = user
    out = run(["ansible-playbook", "pvetune.gpuhost.audit", "-i", DEMO_INVENTORY], env=env, cwd=str(work))
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr[-3000:]  # the demo fleet fails, as it should
    assert "pve-gpu01 fails checks of severity high or higher" in out.stdout
    # The reports go to the directory the playbook ran in, not into the installed collection.
    assert not os.path.exists(str(coll / "reports"))
    with open(str(work / "reports" / "latest" / "audit.json"), encoding="utf-8") as handle:
        ours = json.load(handle)
    assert {h["host"]: h["summary"]["verdict"] for h in ours["hosts"]} == DEMO_VERDICTS
    # The same playbook from the project (its venv, ansible.cfg, library/ and roles/) finds exactly the same.
    project_env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(TOP, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    out = run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), os.path.join(TOP, "audit.yml"),
               "-i", DEMO_INVENTORY, "-e", "pvetune_report_dir=%s" % tmp_path], env=project_env, cwd=TOP)
    assert out.returncode == 2, out.stdout[-3000:]
    with open(str(tmp_path / "latest" / "audit.json"), encoding="utf-8") as handle:
        assert normalised(ours) == normalised(json.load(handle))


def test_the_fix_playbook_by_fqcn_writes_its_plan_records_where_it_runs(user):
    """fix.yml --check from the installed collection: its plan record goes to ./reports/fix-<run_id>/ in the
    directory ansible-playbook runs in (the role's default follows playbooks/vars/outputs.yml), not into the
    collection, which may be read-only."""
    env, coll, work = user
    out = run(["ansible-playbook", "pvetune.gpuhost.fix", "-i", DEMO_INVENTORY, "--limit", "pve-gpu01", "--check",
               "-e", "pvetune_run_id_override=coll-check"], env=env, cwd=str(work))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert not os.path.exists(str(coll / "reports"))
    with open(str(work / "reports" / "fix-coll-check" / "pve-gpu01.json"), encoding="utf-8") as handle:
        record = json.load(handle)
    assert record["record_kind"] == "plan" and record["host"] == "pve-gpu01"


def test_pvetune_runtime_by_fqcn_installs_the_projects_boot_helper_and_it_runs(user, tmp_path):
    env, _, work = user
    tree = tmp_path / "host"
    tree.mkdir()
    args = {"root": str(tree), "subcommands": ["pcie-mrrs"],
            "configs": {"pcie-mrrs": {"mrrs": 4096, "vendor": "0x10de", "class_prefix": "0x03", "bdfs": []}}}
    out = run(["ansible", "localhost", "-m", "pvetune.gpuhost.pvetune_runtime", "-a", json.dumps(args)], env=env,
              cwd=str(work))
    assert out.returncode == 0 and "CHANGED" in out.stdout, out.stdout + out.stderr
    for path, data, _mode in bootunits.runtime_files():  # the project's own files, byte for byte
        with open(os.path.join(str(tree), path.lstrip("/")), "rb") as handle:
            assert hashlib.sha256(handle.read()).hexdigest() == hashlib.sha256(data).hexdigest(), path
    # The helper as the boot unit runs it, its library from the tree alone (the venv's python: no ansible on
    # its path matters, the tree's namespace package comes first). No GPU in the empty tree: it reads its
    # settings, finds no NVIDIA function and says so.
    helper = os.path.join(str(tree), bootunits.HELPER.lstrip("/"))
    out = run(["python", helper, "--root", str(tree), "pcie-mrrs"], env=env, cwd=str(work))
    assert out.returncode == 0, out.stderr
    assert "no PCI function matches vendor 0x10de, class prefix 0x03" in out.stdout + out.stderr
