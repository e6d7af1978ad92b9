"""execution-environment.yml as ansible-builder reads it: `ansible-builder create` validates it against its schema
and writes the build context (no registry needed); the galaxy stage's install then runs from that context as the
image build would run it (ansible-galaxy in the context's _build/, offline). The image build itself needs a base
image from a registry and is not run here."""
import os
import shutil
import subprocess
import sys

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def load(name):
    with open(os.path.join(TOP, name), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def pin(lock, package):
    with open(os.path.join(TOP, lock), encoding="utf-8") as handle:
        return next(line.strip() for line in handle if line.lower().startswith(package + "=="))


def run(cmd, **kwargs):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300,
                          check=False, **kwargs)


def test_the_definition_pins_what_the_project_pins():
    ee, version = load("execution-environment.yml"), load("collection/galaxy.yml")["version"]
    assert ee["version"] == 3
    assert ee["dependencies"]["ansible_core"]["package_pip"] == pin("requirements.lock", "ansible-core")
    assert ee["dependencies"]["ansible_runner"]["package_pip"] == pin("requirements-dev.lock", "ansible-runner")
    assert ee["dependencies"]["python"] == "requirements.txt"
    tarball = "pvetune-gpuhost-%s.tar.gz" % version  # what scripts/build_collection.sh writes
    assert ee["dependencies"]["galaxy"]["collections"] == [{"name": "collections/" + tarball, "type": "file"}]
    assert ee["additional_build_files"] == [{"src": "build/dist/" + tarball, "dest": "collections"}]


def test_ansible_builder_creates_the_context_and_its_galaxy_stage_installs_the_collection(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("execution-environment.yml", "requirements.txt"):
        shutil.copy2(os.path.join(TOP, name), str(project / name))
    out = run([os.path.join(TOP, "scripts", "build_collection.sh")],
              env=dict(os.environ, PVETUNE_BUILD_DIR=str(project / "build")))
    assert out.returncode == 0, out.stderr
    tarball = out.stdout.strip().splitlines()[-1]
    out = run([os.path.join(BIN, "ansible-builder"), "create", "-f", "execution-environment.yml", "-c",
               str(tmp_path / "context")], cwd=str(project))
    assert out.returncode == 0, out.stdout + out.stderr
    build = tmp_path / "context" / "_build"
    with open(tarball, "rb") as a, open(str(build / "collections" / os.path.basename(tarball)), "rb") as b:
        assert a.read() == b.read()
    with open(str(tmp_path / "context" / "Containerfile"), encoding="utf-8") as handle:
        containerfile = handle.read()
    assert 'ARG ANSIBLE_INSTALL_REFS="%s %s"' % (pin("requirements.lock", "ansible-core"),
                                                 pin("requirements-dev.lock", "ansible-runner")) in containerfile
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in containerfile
    # The galaxy stage: WORKDIR /build is the context's _build/.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE")}
    env.update(ANSIBLE_GALAXY_DISABLE_GPG_VERIFY="1", HOME=str(tmp_path), ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "ee"))
    out = run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "-r", "requirements.yml",
               "--collections-path", str(tmp_path / "ee")], cwd=str(build), env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "pvetune.gpuhost:%s was installed successfully" % load("collection/galaxy.yml")["version"] in out.stdout
    assert os.path.isfile(str(tmp_path / "ee" / "ansible_collections" / "pvetune" / "gpuhost" / "MANIFEST.json"))
