# resilient.virt: `make demo` runs the demo on the local lab, `make test` runs every test.
# Every target installs what it needs first (apt and pip, as root on Debian 12), idempotently.
SHELL := /bin/bash
PYTHON ?= python3
LAB_DIR ?= $(CURDIR)/lab/run
LAB_COUNT ?= 3
# where `make bench` writes its report; docs/bench-report.md holds the documented run
BENCH_REPORT ?= $(CURDIR)/.build/bench-report.md
COLLECTIONS := $(CURDIR)/.build/collections
SANITY_DIR := $(CURDIR)/.build/sanity/ansible_collections/resilient/virt
# ansible-test fetches get-pip.py from a host outside the package index; it uses a cached copy
# when there is one, so the sanity target puts tests/sanity/bootstrap_pip.py there.
GET_PIP_CACHE = $(HOME)/.ansible/test/cache/get_pip_$(shell $(PYTHON) -c "import os,re,ansible_test as t; print(re.search(r\"pip='([0-9.]+)'\", open(os.path.join(os.path.dirname(t.__file__), '_internal', 'python_requirements.py')).read()).group(1).replace('.', '_'))").py
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export ANSIBLE_LOCALHOST_WARNING := false
export ANSIBLE_INVENTORY_UNPARSED_WARNING := false
export ANSIBLE_NOCOWS := 1
export PYTHONDONTWRITEBYTECODE := 1

# pytest-xdist workers. Integration tests mostly wait (on guests, simulators, timeouts), so
# more workers than CPUs pay off: each worker starts its own lab, simulators and Redis servers.
# worksteal hands a worker's queued tests to an idle one, so one slow file does not set the end.
TEST_WORKERS ?= 4
# Unit tests wait too (real Redis, Sentinel and Cluster servers, time limits and breaker
# timeouts on real clocks): two workers per CPU keep the CPUs busy meanwhile.
UNIT_WORKERS ?= $(shell echo $$((2 * $$(nproc 2>/dev/null || echo 2))))

# Checked with mypy, packages whole: the public API (its types are part of the contract) and
# the layers under every call (resilience policy, state stores)
TYPED := errors providers.contract providers.hookspecs _failover.model _resilience _state

.PHONY: help deps link test suite check lint unit integration mutation sanity bench demo lab-up lab-down build clean release-notes

help:
	@echo "make demo      bring the local lab up and run playbooks/demo.yml"
	@echo "make test      lint, then unit and integration tests (real libvirtd/QEMU, vSphere simulator, Redis), mutation and sanity side by side"
	@echo "make check     lint and the unit tests only (no lab): the loop of a change"
	@echo "make lint      ruff on the whole tree, mypy on the typed modules (TYPED)"
	@echo "make mutation  break the failover planner, the fleet reconciler and the backup records on purpose; the tests must catch every break"
	@echo "make bench     benchmarks (core overhead, peers, failover planning)"
	@echo "make lab-up / lab-down   start or stop the local hypervisors"
	@echo "make build     build the collection tarball"

# Installs run once per change of what they install: the stamp is remade whenever one of
# DEPS_INPUTS is newer (a fresh clone has none, so it installs everything).
DEPS_STAMP := .build/deps.stamp
DEPS_INPUTS := requirements.txt tests/requirements.txt lab/install-deps.sh \
	$(shell git ls-files tests/fixtures/thirdparty_provider 2>/dev/null)

deps: $(DEPS_STAMP)

$(DEPS_STAMP): $(DEPS_INPUTS)
	bash lab/install-deps.sh
	$(PYTHON) -m pip install -q --disable-pip-version-check --root-user-action=ignore -r requirements.txt -r tests/requirements.txt
	@# the example third-party backend, installed from a copy so no build files land in the tree
	tmp=$$(mktemp -d) && cp -r tests/fixtures/thirdparty_provider $$tmp/ && \
	  $(PYTHON) -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps $$tmp/thirdparty_provider; \
	  status=$$?; rm -rf $$tmp; exit $$status
	@mkdir -p $(dir $@) && touch $@

link:
	@mkdir -p $(COLLECTIONS)/ansible_collections/resilient
	@ln -sfn $(CURDIR) $(COLLECTIONS)/ansible_collections/resilient/virt

# The pytest run, the mutation run and sanity share nothing (the last two work on copies of the
# tree), so they run side by side; each one's output is shown whole when it ends.
test: deps link
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory -j3 --output-sync=target suite mutation sanity

suite: deps link
	$(PYTHON) -m pytest -q -p no:randomly -n $(TEST_WORKERS) --dist worksteal --durations=20 tests/unit tests/integration

check: deps link
	$(MAKE) --no-print-directory lint
	$(PYTHON) -m pytest -q -p no:randomly -n $(UNIT_WORKERS) --dist worksteal tests/unit

lint: deps link
	$(PYTHON) -m ruff check .
	@# what ansible-test sanity's pep8 test checks and ruff does not (continuation lines)
	$(PYTHON) -m pycodestyle --max-line-length 160 --ignore E402,W503,W504,E741,E203,E701,E704 \
	  $$(git ls-files '*.py')
	cd $(COLLECTIONS) && $(PYTHON) -m mypy --python-version 3.10 --ignore-missing-imports \
	  --follow-imports=silent --disallow-untyped-defs --no-error-summary \
	  $(foreach m,$(TYPED),-p ansible_collections.resilient.virt.plugins.module_utils.$(m))

unit: deps link
	$(PYTHON) -m pytest -q -p no:randomly -n $(UNIT_WORKERS) --dist worksteal tests/unit

integration: deps link
	$(PYTHON) -m pytest -q -p no:randomly -n $(TEST_WORKERS) --dist worksteal tests/integration

mutation: deps link
	$(PYTHON) tests/mutation/run.py

sanity: deps link
	rm -rf $(SANITY_DIR) && mkdir -p $(SANITY_DIR)
	git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C $(SANITY_DIR)
	install -D -m 0644 tests/sanity/bootstrap_pip.py $(GET_PIP_CACHE)
	cd $(SANITY_DIR) && git init -q && git add -A && ansible-test sanity --venv --requirements --python 3.11 --color no

bench: deps link lab-up
	$(PYTHON) bench/run.py --lab-dir $(LAB_DIR) --report $(BENCH_REPORT)

lab-up: deps
	$(PYTHON) lab/lab.py up --count $(LAB_COUNT) --run-dir $(LAB_DIR)

lab-down:
	$(PYTHON) lab/lab.py down --run-dir $(LAB_DIR)

demo: deps link lab-up
	ANSIBLE_CALLBACKS_ENABLED=resilient.virt.resilience_summary \
		ansible-playbook -i $(LAB_DIR)/inventory.yml playbooks/demo.yml

build:
	ansible-galaxy collection build --force --output-path .build

# At a release: fold changelogs/fragments into changelogs/changelog.yaml and CHANGELOG.rst for
# VERSION (antsibull-changelog reads the plugins, so it runs on a clean copy of the tree).
release-notes: deps
	@test -n "$(VERSION)" || { echo "usage: make release-notes VERSION=x.y.z"; exit 1; }
	rm -rf .build/release && mkdir -p .build/release
	git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C .build/release
	cd .build/release && antsibull-changelog release --version $(VERSION)
	cp .build/release/CHANGELOG.rst CHANGELOG.rst
	cp .build/release/changelogs/changelog.yaml changelogs/changelog.yaml
	for f in changelogs/fragments/*.yml; do [ -e .build/release/$$f ] || rm -f $$f; done
