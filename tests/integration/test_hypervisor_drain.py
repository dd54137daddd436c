"""resilient.virt.hypervisor on the lab's real hypervisors, through real ansible-playbook runs.

hv1 runs three tiny TCG guests with small qcow2 disks. One holds a failover reservation on hv2
(written to the test's own state store), so the rules keep it off hv2: the drain moves the two
others live to hv2 (the test's own libvirt-python connections see them running there with the
reason ``migrated``), fails naming the third and the failover rule, leaves it running on hv1,
and does not mark hv1 (a VM may still be placed there). Once the reservation is gone, a second
drain moves only that VM and marks hv1; a third changes nothing; ``vm`` and ``vm_fleet`` then
refuse to create a VM on hv1, and ``state: active`` ends the maintenance.
"""
import json
import uuid

import libvirt
import pytest
from backup_disks import make_vm, remove_prefixed
from playbook_runner import play, run_playbook

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import Reservation
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

MIGRATED = [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_MIGRATED]
BOOTED = [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_BOOTED]


@pytest.fixture
def two_hvs(lab):
    """(hv1, hv2, conn1, conn2, prefix): the test's own connections; its VMs removed after."""
    hv1, hv2 = lab.hypervisor("hv1"), lab.hypervisor("hv2")
    conn1, conn2 = libvirt.open(hv1.uri), libvirt.open(hv2.uri)
    prefix = "drn-%s-" % uuid.uuid4().hex[:6]
    yield hv1, hv2, conn1, conn2, prefix
    for conn in (conn1, conn2):
        remove_prefixed(conn, prefix)
        conn.close()


def _run(tmp_path, hv1, hv2, tasks, check=False, name="drain"):
    # vCPUs overcommitted: other tests' guests may run on the lab's 2-CPU hypervisors
    providers = dict((hv.name, {"type": "libvirt", "name": hv.name, "uri": hv.uri, "az": "az1",
                                "cpu_allocation_ratio": 32}) for hv in (hv1, hv2))
    defaults = {"providers": providers, "provider": "hv1",
                "state_store": "sqlite://%s" % (tmp_path / "s.db")}
    run = run_playbook(tmp_path, [play([dict(t, ignore_errors=True) for t in tasks],
                                       module_defaults=defaults)], check=check, name=name)
    assert "Traceback" not in run.output, run.output
    return run


def _hypervisor(title, **args):
    return {"name": title, "resilient.virt.hypervisor": args}


def _new_vm(title, name, **args):
    return {"name": title, "resilient.virt.vm": dict(name=name, vcpus=1, memory_mb=64,
                                                     state="stopped"), **args}


def _state(conn, name):
    return conn.lookupByName(name).state()


def _reservation_on_hv2(tmp_path, vm_uuid):
    """A failover reservation on hv2 that protects the VM ``vm_uuid`` of hv1."""
    store = open_store("sqlite://%s" % (tmp_path / "s.db"))
    res = Reservation(name="drain-test-r1", host="hv2", az="az1",
                      resources={"cpu": 1, "memory_mb": 64}, allocations={vm_uuid: "hv1"},
                      creator="drain-test")
    try:
        store.update("failover", "drain-test", lambda old, now: (
            {"reservations": [res.to_dict()]}, None))
    finally:
        store.close()


def test_a_drain_moves_what_it_may_marks_only_when_empty_and_ends(tmp_path, two_hvs):
    hv1, hv2, conn1, conn2, prefix = two_hvs
    names = [prefix + suffix for suffix in ("a", "b", "kept")]
    for name in names:
        make_vm(conn1, hv1, name, size_mib=16)
    _reservation_on_hv2(tmp_path, conn1.lookupByName(names[2]).UUIDString())

    run = _run(tmp_path, hv1, hv2, [
        dict(_hypervisor("plan", targets=["hv2"]), check_mode=True),
        _hypervisor("drain", targets=["hv2"], parallel=2),
        _new_vm("placed", prefix + "new", check_mode=True)], name="partial")
    plan = run.task("plan")
    assert not plan.failed and plan["changed"], run.describe()
    assert sorted(m["vm"] for m in plan["drain"]["planned"]) == names[:2]
    assert [item["vm"] for item in plan["drain"]["left"]] == [names[2]]
    assert plan["drain"]["moved"] == []  # check mode moved nothing
    drain, placed = run.task("drain"), run.task("placed")
    assert drain.failed and drain["error"]["type"] == "Conflict", run.describe()
    assert names[2] in drain["msg"] and "failover" in drain["msg"]
    assert "is not drained, so it is not in maintenance" in drain["msg"]
    assert sorted(m["vm"] for m in drain["drain"]["moved"]) == names[:2], json.dumps(drain["drain"])
    for name in names[:2]:
        assert _state(conn2, name) == MIGRATED and name not in _names(conn1)
    assert _state(conn1, names[2]) == BOOTED and names[2] not in _names(conn2)
    assert not placed.failed and placed["changed"], run.describe()  # hv1 is not marked

    store = open_store("sqlite://%s" % (tmp_path / "s.db"))
    store.delete("failover", "drain-test")
    store.close()
    run = _run(tmp_path, hv1, hv2, [
        _hypervisor("drain", targets=["hv2"]),
        _hypervisor("again", targets=["hv2"]),
        _new_vm("refused", prefix + "new"),
        {"name": "fleet", "resilient.virt.vm_fleet": {"owner": prefix + "fleet", "vms": [
            {"name": prefix + "fleet1", "vcpus": 1, "memory_mb": 64, "state": "stopped"}]}},
        _hypervisor("active", state="active"),
        _hypervisor("active again", state="active"),
        _new_vm("placed", prefix + "new", check_mode=True)], name="drain")
    drain, again, refused = run.task("drain"), run.task("again"), run.task("refused")
    assert not drain.failed and drain["changed"], run.describe()
    assert [m["vm"] for m in drain["drain"]["moved"]] == [names[2]]  # only what was left
    assert all(_state(conn2, name) == MIGRATED for name in names)
    assert not set(names) & _names(conn1)
    assert not again.failed and not again["changed"] and again["drain"]["planned"] == []
    assert refused.failed and refused["error"]["type"] == "Conflict", run.describe()
    assert "hypervisor hv1 of libvirt:hv1 is in maintenance" in refused["msg"]
    fleet = run.task("fleet")
    assert fleet.failed and "hypervisor hv1 of libvirt:hv1 is in maintenance" in json.dumps(
        fleet.result), run.describe()
    assert not {prefix + "new", prefix + "fleet1"} & _names(conn1)
    assert run.task("active")["changed"] and not run.task("active again")["changed"]
    placed = run.task("placed")
    assert not placed.failed and placed["changed"], run.describe()


def _names(conn):
    return set(dom.name() for dom in conn.listAllDomains(0))
