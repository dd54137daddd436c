"""Snapshots of the vSphere provider: the snapshot capabilities of the contract, each one
vSphere task (CreateSnapshot_Task, RemoveSnapshot_Task, RevertToSnapshot_Task) followed to its
end, read back from the VM's snapshot tree (``snapshot_tree.py``, shared with the backups).

vSphere records a snapshot's power state as the state a revert brings back: ``poweredOn`` (or
``suspended``) for a snapshot with memory, ``poweredOff`` without; ``memory`` and ``vm_state``
are read from it. A quiesce needs VMware Tools running in the guest: without them a quiesced
snapshot is refused before any task starts (``quiesce`` True), or taken unquiesced (best
effort); a quiesce that fails inside the guest fails its task, which makes nothing, and the
best effort then takes the snapshot unquiesced.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict, NotFound
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.faults import (
    fault_name)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.snapshot_tree import (
    VM_PATHS, current_moref, remove_snapshot, snapshot_tree, utc, vm_by_name, vm_props, wait_task)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import new_snapshot

__all__ = ("list_snapshots", "create_snapshot", "delete_snapshot", "revert_snapshot")

_VM_STATE = {"poweredOn": "running", "suspended": "suspended", "poweredOff": "stopped"}
_TOOLS = "guest.toolsRunningStatus"


def _snapshot(props, node, parent):
    state = str(node.state)
    return new_snapshot(
        node.name, description=node.description or "", created=utc(node.createTime),
        parent=parent.name if parent is not None else None, memory=state != "poweredOff",
        quiesced=bool(node.quiesced), vm_state=_VM_STATE.get(state, "stopped"),
        current=node.snapshot._moId == current_moref(props), id=node.snapshot._moId)


def list_snapshots(provider, name):
    _ref, props = vm_by_name(provider, provider.session(), name)
    return [_snapshot(props, node, parent) for node, parent in snapshot_tree(props)]


def _named(provider, props, name, snapshot):
    """The (node, parent) of the one snapshot named ``snapshot``; NotFound, or Conflict when
    several share the name."""
    found = [(node, parent) for node, parent in snapshot_tree(props) if node.name == snapshot]
    if not found:
        raise NotFound("VM %r on %s has no snapshot %r" % (name, provider.key, snapshot))
    if len(found) > 1:
        raise Conflict("VM %r on %s has %d snapshots named %r; rename or remove all but one in "
                       "vCenter" % (name, provider.key, len(found), snapshot))
    return found[0]


def _quiesce_problem(props, name):
    """Why the guest of VM ``name`` cannot be quiesced, or None."""
    tools = str(props.get(_TOOLS))
    if tools != "guestToolsRunning":
        return ("VMware Tools are not running in VM %r (%s); quiescing freezes the guest's "
                "filesystems through them" % (name, tools))
    return None


def _is_quiesce_fault(error):
    return "Quiesce" in (fault_name(error) or "")


def create_snapshot(provider, name, snapshot, description="", memory=False, quiesce=False):
    session = provider.session()
    ref, props = vm_by_name(provider, session, name, VM_PATHS + (_TOOLS,))
    if any(node.name == snapshot for node, _parent in snapshot_tree(props)):
        raise Conflict("VM %r on %s already has a snapshot %r" % (name, provider.key, snapshot))
    not_quiesced = None
    if quiesce and str(props.get("runtime.powerState")) == "poweredOn":
        not_quiesced = _quiesce_problem(props, name)
        if not_quiesced and quiesce != "best_effort":
            raise Conflict("cannot take a quiesced snapshot of VM %r on %s: %s; start them, or "
                           "give quiesce: best_effort or false" % (name, provider.key,
                                                                   not_quiesced))
    info = _take(provider, session, ref, name, snapshot, description, memory,
                 bool(quiesce) and not not_quiesced)
    error = info.get("info.error") if info is not None else None
    if error is not None and quiesce == "best_effort" and _is_quiesce_fault(error):
        not_quiesced = "the guest failed to quiesce (%s)" % fault_name(error)
        info = _take(provider, session, ref, name, snapshot, description, memory, False)
        error = info.get("info.error") if info is not None else None
    if error is not None:
        raise error
    props = vm_props(session, ref)
    made = info.get("info.result") if info is not None else None
    found = [(node, parent) for node, parent in snapshot_tree(props or {})
             if (made is not None and node.snapshot._moId == made._moId) or
             (made is None and node.name == snapshot)]
    if not found:
        raise NotFound("snapshot %r of VM %r is gone from %s right after it was taken"
                       % (snapshot, name, provider.key))
    out = dict(_snapshot(props, *found[-1]))
    if not_quiesced:
        out["not_quiesced"] = not_quiesced
    return out


def _take(provider, session, ref, name, snapshot, description, memory, quiesce):
    task = ref.CreateSnapshot_Task(name=snapshot, description=description, memory=bool(memory),
                                   quiesce=quiesce)
    return wait_task(provider, session, task._moId, "taking snapshot %r of VM %r"
                     % (snapshot, name))


def delete_snapshot(provider, name, snapshot):
    """RemoveSnapshot_Task(removeChildren=False): the children keep their data."""
    session = provider.session()
    ref, props = vm_by_name(provider, session, name)
    node, _parent = _named(provider, props, name, snapshot)
    remove_snapshot(provider, session, ref, props, node)


def revert_snapshot(provider, name, snapshot):
    """RevertToSnapshot_Task: the VM ends in the snapshot's state (powered on with memory)."""
    session = provider.session()
    ref, props = vm_by_name(provider, session, name)
    node, _parent = _named(provider, props, name, snapshot)
    task = node.snapshot.RevertToSnapshot_Task(suppressPowerOn=False)
    info = wait_task(provider, session, task._moId, "reverting VM %r to snapshot %r"
                     % (name, snapshot))
    error = info.get("info.error") if info is not None else None
    if error is not None:
        raise error
    return session.describe(ref, name)
