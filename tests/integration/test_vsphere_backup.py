"""Backups of the vsphere provider (snapshots) on the lab's vSphere simulator, through the hooks.

Every call goes through ``open_provider`` and ``GuardedProvider.backup``, as the collection
makes it. The oracle is a pyVmomi session of the test's own (``simulator_session.Simulator``)
reading the VM's snapshot tree and current snapshot with the PropertyCollector.

What govmomi's simulator (Debian's 0.24.2) does not model, so these tests do not check it:
reverting restores no setting (it only moves the current snapshot); tasks end within the call
that starts them, so a running task is never seen and CancelTask does not exist (a cancelled
task is played by replacing what the backend reads of the task); removing a snapshot that is
both a root and the current one crashes the request, so each test removes its VM instead.
"""
import json
import uuid

import pytest
from simulator_session import Simulator, _wait

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotFound, NotSupported)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere import (
    backup as backup_hooks)


@pytest.fixture(scope="module")
def sim(vsphere):
    oracle = Simulator(vsphere)
    yield oracle
    oracle.close()


@pytest.fixture
def open_guarded(vsphere, guarded_provider):
    """``open_guarded()``: a new GuardedProvider (its own session), closed at the end."""
    return lambda: guarded_provider(dict(vsphere, timeout="10s", task_timeout="30s"))


@pytest.fixture
def guarded(open_guarded):
    return open_guarded()


@pytest.fixture
def vm(guarded, sim):
    """A new stopped VM of this test; removed with its snapshots at the end."""
    name = "it-backup-%s" % uuid.uuid4().hex[:8]
    guarded.create({"name": name, "vcpus": 1, "memory_mb": 64})
    yield name
    sim.remove(name)


# -- the oracle -----------------------------------------------------------------------------------
def read(sim, ref, *paths):
    """{path: value} of ``ref`` (unset paths missing): one PropertyCollector call, since the
    simulator fails a plain attribute read of an unset property such as ``snapshot``."""
    from pyVmomi import vmodl

    pc = vmodl.query.PropertyCollector
    spec = pc.FilterSpec(objectSet=[pc.ObjectSpec(obj=ref)],
                         propSet=[pc.PropertySpec(type=type(ref), pathSet=list(paths))])
    result = sim.content.propertyCollector.RetrievePropertiesEx([spec], pc.RetrieveOptions())
    return dict((p.name, p.val) for p in result.objects[0].propSet or [])


def snapshots(sim, name):
    """{snapshot name: (moref, parent snapshot name, description)} of VM ``name``."""
    out = {}

    def walk(nodes, parent):
        for node in nodes or []:
            out[node.name] = (node.snapshot._moId, parent, node.description)
            walk(node.childSnapshotList, node.name)

    info = read(sim, sim.vm(name), "snapshot").get("snapshot")
    walk(info.rootSnapshotList if info is not None else [], None)
    return out


def current(sim, name):
    """moref of VM ``name``'s current snapshot, or None."""
    info = read(sim, sim.vm(name), "snapshot").get("snapshot")
    return info.currentSnapshot._moId if info is not None and info.currentSnapshot else None


def foreign_snapshot(sim, name, snapshot):
    """A snapshot made outside the collection."""
    _wait(sim.vm(name).CreateSnapshot_Task(name=snapshot, description="taken by hand",
                                           memory=False, quiesce=False), "snapshot " + name)


# -- helpers --------------------------------------------------------------------------------------
def take(guarded, vm, name, incremental=False, parent=None):
    """Prepare, start and poll a backup: (handle, poll answer)."""
    handle = guarded.backup("backup_prepare", request={
        "kind": "backup", "name": name, "vm": vm, "incremental": incremental, "parent": parent})
    handle = guarded.backup("backup_start", handle=handle)
    return handle, guarded.backup("backup_poll", handle=handle)


def restore_request(vm, artifact, target=None):
    return {"kind": "restore", "name": "restore-" + artifact["name"], "vm": vm,
            "backup": artifact, "target": target or vm}


def through_json(value):
    """What a later process reading the backup record gets."""
    return json.loads(json.dumps(value))


