"""The hypervisor_events source on a vSphere simulator of the test's own (govmomi's vcsim): a
host that stops responding to its vCenter is announced once, by the source holding the lease
(the other one first hangs holding it), and back once; a vCenter that answers nothing is
logged, and nothing is announced about its hosts. The confirm step (resilient.virt.hypervisor
state=fenced, in check mode: nothing fenced) asks vCenter: a host it reports lost is confirmed,
one it reaches is a flap, and a frozen vCenter confirms nothing. A migration off a lost host is
refused with the reason (vCenter refuses it; the simulator alone would make it), and an
evacuation's move from the host once connected again migrates the VM.

The simulator's ``/lab/host-connection`` (lab/vcsim/main.go) sets a host's connection state as
vCenter does when it loses the host; the oracle is what the test set there, and the
simulator's own answer read with the test's pyVmomi session. The simulator's password is
nowhere in what the sources print or store.
"""
import json
import signal
import sqlite3
import time

import pytest
import waiting
from event_source_process import SourceProcess
from own_simulator import BIN_DIR, vcsim
from playbook_runner import play, run_playbook, store_records
from ansible_collections.resilient.virt.plugins.module_utils._failover.evacuation import execute_move
from ansible_collections.resilient.virt.plugins.module_utils.errors import NotSupported
from pyVmomi import vim
from simulator_session import Simulator

pytestmark = pytest.mark.lab

HOST = "DC0_C0_H0"
KEY = "hypervisor_events/vsphere:vcsim/" + HOST
FAST = {"base_delay": 0.2, "max_delay": 1, "failure_threshold": 3, "reset_timeout": 2,
        "timeout_validate": 5}
LEASE = 3


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("vcsim"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, vms=1)
    yield run_dir, settings
    vcsim.stop(run_dir)


def _args(settings, store_url):
    provider = dict(settings, timeout=4)  # a frozen vCenter is noticed after 4 s
    return {"providers": {"vcsim": provider}, "state_store": store_url, "resilience": FAST,
            "lease_seconds": LEASE, "keepalive_interval": 1}


def _connection_state(settings, host):
    session = Simulator(settings)
    try:
        view = session.content.viewManager.CreateContainerView(session.content.rootFolder,
                                                               [vim.HostSystem], True)
        return str([h for h in view.view if h.name == host][0].runtime.connectionState)
    finally:
        session.close()


def _record(store_path, key, namespace="hypervisor_events"):
    """The record ``key`` of ``namespace``, read with sqlite3; None before the store is made."""
    try:
        return store_records("sqlite://%s" % store_path, namespace).get(key)
    except sqlite3.OperationalError:  # the file is there, its table not yet
        return None


def _lease(store_path):
    return _record(store_path, "hypervisor_events", namespace="leases")


def _wait_for(what, check, timeout=60.0):
    return waiting.wait_for(what, check, timeout)


def _drained(*sources):
    """Every event the sources printed so far."""
    found = []
    for source in sources:
        while not source.events.empty():
            found.append(source.events.get())
    return found


def test_a_host_lost_by_vcenter_is_announced_once_by_the_lease_holder_and_back_once(
        sim, tmp_path):
    run_dir, settings = sim
    store = tmp_path / "state.db"
    args = _args(settings, "sqlite://%s" % store)
    sources = [SourceProcess(tmp_path, "a", args), SourceProcess(tmp_path, "b", args)]
    try:
        _wait_for("the baseline", lambda: _record(store, KEY))
        owner = _lease(store)["owner"]
        [holder] = [p for p in sources if p.process.pid == int(owner.split("/")[1])]
        [survivor] = [p for p in sources if p is not holder]
        holder.process.send_signal(signal.SIGSTOP)  # hangs holding the lease
        vcsim.set_host_connection(settings, HOST, "notResponding")
        assert _connection_state(settings, HOST) == "notResponding"
        down = [survivor.next_event()]
        received_at = time.time()
        lease = _lease(store)
        holder.process.send_signal(signal.SIGCONT)  # its lease ran out: it must stay silent
        vcsim.set_host_connection(settings, HOST, "connected")
        back = _wait_for("the return", lambda: _drained(*sources))
        time.sleep(LEASE)  # a lease term: a source that would speak twice has done so
        late = _drained(*sources)
    finally:
        vcsim.set_host_connection(settings, HOST, "connected")
        for source in sources:
            source.kill()
    assert [(e["type"], e["hypervisor"], e["provider"]) for e in down + back + late] == [
        ("hypervisor_unreachable", HOST, "vcsim"), ("hypervisor_reachable", HOST, "vcsim")]
    # announced by the new holder, and only once it held the lease
    assert down[0]["source"] == lease["owner"] != owner and lease["since"] <= received_at
    assert down[0]["observed"] == "vCenter reports host %s notResponding (power state " \
                                  "poweredOn)" % HOST
    assert back[0]["unreachable_since"] == down[0]["since"]
    assert _record(store, KEY)["reachable"] is True
    printed = json.dumps(down + back) + "".join(p.read_text() for p in tmp_path.glob("*.err"))
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("state.db*"))
    assert settings["password"] not in printed
    assert settings["password"].encode() not in stored


