# pvetune — audit and fix Proxmox VE GPU host performance settings.
#
#   make audit   set up (venv, deps, collections) and audit the bundled demo fleet
#   make test    set up everything the tests need and run the whole suite
#
# Every target runs scripts/bootstrap.sh first, which is idempotent.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
TOP := $(CURDIR)
VENV ?= $(TOP)/.venv
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(TOP)/ansible.cfg
export PYTHONDONTWRITEBYTECODE := 1
PYTEST := $(VENV)/bin/python -m pytest

.PHONY: setup setup-containers setup-lab audit test lint unit integration cluster-test sanity molecule lab-test \
        bench fix-demo demo-check docs clean

setup:
	@scripts/bootstrap.sh

setup-containers:
	@scripts/bootstrap.sh containers

setup-lab:
	@scripts/bootstrap.sh lab

## The main job: audit the demo fleet (exits non-zero because pve-gpu01 fails, as it should).
audit: setup
	@rc=0; ansible-playbook audit.yml || rc=$$?; \
	 echo; echo "Reports: $$(readlink -f reports/latest)/{audit.json,audit.html,junit.xml,summary.txt}"; \
	 exit $$rc

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
sanity: setup
	scripts/ansible_test_sanity.sh
molecule: setup-containers
	scripts/run_molecule.sh
lab-test: setup-lab
	tests/lab/lab-test.sh
bench: setup
	bench/run.sh

## Fix a scratch copy of pve-gpu01 (stand-ins for Proxmox-only tools, no reboot), audit, fix again, roll back.
fix-demo: setup
	scripts/fix_demo.sh

demo-check: setup
	$(VENV)/bin/python scripts/demo_fleet.py --check

docs: setup
	$(VENV)/bin/python scripts/gen_docs.py

clean:
	rm -rf build tests/output reports .pytest_cache .ruff_cache
