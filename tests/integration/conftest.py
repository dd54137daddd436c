"""Fixtures for tests against the local lab of real libvirt hypervisors (lab/lab.py).

``lab``: a session-wide lab of three hypervisors (hv1, hv2, hv3). It reuses the run directory
named by RESILIENT_VIRT_LAB_DIR when set (starting only what is not running, and stopping at the
end only what it started); otherwise it brings a lab up in a temporary directory and takes it
down at the end. Tests that use it are marked ``lab``: deselect them with ``-m "not lab"``.

``outage``: stop/start/freeze/thaw one hypervisor; whatever a test broke is repaired afterwards.
``domain_xml``: builds the XML of a tiny diskless TCG domain (64 MiB, 1 vCPU).
``vsphere``: the lab's vSphere simulator, as provider settings (its password included): HTTPS
with a certificate of the lab CA (``ca_path``). ``vsphere_plain_http``: a simulator of its own
serving plain HTTP.
``simulated_pve``: a Proxmox VE API simulator (fakepve) of the test's own, a three-node cluster
(``pve_simulator.py``), stopped at the end.
``start_redis``: ``start_redis(password=...)`` starts a private redis-server, stopped at the end.
``redis_sentinel``: a private primary, replica and three Sentinels (``redis_topologies``), for one
test (it may kill the primary), stopped at the end.
``guarded_provider``: ``guarded_provider(config)`` opens a GuardedProvider (default settings, a
SQLite store of the test), closed at the end.
``task_path``: every test of the modules in :data:`BOTH_PATHS` runs twice, its tasks in the
controller's worker (``worker``) and as module processes (``module``: ansible-playbook gets
``RESILIENT_VIRT_IN_PROCESS=false``); the other tests run in the worker, the default.
"""
import importlib
import os
import sys
import xml.etree.ElementTree as ET

import pytest
from redis_server import RedisServer, require_redis_server
from redis_topologies import SentinelSetup, require_redis_topologies

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB_COUNT = 3


LAB_DIR = os.path.join(ROOT, "lab")
if LAB_DIR not in sys.path:
    sys.path.insert(0, LAB_DIR)  # lab/lab.py and lab/vcsim.py import as ``lab`` and ``vcsim``
labtool = importlib.import_module("lab")


BOTH_PATHS = ("test_vm_module", "test_vm_info_module", "test_provider_module",
              "test_circuit_breaker_module", "test_check_mode", "test_secrets", "test_faults",
              "test_failover_module", "test_fleet_module", "test_bad_input", "test_retried_create",
              "test_backup_module", "test_vsphere_tls", "test_resilience_summary",
              "test_proxmox", "test_proxmox_faults", "test_proxmox_fleet")


def pytest_generate_tests(metafunc):
    if metafunc.module.__name__.rsplit(".", 1)[-1] in BOTH_PATHS:
        metafunc.parametrize("task_path", ["worker", "module"], indirect=True)


@pytest.fixture(autouse=True)
def task_path(request, monkeypatch):
    """Where the tasks of ansible-playbook runs started by the test run: worker or module."""
    path = getattr(request, "param", "worker")
    if path == "module":
        monkeypatch.setenv("RESILIENT_VIRT_IN_PROCESS", "false")
    else:
        monkeypatch.delenv("RESILIENT_VIRT_IN_PROCESS", raising=False)
    return path


def pytest_collection_modifyitems(items):
    for item in items:
        if "lab" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.lab)


@pytest.fixture(scope="session")
def lab_module():
    """The lab/lab.py module (Lab, Hypervisor, LabError, ...)."""
    return labtool


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """A running lab (``labtool.Lab``) with hv1..hv3; ``lab.hypervisor("hv1").uri`` etc."""
    run_dir = os.environ.get(labtool.RUN_DIR_ENV)
    owned = not run_dir
    if owned:
        run_dir = str(tmp_path_factory.mktemp("lab"))
    the_lab = labtool.Lab(run_dir)
    started = the_lab.up(LAB_COUNT)
    try:
        yield the_lab
    finally:
        if owned:
            the_lab.down()
        elif started:
            the_lab.down(started)


class Outage:
    """Break hypervisors of the lab on purpose; ``repair()`` brings every one touched back."""

    def __init__(self, the_lab):
        self.lab = the_lab
        self.touched = set()

    def stop(self, name):
        self.touched.add(name)
        self.lab.stop(name)

    def freeze(self, name):
        self.touched.add(name)
        self.lab.freeze(name)

    def thaw(self, name):
        self.lab.thaw(name)

    def start(self, name):
        self.lab.start(name)

    def repair(self):
        for name in sorted(self.touched):
            self.lab.thaw(name)
            self.lab.start(name)


@pytest.fixture
def outage(lab):
    control = Outage(lab)
    try:
        yield control
    finally:
        control.repair()


def tiny_domain_xml(name):
    """XML of a diskless TCG domain with 64 MiB and 1 vCPU."""
    domain = ET.Element("domain", type="qemu")
    ET.SubElement(domain, "name").text = name
    ET.SubElement(domain, "memory", unit="MiB").text = "64"
    ET.SubElement(domain, "vcpu").text = "1"
    os_el = ET.SubElement(domain, "os")
    ET.SubElement(os_el, "type", arch="x86_64").text = "hvm"
    ET.SubElement(domain, "devices")
    return ET.tostring(domain, encoding="unicode")


@pytest.fixture(scope="session")
def domain_xml():
    return tiny_domain_xml


@pytest.fixture(scope="session")
def vsphere(lab):
    """Provider settings of the lab's vSphere simulator (started with the lab)."""
    return dict(importlib.import_module("vcsim").start(lab.run_dir))


@pytest.fixture(scope="session")
def vsphere_plain_http(lab, tmp_path_factory):
    """Provider settings of a simulator of its own serving plain HTTP (``protocol: http``), for
    tests of what plain HTTP means; stopped at the end."""
    vcsim = importlib.import_module("vcsim")
    run_dir = str(tmp_path_factory.mktemp("vcsim-http"))
    settings = vcsim.start(run_dir, bin_dir=os.path.join(lab.run_dir, "vcsim", "bin"), tls=False, vms=1)
    yield dict(settings)
    vcsim.stop(run_dir)


@pytest.fixture
def guarded_provider(tmp_path):
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import (
        resolve_settings)
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
    from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
        open_provider)

    opened = []

    def open_one(config):
        store = open_store("sqlite:///%s" % (tmp_path / "state.db"), environ={})
        opened.append(open_provider(config, resolve_settings({}, environ={}), store, environ={}))
        return opened[-1]

    yield open_one
    for guarded in opened:
        guarded.close()


@pytest.fixture
def simulated_pve(tmp_path, monkeypatch):
    import pve_simulator  # imported here: only the Proxmox tests need fakepve

    yield from pve_simulator.serve(tmp_path, monkeypatch)


@pytest.fixture(scope="session")
def start_redis():
    require_redis_server()
    started = []

    def start(**kwargs):
        started.append(RedisServer(**kwargs))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def redis_sentinel():
    require_redis_server()
    require_redis_topologies()
    setup = SentinelSetup()
    yield setup
    setup.stop()
