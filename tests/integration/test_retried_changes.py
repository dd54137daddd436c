"""A changing call whose attempts time out while a slow provider still works is done once.

What every backend must pass (``test_every_backend_does_a_slow_change_once``): on the libvirt
backend (libvirt's in-process test driver), the vSphere backend (the simulator) and the example
third-party backend, the first attempt of create, power on, reconfigure and delete is held back
past its time limit just before it reaches the backend (a test plugin), so its work lands after
the attempt was abandoned; each operation must reach the backend once and leave the provider,
read by the test's own means (libvirt-python, pyVmomi, the backend's JSON file), as asked.

A vSphere simulator of the test's own answers CreateVM_Task, CloneVM_Task, ReconfigVM_Task and
Destroy_Task only after 8 s (it carries them out then, whether or not the client still waits),
and every call here has a 3 s attempt limit: the first attempt is abandoned while its request is
still pending, and each retry must follow it instead of sending another. Proof, read through a
pyVmomi session of the test's own: the number of VMs of the name, and the simulator's own tasks
(kind and entity name) in its task manager.
"""
import json
import threading
import time
import uuid

import libvirt
import pytest
from provider_testing import TEST_URI
from own_simulator import BIN_DIR, vcsim
from playbook_runner import play, run_playbook
from simulator_session import Simulator

from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl

SLOW = 8000  # ms before the simulator answers each slowed method (and does its work)
SLOWED = ("CreateVM_Task", "CloneVM_Task", "ReconfigVM_Task", "Destroy_Task")
RESILIENCE = {"timeout_mutating": "3s", "base_delay": "1s", "max_attempts": 4,
              "failure_threshold": 20}


@pytest.fixture(scope="module")
def slow_sim(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("slow-changes"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, vms=1, method_delay=",".join(
        "%s=%d" % (method, SLOW) for method in SLOWED))
    yield dict(settings, name="slow-vcsim")
    vcsim.stop(run_dir)


@pytest.fixture
def oracle(slow_sim):
    sim = Simulator(slow_sim)
    yield sim
    sim.close()


def _tasks(sim, kind, ref):
    """The simulator's tasks whose kind (``VirtualMachine.cloneVm``...) contains ``kind`` and
    whose entity is VM ``ref`` (a pair: its id and name, read while it exists)."""
    found = []
    for task in sim.content.taskManager.recentTask:
        try:
            info = task.info
        except Exception:  # noqa: BLE001 - a task the simulator forgot
            continue
        if kind.lower() in info.descriptionId.lower() and info.entityName in ref:
            found.append(info.key)
    return found


def _settled(sim, name, seconds=SLOW / 1000.0 + 4):
    """Give any request still pending in the simulator time to land before counting."""
    time.sleep(seconds)
    return sim.vms_named(name)


def _guarded(settings, tmp_path):
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import (
        resolve_settings)
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
    from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
        open_provider)

    store = open_store("sqlite:///%s" % (tmp_path / "state.db"), environ={})
    return open_provider(dict(settings, timeout="30s"), resolve_settings(RESILIENCE, environ={}),
                         store, environ={})


@pytest.mark.parametrize("task_path", ["worker", "module"], indirect=True)
def test_the_vm_module_creates_once(slow_sim, oracle, tmp_path, task_path):
    name = "dup-%s" % uuid.uuid4().hex[:6]
    task = {"name": "create", "resilient.virt.vm": {
        "name": name, "vcpus": 1, "memory_mb": 32, "state": "present", "resilience": RESILIENCE}}
    try:
        run = run_playbook(tmp_path, [play([task], module_defaults={
            "provider": slow_sim, "state_store": "sqlite:///%s" % (tmp_path / "state.db")})])
        assert run.rc == 0, run
        created = run.task("create")
        assert created["changed"] is True and created["actions"] == ["create"], created
        assert len(_settled(oracle, name)) == 1
    finally:
        oracle.remove(name)


def test_the_fleet_creates_each_vm_once(slow_sim, oracle, tmp_path):
    names = ["fleet-%s-%d" % (uuid.uuid4().hex[:4], i) for i in range(3)]
    task = {"name": "fleet", "resilient.virt.vm_fleet": {
        "owner": "dup", "provider": slow_sim, "resilience": RESILIENCE,
        "vms": [{"name": n, "vcpus": 1, "memory_mb": 32, "state": "present"} for n in names]}}
    try:
        run = run_playbook(tmp_path, [play([task], module_defaults={
            "state_store": "sqlite:///%s" % (tmp_path / "state.db")})])
        assert run.rc == 0, run
        assert run.task("fleet")["summary"]["created"] == 3, run.task("fleet").result
        time.sleep(SLOW / 1000.0 + 4)
        assert dict((n, len(oracle.vms_named(n))) for n in names) == dict.fromkeys(names, 1)
    finally:
        for n in names:
            oracle.remove(n)