# -- tests ----------------------------------------------------------------------------------------
def test_snapshot_list_second_with_parent_and_poll_from_a_new_process(guarded, open_guarded,
                                                                      sim, vm):
    request = {"kind": "backup", "name": "b1", "vm": vm, "incremental": False, "parent": None}
    prepared = guarded.backup("backup_prepare", request=request)
    assert prepared == guarded.backup("backup_prepare", request=dict(request))
    assert prepared["task"] is None and prepared["snapshot_name"] == "b1"
    assert snapshots(sim, vm) == {}  # prepare changes nothing

    started = guarded.backup("backup_start", handle=prepared)
    assert started["task"].startswith("task-")
    status = guarded.backup("backup_poll", handle=started)
    assert status["state"] == "completed" and status["progress"] == 100, status
    first = status["artifact"]
    moref, parent, description = snapshots(sim, vm)["b1"]
    assert (first["location"]["snapshot"], first["parent"], first["incremental"]) == (
        moref, None, False)
    assert first["location"]["vm_uuid"] == read(sim, sim.vm(vm), "config.instanceUuid")[
        "config.instanceUuid"]
    assert first["complete"] is True and first["managed"] is True and first["size_bytes"] is None
    assert first["created_at"].endswith("Z") and "T" in first["created_at"]
    assert description.startswith("resilient.virt backup") and current(sim, vm) == moref

    # started again, with or without the task: no second snapshot
    assert guarded.backup("backup_start", handle=started) == started
    assert guarded.backup("backup_start", handle=prepared) == prepared
    assert list(snapshots(sim, vm)) == ["b1"]

    handle, status = take(guarded, vm, "b2", incremental=True, parent=through_json(first))
    second = status["artifact"]
    assert status["state"] == "completed" and status["warnings"] == []
    assert (second["parent"], second["incremental"]) == ("b1", True)
    assert snapshots(sim, vm)["b2"][1] == "b1"  # the oracle: b2 is a child of b1

    foreign_snapshot(sim, vm, "by-hand")
    listed = guarded.backup("backup_list", vm=vm)
    assert [(a["name"], a["parent"], a["managed"]) for a in listed] == [
        ("b1", None, True), ("b2", "b1", True), ("by-hand", "b2", False)]
    assert listed[:2] == [first, second]
    everything = guarded.backup("backup_list", vm=None)
    assert [a for a in everything if a["vm"] == vm] == listed
    assert guarded.backup("backup_list", vm="it-backup-no-such-vm") == []

    # a later process with only the record: same answers, with or without the task id
    fresh = open_guarded()
    assert fresh.backup("backup_poll", handle=through_json(handle)) == through_json(status)
    by_tree = fresh.backup("backup_poll", handle=dict(through_json(handle), task=None))
    assert by_tree["state"] == "completed" and by_tree["artifact"] == second


def test_restore_reverts_the_vm(guarded, sim, vm):
    _handle, status = take(guarded, vm, "before")
    before = status["artifact"]
    guarded.reconfigure(vm, memory_mb=128)  # changed after the snapshot
    _handle, status = take(guarded, vm, "after", incremental=True, parent=before)
    assert current(sim, vm) == status["artifact"]["location"]["snapshot"]

    prepared = guarded.backup("backup_prepare", request=restore_request(vm, through_json(before)))
    assert prepared["snapshot"] == before["location"]["snapshot"] and prepared["target"] == vm
    assert current(sim, vm) != before["location"]["snapshot"]  # prepare changes nothing
    started = guarded.backup("backup_start", handle=prepared)
    assert started["task"].startswith("task-")
    status = guarded.backup("backup_poll", handle=started)
    assert status["state"] == "completed" and status["vm"] == vm, status
    assert current(sim, vm) == before["location"]["snapshot"]  # the oracle: reverted
    # (the simulator's revert moves the current snapshot only: memory_mb stays 128 there)

    assert guarded.backup("backup_start", handle=started) == started  # task known: not redone
    assert guarded.backup("backup_cancel", handle=started) is True  # a restore removes nothing
    assert set(snapshots(sim, vm)) == {"before", "after"}


def test_restore_refused_to_another_vm_or_while_running(guarded, sim, vm):
    _handle, status = take(guarded, vm, "b1")
    with pytest.raises(NotSupported) as refused:
        guarded.backup("backup_prepare", request=restore_request(vm, status["artifact"],
                                                                 target=vm + "-copy"))
    assert "clone" in refused.value.message and vm + "-copy" in refused.value.message
    guarded.power(vm, "on")
    with pytest.raises(Conflict) as running:
        guarded.backup("backup_prepare", request=restore_request(vm, status["artifact"]))
    assert "stop it" in running.value.message
    assert sim.vms_named(vm + "-copy") == []


