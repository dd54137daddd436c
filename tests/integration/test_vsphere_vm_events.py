"""The hypervisor_events source on a vSphere simulator of the test's own (govmomi's vcsim): a VM
that its guest powered off is announced once, as unasked, and not again by a restarted source;
a VM powered off through the API (PowerOffVM_Task, with the test's own pyVmomi session) is not
announced, nor a VM of a host that vCenter does not reach.

The simulator's ``/lab/vm-guest-power-off`` (lab/vcsim/guest_power_off.go, lab-only) powers a VM
off as vCenter shows a guest's own shutdown or a crash: no task, one VmPoweredOffEvent of no
user. The oracle is what the test did and the simulator's own answer, read with the test's
pyVmomi session. A VM that stops unasked afterwards (a sentinel) bounds each wait for an event
that must not come: it is announced after anything announced before it.
"""
import base64
import signal
import sqlite3
import ssl
import time
import urllib.parse
import urllib.request

import pytest
import waiting
from event_source_process import SourceProcess
from own_simulator import BIN_DIR, vcsim
from playbook_runner import store_records
from pyVmomi import vim
from simulator_session import Simulator, trust

pytestmark = pytest.mark.lab

FAST = {"base_delay": 0.2, "max_delay": 1, "failure_threshold": 3, "reset_timeout": 2,
        "timeout_validate": 5}
LEASE = 3


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("vcsim"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, vms=3)
    session = Simulator(settings)
    view = session.content.viewManager.CreateContainerView(session.content.rootFolder,
                                                           [vim.VirtualMachine], True)
    vms = sorted((vm.name, vm.config.instanceUuid, vm.runtime.host.name, vm)
                 for vm in view.view if vm.runtime.powerState == "poweredOn")
    try:
        yield settings, session, iter(vms)
    finally:
        session.close()
        vcsim.stop(run_dir)
    vcsim.stop(run_dir)


def _args(settings, store_url):
    return {"providers": {"vcsim": dict(settings, timeout=4)}, "state_store": store_url,
            "resilience": FAST, "lease_seconds": LEASE, "keepalive_interval": 1}


def _guest_power_off(settings, vm):
    """Power ``vm`` off as its guest would, through the lab-only endpoint."""
    context = trust(settings) or ssl.create_default_context()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=context))
    token = base64.b64encode(("%s:%s" % (settings["username"], settings["password"])).encode())
    request = urllib.request.Request(
        "%s://%s:%s/lab/vm-guest-power-off" % (settings["protocol"], settings["host"],
                                               settings["port"]),
        data=urllib.parse.urlencode({"vm": vm}).encode(),
        headers={"Authorization": "Basic " + token.decode()}, method="POST")
    with opener.open(request, timeout=10) as response:
        assert response.status == 204


def _host_record(store, host):
    """What the store holds of ``host`` (read with sqlite3), or None."""
    try:
        return store_records("sqlite://%s" % store, "hypervisor_events").get(
            "hypervisor_events/vsphere:vcsim/" + host)
    except sqlite3.OperationalError:  # the file is there, its table not yet
        return None


def _vm_record(store, host, uuid):
    return ((_host_record(store, host) or {}).get("vms") or {}).get(uuid)


def _recorded(store, vm, state):
    name, uuid, host, _ref = vm
    waiting.wait_for("%s recorded %s" % (name, state),
                     lambda: (_vm_record(store, host, uuid) or {}).get("state") == state, 60.0)


def _events_until(source, sentinel):
    """Every event up to the sentinel's, the sentinel's included."""
    found = [source.next_event()]
    while found[-1].get("vm") != sentinel[0]:
        found.append(source.next_event())
    return found


def test_a_vm_its_guest_powered_off_is_announced_once_and_not_again_after_a_restart(
        sim, tmp_path):
    settings, _session, vms = sim
    vm, sentinel = next(vms), next(vms)
    name, uuid, host, ref = vm
    store = tmp_path / "state.db"
    args = _args(settings, "sqlite://%s" % store)
    first = SourceProcess(tmp_path, "a", args)
    try:
        _recorded(store, vm, "running")
        _guest_power_off(settings, name)
        assert ref.runtime.powerState == "poweredOff"
        announced = first.next_event()
        _recorded(store, vm, "stopped")
    finally:
        first.kill()
    assert announced == {
        "type": "vm_stopped", "provider": "vcsim", "provider_key": "vsphere:vcsim",
        "hypervisor": host, "source": announced["source"], "vm": name, "uuid": uuid,
        "reason": "powered off", "at": announced["at"], "observed": announced["observed"]}
    assert announced["observed"].startswith("vCenter: VmPoweredOffEvent ")
    assert announced["observed"].endswith(" of no task and no user")
    started = time.time()
    again = SourceProcess(tmp_path, "b", args)  # takes the lease once a's has run out
    try:  # announced by b: it watches, and wrote what it saw since it started
        waiting.wait_for("b announcing", lambda: (_host_record(store, sentinel[2]) or {}).get(
            "since", 0) >= started, 60.0)
        _guest_power_off(settings, sentinel[0])
        later = _events_until(again, sentinel)
    finally:
        again.kill()
    assert [(e["type"], e["vm"]) for e in later] == [("vm_stopped", sentinel[0])]
    printed = "".join(p.read_text() for p in tmp_path.glob("*.err"))
    assert settings["password"] not in printed


def test_a_vm_powered_off_through_the_api_is_not_announced(sim, tmp_path):
    settings, session, vms = sim
    vm, sentinel = next(vms), next(vms)
    store = tmp_path / "state.db"
    source = SourceProcess(tmp_path, "a", _args(settings, "sqlite://%s" % store))
    try:
        _recorded(store, vm, "running")
        _recorded(store, sentinel, "running")
        task = vm[3].PowerOffVM_Task()  # as a user would: a task of the test's own session
        waiting.wait_for("the task", lambda: task.info.state == "success", 60.0)
        _recorded(store, vm, "stopped")
        _guest_power_off(settings, sentinel[0])
        found = _events_until(source, sentinel)
    finally:
        source.kill()
    assert [(e["type"], e["vm"]) for e in found] == [("vm_stopped", sentinel[0])]


def test_a_vm_of_a_host_vcenter_does_not_reach_is_not_announced(sim, tmp_path):
    settings, _session, vms = sim
    vm = next(vms)
    sentinel = next(other for other in vms if other[2] != vm[2])
    name, uuid, host, ref = vm
    store = tmp_path / "state.db"
    source = SourceProcess(tmp_path, "a", _args(settings, "sqlite://%s" % store))
    try:
        _recorded(store, vm, "running")
        _recorded(store, sentinel, "running")
        vcsim.set_host_connection(settings, host, "notResponding")
        down = source.next_event()
        _guest_power_off(settings, name)  # what vCenter may read of it once it reaches the host
        vcsim.set_host_connection(settings, host, "connected")
        back = source.next_event()
        _recorded(store, vm, "stopped")
        _guest_power_off(settings, sentinel[0])
        found = _events_until(source, sentinel)
    finally:
        vcsim.set_host_connection(settings, host, "connected")
        source.process.send_signal(signal.SIGKILL)
        source.process.wait()
    assert [(e["type"], e["hypervisor"]) for e in (down, back)] == [
        ("hypervisor_unreachable", host), ("hypervisor_reachable", host)]
    assert [(e["type"], e["vm"]) for e in found] == [("vm_stopped", sentinel[0])]
