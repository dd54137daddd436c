"""The VMs of a vSphere host that stopped responding recovered onto their failover reservations'
hosts (``recover``: unregistered, their .vmx registered on the target host, powered on), on a
vSphere simulator of the test's own (govmomi's vcsim, lab/vcsim/main.go).

The host's failure is the simulator's lab-only ``/lab/host-connection``: the host reads
``notResponding`` and its VMs ``disconnected``, as on vCenter; that such a VM may be
unregistered is lab-only too (what vCenter allows is in docs/ha.md). The fence that precedes an
evacuation is not made here: the evacuation runs the same after it (``test_fencing.py`` fences).
The oracle is a pyVmomi session of the test's own: where each VM is registered, its power
state, its .vmx path, and how many VMs bear its name.
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from own_simulator import BIN_DIR, vcsim
from pyVmomi import vim
from simulator_session import Simulator

from paths import COLLECTIONS
from playbook_runner import play, run_playbook
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict, NotSupported

pytestmark = pytest.mark.lab

FO = "resilient.virt.failover_reservation"
HOSTS = ("DC0_C0_H0", "DC0_C0_H1", "DC0_C0_H2")
LOST = HOSTS[0]
UNREGISTER_DELAY_MS = 5000  # the window in which a run is killed during its UnregisterVM call
WAIT = 60.0


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("vcsim"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, vms=1,
                           method_delay="UnregisterVM=%d" % UNREGISTER_DELAY_MS)
    session = Simulator(settings)
    yield settings, session
    session.close()
    vcsim.stop(run_dir)


@contextlib.contextmanager
def _lost(settings, host=LOST):
    """``host`` does not respond to its vCenter meanwhile."""
    vcsim.set_host_connection(settings, host, "notResponding")
    try:
        yield
    finally:
        vcsim.set_host_connection(settings, host, "connected")


def _host(session, name):
    view = session.content.viewManager.CreateContainerView(session.content.rootFolder,
                                                           [vim.HostSystem], True)
    try:
        return [h for h in view.view if h.name == name][0]
    finally:
        view.Destroy()


def _make_vm(session, name, host, datastore="LocalDS_0"):
    """A running VM ``name`` on ``host`` with its files on ``datastore``, made with the test's
    own session; its vmPathName."""
    pool = host.parent.resourcePool
    datacenter = host.parent
    while not isinstance(datacenter, vim.Datacenter):
        datacenter = datacenter.parent
    config = vim.vm.ConfigSpec(name=name, numCPUs=1, memoryMB=64,
                               files=vim.vm.FileInfo(vmPathName="[%s]" % datastore))
    ref = _done(datacenter.vmFolder.CreateVM_Task(config=config, pool=pool, host=host))
    _done(ref.PowerOnVM_Task())
    return ref.config.files.vmPathName


def _done(task):
    end = time.monotonic() + WAIT
    while str(task.info.state) not in ("success", "error"):
        assert time.monotonic() < end, "task %s did not end" % task._moId
        time.sleep(0.05)
    assert str(task.info.state) == "success", task.info.error
    return task.info.result


def _registered(session, name):
    """(host name, power state, vmPathName, connection state) of each VM named ``name``."""
    return [(ref.runtime.host.name, str(ref.runtime.powerState), ref.config.files.vmPathName,
             str(ref.runtime.connectionState)) for ref in session.vms_named(name)]


def test_an_evacuation_recovers_a_lost_hosts_vms_onto_their_reservations(sim, tmp_path):
    settings, session = sim
    names = ["rec-web-1", "rec-web-2"]
    defaults = {"state_store": "sqlite:///%s" % (tmp_path / "state.db"), "provider": settings}
    setup = [
        {"name": "create", "loop": names, "resilient.virt.vm": {
            "name": "{{ item }}", "vcpus": 1, "memory_mb": 256, "metadata": {"flavor": "web"},
            "placement": {"host": LOST}, "state": "running"}},
        {"name": "reserve", FO: {"requirements": {"web": 1}, "creator": "rec",
                                 "limit_one_new_per_hypervisor": False}},
    ]
    run = run_playbook(tmp_path, [play(setup, module_defaults=defaults)], name="setup")
    assert run.rc == 0, run
    before = dict((name, _registered(session, name)) for name in names)
    assert all(found[0][0] == LOST for found in before.values()), before
    # the simulator's own VMs on that host require no slot and stay unplaced
    evacuate = {FO: {"creator": "rec", "state": "evacuated", "failed_hosts": [LOST],
                     "allow_partial": True}}
    with _lost(settings):
        assert set(state for name in names for *_h, state in _registered(session, name)) == \
            {"disconnected"}
        run = run_playbook(tmp_path, [play([dict(evacuate, name="evacuate"), dict(evacuate, name="again")],
                                           module_defaults=defaults)], name="evacuate")
        after = dict((name, _registered(session, name)) for name in names)
    assert run.rc == 0, run
    moves = dict((m["name"], m) for m in run.task("evacuate")["evacuation"]["moves"] if m["name"] in names)
    assert sorted(moves) == names, run.task("evacuate")["evacuation"]
    for name in names:
        assert moves[name]["action"] == "recover", moves[name]
        assert moves[name]["to_host"] != LOST
        # exactly one VM of that name, on the reservation's host, running, from the same .vmx
        assert after[name] == [(moves[name]["to_host"], "poweredOn", before[name][0][2], "connected")]
    assert run.task("evacuate")["changed"] is True
    again = [m for m in run.task("again")["evacuation"]["moves"] if m["name"] in names]
    assert [m["action"] for m in again] == ["none", "none"], again
    assert not run.task("again")["changed"]
    assert settings["password"] not in run.output


def test_a_target_that_does_not_see_the_datastore_is_refused_and_nothing_changes(
        sim, guarded_provider, tmp_path):
    settings, session = sim
    directory = tmp_path / "only-h0"
    directory.mkdir()
    lost = _host(session, LOST)
    lost.configManager.datastoreSystem.CreateLocalDatastore(name="OnlyH0", path=str(directory))
    path = _make_vm(session, "rec-local", lost, "OnlyH0")
    provider = guarded_provider(dict(settings))
    with _lost(settings):
        ref = session.vm("rec-local")
        with pytest.raises(Conflict) as refused:
            provider.recover("rec-local", HOSTS[1])
        stayed = _registered(session, "rec-local")
        same = session.vm("rec-local") == ref
    message = str(refused.value)
    assert "host %s does not see datastore OnlyH0" % HOSTS[1] in message, message
    assert stayed == [(LOST, "poweredOn", path, "disconnected")] and same


def test_a_vm_of_a_connected_host_is_refused_and_migrate_stays_refused_off_a_lost_host(
        sim, guarded_provider):
    settings, session = sim
    path = _make_vm(session, "rec-here", _host(session, HOSTS[1]))
    provider = guarded_provider(dict(settings))
    with pytest.raises(Conflict) as connected:
        provider.recover("rec-here", HOSTS[2])
    with _lost(settings, HOSTS[1]), pytest.raises(NotSupported) as migrate:
        provider.migrate("rec-here", HOSTS[2])
    assert "is on host %s, which vCenter reaches" % HOSTS[1] in str(connected.value)
    assert "migrate (resilient.virt.vm_migrate)" in str(connected.value)
    assert "which vCenter reports notResponding" in str(migrate.value)
    assert _registered(session, "rec-here") == [(HOSTS[1], "poweredOn", path, "connected")]


RECOVER = """
import sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import open_provider
import json
config = json.loads(sys.stdin.read())
store = open_store("sqlite:///" + sys.argv[2], environ={})
open_provider(config, resolve_settings({}, environ={}), store, environ={}).recover(sys.argv[3], sys.argv[4])
"""


def test_a_run_killed_after_unregistering_is_finished_by_the_next(sim, guarded_provider, tmp_path):
    settings, session = sim
    path = _make_vm(session, "rec-killed", _host(session, LOST))
    target = HOSTS[2]
    with _lost(settings):
        ref = session.vm("rec-killed")
        run = subprocess.Popen(
            [sys.executable, "-c", RECOVER, COLLECTIONS, str(tmp_path / "killed.db"), "rec-killed", target],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        run.stdin.write(json.dumps(dict(settings)))
        run.stdin.close()
        try:
            # the lab marks a disconnected VM poweredOff when its UnregisterVM call arrives; the
            # simulator then holds the call UNREGISTER_DELAY_MS before it unregisters the VM
            end = time.monotonic() + WAIT
            while str(ref.runtime.powerState) != "poweredOff":
                assert run.poll() is None, run.stdout.read()
                assert time.monotonic() < end, "the run never unregistered the VM"
                time.sleep(0.05)
            run.send_signal(signal.SIGKILL)
        finally:
            run.kill()
            run.wait()
        end = time.monotonic() + WAIT
        while session.vms_named("rec-killed"):  # the simulator ends the call of the dead run
            assert time.monotonic() < end, "the simulator never unregistered the VM"
            time.sleep(0.1)
        provider = guarded_provider(dict(settings))
        vm = provider.recover("rec-killed", target)
        again = provider.recover("rec-killed", target)
        found = _registered(session, "rec-killed")
    assert found == [(target, "poweredOn", path, "connected")]
    assert vm["hypervisor"] == target and vm["state"] == "running" and vm["changed"] is True
    assert again["changed"] is False
    assert os.path.basename(path) == "rec-killed.vmx"
