# resilient.virt: `make demo` runs the demo on the local lab, `make test` runs every test.
# Every target installs what it needs first (apt and pip, as root on Debian 12), idempotently.
SHELL := /bin/bash
PYTHON ?= python3
LAB_DIR ?= $(CURDIR)/lab/run
LAB_COUNT ?= 3
COLLECTIONS := $(CURDIR)/.build/collections
SANITY_DIR := $(CURDIR)/.build/sanity/ansible_collections/resilient/virt
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export ANSIBLE_LOCALHOST_WARNING := false
export ANSIBLE_INVENTORY_UNPARSED_WARNING := false
export ANSIBLE_NOCOWS := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help deps link test unit integration sanity bench demo lab-up lab-down build clean

help:
	@echo "make demo      bring the local lab up and run playbooks/demo.yml"
	@echo "make test      unit, integration (real libvirtd/QEMU, vSphere simulator, Redis) and sanity tests"
	@echo "make bench     benchmarks (core overhead, peers, failover planning)"
	@echo "make lab-up / lab-down   start or stop the local hypervisors"
	@echo "make build     build the collection tarball"

deps:
	bash lab/install-deps.sh
	$(PYTHON) -m pip install -q --disable-pip-version-check --root-user-action=ignore -r requirements.txt -r tests/requirements.txt
	$(PYTHON) -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --no-build-isolation tests/fixtures/thirdparty_provider

link:
	@mkdir -p $(COLLECTIONS)/ansible_collections/resilient
	@ln -sfn $(CURDIR) $(COLLECTIONS)/ansible_collections/resilient/virt

test: deps link
	$(PYTHON) -m pytest -q -p no:randomly tests/unit tests/integration
	$(MAKE) --no-print-directory sanity

unit: link
	$(PYTHON) -m pytest -q tests/unit

integration: link
	$(PYTHON) -m pytest -q tests/integration

sanity: link
	rm -rf $(SANITY_DIR) && mkdir -p $(SANITY_DIR)
	git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C $(SANITY_DIR)
	cd $(SANITY_DIR) && ansible-test sanity --venv --requirements --python 3.11 --color no

bench: deps link lab-up
	$(PYTHON) bench/run.py --lab-dir $(LAB_DIR)

lab-up: deps
	$(PYTHON) lab/lab.py up --count $(LAB_COUNT) --run-dir $(LAB_DIR)

lab-down:
	$(PYTHON) lab/lab.py down --run-dir $(LAB_DIR)

demo: deps link lab-up
	ansible-playbook -i $(LAB_DIR)/inventory.yml playbooks/demo.yml

build:
	ansible-galaxy collection build --force --output-path .build

clean: lab-down
	rm -rf .build