def test_a_vcenter_that_answers_nothing_is_no_host_outage(sim, tmp_path):
    run_dir, settings = sim
    store = tmp_path / "state.db"
    source = SourceProcess(tmp_path, "a", _args(settings, "sqlite://%s" % store))
    try:
        _wait_for("the baseline", lambda: _record(store, KEY))
        vcsim.pause(run_dir)  # vCenter frozen: its hosts run on, unseen
        try:
            logged = _wait_for("the source saying so", lambda: "does not answer" in (
                tmp_path / "a.err").read_text() and (tmp_path / "a.err").read_text())
        finally:
            vcsim.resume(run_dir)
        _wait_for("the source watching again", lambda: _record(store, KEY)["reachable"])
        time.sleep(LEASE)
        printed = _drained(source)
    finally:
        source.kill()
    assert printed == []
    assert "nothing is announced about its hypervisors until it answers" in logged
    assert settings["password"] not in logged


def _fenced(name):
    return {"name": name, "resilient.virt.hypervisor": {
        "name": name, "state": "fenced", "grace": 1, "confirm_interval": 0.5,
        "fencing": {"type": "redfish", "address": "https://bmc.invalid", "username": "u",
                    "password": "p"}}, "ignore_errors": True}


def test_the_confirm_step_asks_vcenter_and_a_frozen_vcenter_confirms_nothing(sim, tmp_path):
    run_dir, settings = sim
    defaults = {"provider": dict(settings, timeout=3), "state_store": "sqlite://%s" % (
        tmp_path / "s.db")}
    vcsim.set_host_connection(settings, HOST, "notResponding")
    try:
        run = run_playbook(tmp_path, [play([_fenced(HOST), _fenced("DC0_C0_H1")],
                                           module_defaults=defaults)], check=True, name="confirm")
        vcsim.pause(run_dir)
        try:
            frozen = run_playbook(tmp_path, [play([_fenced(HOST)], module_defaults=defaults)],
                                  check=True, name="frozen")
        finally:
            vcsim.resume(run_dir)
    finally:
        vcsim.set_host_connection(settings, HOST, "connected")
    lost, flap = run.task(HOST), run.task("DC0_C0_H1")
    assert not lost.failed and lost["changed"], run.describe()
    assert lost["hypervisor"]["reachable"] is False and lost["fence"] is None
    assert "reports hypervisor %s disconnected" % HOST in lost["hypervisor"]["reason"]
    assert "would fence" in lost["hypervisor"]["reason"]
    assert flap["hypervisor"]["reachable"] is True and not flap["changed"], run.describe()
    unknown = frozen.task(HOST)
    assert unknown.failed and "is not confirmed unreachable" in unknown["msg"], frozen.describe()
    assert unknown["hypervisor"]["reachable"] is None and unknown["fence"] is None
    assert settings["password"] not in run.output + frozen.output


def test_a_migration_off_a_lost_host_is_refused_with_the_reason(sim, guarded_provider):
    _run_dir, settings = sim
    provider = guarded_provider(dict(settings))
    session = Simulator(settings)
    try:
        ref = session.vm("DC0_C0_RP0_VM0")
        lost = session.placement(ref)["host"]
        target = [h for h in ("DC0_C0_H0", "DC0_C0_H1", "DC0_C0_H2") if h != lost][0]
        move = {"vm": "DC0_C0_RP0_VM0", "from_host": lost, "to_host": target}
        vcsim.set_host_connection(settings, lost, "notResponding")
        try:
            with pytest.raises(NotSupported) as refused:
                provider.migrate("DC0_C0_RP0_VM0", target)
            stayed = session.placement(ref)["host"]
        finally:
            vcsim.set_host_connection(settings, lost, "connected")
        moved = execute_move(move, {"name": "DC0_C0_RP0_VM0"}, provider, provider, False)
        assert "which vCenter reports notResponding" in refused.value.message
        assert "registering it again from its datastore" in refused.value.message
        assert stayed == lost
        assert moved["action"] == "migrate" and "error" not in moved
        assert session.placement(ref)["host"] == target
        assert str(ref.runtime.powerState) == "poweredOn"
    finally:
        session.close()