def test_delete_is_idempotent(guarded, sim, vm):
    _handle, first = take(guarded, vm, "b1")
    _handle, second = take(guarded, vm, "b2", incremental=True, parent=first["artifact"])
    _handle, third = take(guarded, vm, "b3", incremental=True, parent=second["artifact"])

    assert guarded.backup("backup_delete", artifact=through_json(first["artifact"])) is True
    assert set(snapshots(sim, vm)) == {"b2", "b3"}
    assert snapshots(sim, vm)["b2"][1] is None  # its child took its place
    assert guarded.backup("backup_delete", artifact=first["artifact"]) is True  # already gone

    # the current snapshot (with a parent): the parent becomes current
    assert guarded.backup("backup_delete", artifact=third["artifact"]) is True
    assert set(snapshots(sim, vm)) == {"b2"}
    assert current(sim, vm) == second["artifact"]["location"]["snapshot"]
    assert [a["name"] for a in guarded.backup("backup_list", vm=vm)] == ["b2"]

    with pytest.raises(Conflict) as gone:  # an incremental backup on a deleted parent
        guarded.backup("backup_prepare", request={"kind": "backup", "name": "b4", "vm": vm,
                                                  "incremental": True,
                                                  "parent": first["artifact"]})
    assert "full backup" in gone.value.message
    with pytest.raises(NotFound):
        guarded.backup("backup_prepare", request=restore_request(vm, first["artifact"]))


def test_cancel(guarded, sim, vm, monkeypatch):
    _handle, base = take(guarded, vm, "base")
    prepared = guarded.backup("backup_prepare", request={
        "kind": "backup", "name": "b1", "vm": vm, "incremental": False, "parent": None})
    assert guarded.backup("backup_cancel", handle=prepared) is True  # never started
    assert set(snapshots(sim, vm)) == {"base"}

    # the task as if it had been cancelled after making the snapshot: a half-made one
    started = guarded.backup("backup_start", handle=prepared)
    real = backup_hooks.task_props

    def cancelled(session, moref):
        info = real(session, moref)
        if info is not None and moref == started["task"]:
            info = dict(info, **{"info.state": "error", "info.cancelled": True})
            info.pop("info.result", None)
        return info

    monkeypatch.setattr(backup_hooks, "task_props", cancelled)
    assert guarded.backup("backup_poll", handle=started)["state"] == "cancelled"
    assert set(snapshots(sim, vm)) == {"base", "b1"}
    assert guarded.backup("backup_cancel", handle=started) is True
    assert set(snapshots(sim, vm)) == {"base"}
    assert current(sim, vm) == base["artifact"]["location"]["snapshot"]
    assert guarded.backup("backup_cancel", handle=started) is True
    monkeypatch.undo()
    status = guarded.backup("backup_poll", handle=started)  # the task says success; no snapshot
    assert status["state"] == "missing" and "b1" in status["message"]

    # finished before the cancel came: its record will say cancelled, so it goes too
    handle, status = take(guarded, vm, "b2")
    assert status["state"] == "completed"
    assert guarded.backup("backup_cancel", handle=handle) is True
    assert guarded.backup("backup_cancel", handle=dict(handle, task=None)) is True
    assert set(snapshots(sim, vm)) == {"base"}
    assert guarded.backup("backup_poll", handle=handle)["state"] == "missing"


def test_prepare_errors_and_vm_gone(guarded, sim, vm):
    with pytest.raises(NotFound):
        guarded.backup("backup_prepare", request={"kind": "backup", "name": "b1",
                                                  "vm": vm + "-none", "incremental": False})
    with pytest.raises(InvalidSpec) as bad:
        guarded.backup("backup_prepare", request={"kind": "copy", "name": "b1", "vm": vm})
    assert "request.kind" in bad.value.message
    foreign_snapshot(sim, vm, "taken")
    with pytest.raises(Conflict) as taken:
        guarded.backup("backup_prepare", request={"kind": "backup", "name": "taken", "vm": vm,
                                                  "incremental": False})
    assert "did not make" in taken.value.message

    handle, status = take(guarded, vm, "b1")
    sim.remove(vm)  # snapshots die with their VM
    assert guarded.backup("backup_poll", handle=handle)["state"] == "missing"
    assert guarded.backup("backup_delete", artifact=status["artifact"]) is True
    assert guarded.backup("backup_cancel", handle=handle) is True
    with pytest.raises(NotFound):
        guarded.backup("backup_start", handle=handle)


def test_other_providers_are_left_to_other_plugins():
    other = object()
    assert backup_hooks.backup_prepare(provider=other, request={}) is None
    assert backup_hooks.backup_poll(provider=other, handle={}) is None
    assert backup_hooks.backup_list(provider=other, vm=None) is None
    assert backup_hooks.backup_delete(provider=other, artifact={}) is None
