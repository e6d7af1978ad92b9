# pvetune — audit and fix Proxmox VE GPU host performance settings.
#
#   make audit       set up the run time only (venv with ansible-core) and audit the bundled demo fleet
#   make test        set up everything the tests need and run the whole suite
#   make collection  build the collection pvetune.gpuhost (build/dist/pvetune-gpuhost-<version>.tar.gz)
#
# Every target runs scripts/bootstrap.sh first, which is idempotent: `make audit` and `make collection` with the
# run-time set (requirements.lock), the others with the development set (requirements-dev.lock).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
TOP := $(CURDIR)
VENV ?= $(TOP)/.venv
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(TOP)/ansible.cfg
export PYTHONDONTWRITEBYTECODE := 1
PYTEST := $(VENV)/bin/python -m pytest

.PHONY: setup setup-runtime setup-containers setup-lab demo audit collection test lint unit integration cluster-test \
        sanity molecule lab-test \
        bench fix-demo demo-check docs clean

setup:
	@scripts/bootstrap.sh

setup-runtime:
	@scripts/bootstrap.sh runtime

setup-containers:
	@scripts/bootstrap.sh containers

setup-lab:
	@scripts/bootstrap.sh lab

## The demo fleet's trees (demo/snapshots, generated and ignored by git): made when missing or out of date.
demo: setup-runtime
	@$(VENV)/bin/python scripts/demo_fleet.py --ensure

## The main job: audit the demo fleet (exits non-zero because pve-gpu01 fails, as it should).
audit: demo
	@rc=0; ansible-playbook audit.yml || rc=$$?; \
	 echo; echo "Reports: $$(readlink -f reports/latest)/{audit.json,audit.html,junit.xml,summary.txt}"; \
	 exit $$rc

## The collection tarball (scripts/build_collection.sh: the one layout, which `make sanity` tests too).
collection: setup-runtime
	@scripts/build_collection.sh

## The whole suite, as CI runs it (.ci/run): everything the phases need (podman, fuse3, LXC, the VM lab's
## QEMU build deps) is installed first.
test:
	@scripts/bootstrap.sh containers lab
	@scripts/run_tests.sh

lint: setup
	ruff check .
	ansible-lint --offline
unit: setup
	$(PYTEST) -q tests/unit
integration: setup
	$(PYTEST) -q tests/integration
## A real 3-node corosync cluster (and 2 nodes + qnetd) in podman containers for the cluster gate (tests/cluster).
cluster-test: setup-containers
	$(PYTEST) -q -p no:cacheprovider tests/cluster
## ansible-test sanity on the built collection, and the collection installed in a fresh venv and used by FQCN.
sanity: setup
	scripts/ansible_test_sanity.sh
	$(PYTEST) -q tests/collection
molecule: setup-containers demo
	scripts/run_molecule.sh
lab-test: setup-lab demo
	tests/lab/lab-test.sh
bench: setup demo
	bench/run.sh

## Fix a scratch copy of pve-gpu01 (stand-ins for Proxmox-only tools, no reboot), audit, fix again, roll back.
fix-demo: setup demo
	scripts/fix_demo.sh

demo-check: setup demo
	$(VENV)/bin/python scripts/demo_fleet.py --check

docs: setup
	$(VENV)/bin/python scripts/gen_docs.py

clean:
	rm -rf build tests/output reports .pytest_cache .ruff_cache