def test_clone_reconfigure_and_delete_are_each_done_once(slow_sim, oracle, tmp_path):
    source = sorted(n for n in oracle.power_by_name() if n.startswith("DC0_"))[0]
    name = "clone-%s" % uuid.uuid4().hex[:6]
    guarded = _guarded(slow_sim, tmp_path)
    try:
        made = guarded.create({"name": name, "template": source})
        assert made["name"] == name and len(_settled(oracle, name)) == 1
        template = oracle.vm(source)
        assert len(_tasks(oracle, "clone", (template._moId, source))) == 1

        vm = oracle.vm(name)
        ref = (vm._moId, name)
        memory = made["memory_mb"] * 2
        changed = guarded.reconfigure(name, memory_mb=memory)
        assert changed["memory_mb"] == memory == oracle.state(vm)["memory_mb"]
        time.sleep(SLOW / 1000.0 + 1)
        assert len(_tasks(oracle, "reconfig", ref)) == 1

        guarded.delete(name)
        assert _settled(oracle, name) == []
        assert len(_tasks(oracle, "destroy", ref)) == 1
    finally:
        guarded.close()
        oracle.remove(name)


class HoldFirstAttempt:
    """A plugin that holds the first attempt of each changing operation for ``seconds`` just
    before it reaches the backend, and counts the attempts that reach it."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.reached = []
        self.lock = threading.Lock()

    @hookimpl
    def resilient_virt_before_call(self, operation, arguments):
        with self.lock:
            first = operation not in self.reached
            self.reached.append(operation)
        if first and operation in ("create", "power", "reconfigure", "delete"):
            time.sleep(self.seconds)


def _libvirt_backend(tmp_path, vsphere_settings):
    conn = libvirt.open(TEST_URI)

    def read(name):
        try:
            dom = conn.lookupByName(name)
        except libvirt.libvirtError:
            return None
        return {"running": dom.isActive() == 1, "memory_mb": dom.maxMemory() // 1024}

    return {"type": "libvirt", "name": "test-driver", "uri": TEST_URI}, read, conn.close


def _vsphere_backend(tmp_path, vsphere_settings):
    sim = Simulator(vsphere_settings)

    def read(name):
        state = sim.state(sim.vm(name))
        return None if state is None else {"running": state["power"] == "poweredOn",
                                           "memory_mb": state["memory_mb"]}

    return dict(vsphere_settings, name="vcsim-held"), read, sim.close


def _example_backend(tmp_path, vsphere_settings):
    path = str(tmp_path / "vms.json")

    def read(name):
        try:
            with open(path) as f:
                record = json.load(f).get(name)
        except FileNotFoundError:
            return None
        return None if record is None else {"running": record["state"] == "running",
                                            "memory_mb": record["memory_mb"]}

    return {"type": "memory_example", "name": "example", "path": path}, read, lambda: None


@pytest.mark.parametrize("backend", [_libvirt_backend, _vsphere_backend, _example_backend],
                         ids=["libvirt", "vsphere", "thirdparty"])
def test_every_backend_does_a_slow_change_once(backend, lab, vsphere, tmp_path):
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import (
        resolve_settings)
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
    from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
        open_provider)

    config, read, close = backend(tmp_path, vsphere)
    hold = HoldFirstAttempt(2.5)
    settings = resolve_settings({"timeout_mutating": "1s", "base_delay": "0.5s",
                                 "max_attempts": 6, "failure_threshold": 50}, environ={})
    store = open_store("sqlite:///%s" % (tmp_path / "state.db"), environ={})
    guarded = open_provider(config, settings, store, plugins=[hold], environ={})
    name = "held-%s" % uuid.uuid4().hex[:6]
    try:
        guarded.create({"name": name, "vcpus": 1, "memory_mb": 64})
        assert read(name) == {"running": False, "memory_mb": 64}
        guarded.reconfigure(name, memory_mb=128)
        assert read(name)["memory_mb"] == 128
        guarded.power(name, "on")
        assert read(name)["running"] is True
        guarded.power(name, "off")
        guarded.delete(name)
        assert read(name) is None
        reached = [op for op in hold.reached if op in ("create", "power", "reconfigure",
                                                       "delete")]
        assert reached == ["create", "reconfigure", "power", "power", "delete"], hold.reached
    finally:
        try:
            guarded.delete(name)
        except Exception:  # noqa: BLE001 - gone already, as it should be
            pass
        guarded.close()
        close()
