"""A vSphere VM's snapshot tree and the tasks that change it, read and followed as the backups
(``backup.py``) and the snapshot operations (``snapshots.py``) of the vSphere provider both
need them.

Tasks are read through the PropertyCollector by property path (``info.state``...), not as a
whole ``TaskInfo``: that of a snapshot's task does not parse when the server names the snapshot
as its entity, as govmomi's simulator does.
"""
import time
from datetime import timezone

from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound, Timeout
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.faults import (
    fault_name)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    retrieve)

__all__ = ("VM_PATHS", "TASK_PATHS", "GONE", "CANCELLED", "utc", "vm_props", "vm_by_name",
           "locate_vm", "snapshot_tree", "current_moref", "task_props", "task_state", "wait_task",
           "remove_snapshot")

VM_PATHS = ("name", "config.instanceUuid", "runtime.powerState", "snapshot")
TASK_PATHS = ("info.state", "info.progress", "info.error", "info.result", "info.entity",
              "info.descriptionId", "info.cancelled")
GONE = "vmodl.fault.ManagedObjectNotFound"
CANCELLED = "vmodl.fault.RequestCanceled"
POLL_INTERVAL = (0.02, 1.0)


def utc(value):
    """RFC 3339 UTC text of a datetime (naive ones are taken as UTC), or None."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def vm_props(session, ref, paths=VM_PATHS):
    """``paths`` (default VM_PATHS) of VM ``ref``, or None when the server no longer knows it."""
    from pyVmomi import vim

    try:
        found = retrieve(session.content, [ref], {vim.VirtualMachine: paths})
    except Exception as exc:  # noqa: BLE001 - only a vanished object is an answer; re-raised
        if fault_name(exc) == GONE:
            return None
        raise
    return found[0][1] if found else None


def vm_by_name(provider, session, name, paths=VM_PATHS):
    """(ref, props) of the one VM named ``name``; NotFound or Conflict otherwise."""
    ref = session.find_vm(name)
    props = vm_props(session, ref, paths)
    if props is None:
        raise NotFound("VM %r not found on %s" % (name, provider.key))
    return ref, props


def locate_vm(provider, session, name, moref=None, uuid=None):
    """(ref, props) of a VM by moref, then instance uuid, then name, each tried only when the
    one before fails (the uuid must match whenever it is known); None when it is gone."""
    from pyVmomi import vim

    lookups = (lambda: [vim.VirtualMachine(moref, stub=session.si._stub)] if moref else [],
               lambda: [session.content.searchIndex.FindByUuid(None, uuid, True, True)]
               if uuid else [],
               lambda: session.vm_refs(name) if name else [])
    for lookup in lookups:
        for ref in lookup():
            props = None if ref is None else vm_props(session, ref)
            if props is not None and (not uuid or props.get("config.instanceUuid") == uuid):
                return ref, props
    return None


def snapshot_tree(props):
    """[(node, parent node or None)] of a VM's snapshot tree, parents before children."""
    out = []

    def walk(nodes, parent):
        for node in nodes or []:
            out.append((node, parent))
            walk(node.childSnapshotList, node)

    info = props.get("snapshot")
    walk(info.rootSnapshotList if info is not None else [], None)
    return out


def current_moref(props):
    info = props.get("snapshot")
    current = info.currentSnapshot if info is not None else None
    return current._moId if current is not None else None


def task_props(session, moref):
    """{path: value} of task ``moref`` (TASK_PATHS), or None when the server forgot it."""
    from pyVmomi import vim

    if not moref:
        return None
    try:
        found = retrieve(session.content, [vim.Task(moref, stub=session.si._stub)],
                         {vim.Task: TASK_PATHS})
    except Exception as exc:  # noqa: BLE001 - only a vanished task is an answer; re-raised
        if fault_name(exc) == GONE:
            return None
        raise
    return found[0][1] if found else None


def task_state(info):
    state = str(info.get("info.state"))
    if state in ("queued", "running"):
        return "running"
    if state == "success":
        return "completed"
    error = info.get("info.error")
    if info.get("info.cancelled") or (error is not None and fault_name(error) == CANCELLED):
        return "cancelled"
    return "failed"


def wait_task(provider, session, moref, what):
    """Poll task ``moref`` until it ends; its TaskInfo paths (None when forgotten), or Timeout.
    The task is named to the retry first (``Provider.started``); an abandoned attempt polls on."""
    provider.started(moref)
    limit = provider.config["task_timeout"]
    end = time.monotonic() + limit
    delay, longest = POLL_INTERVAL
    while True:
        info = task_props(session, moref)
        if info is None or task_state(info) != "running":
            return info
        left = end - time.monotonic()
        if left <= 0:
            raise Timeout("%s on %s still running after %gs (task %s)"
                          % (what, provider.key, limit, moref),
                          details={"task_id": moref, "timeout": limit})
        time.sleep(min(delay, left))
        delay = min(delay * 2, longest)


def remove_snapshot(provider, session, ref, props, node):
    """RemoveSnapshot_Task(removeChildren=False), waited on; a snapshot already gone is fine."""
    try:
        task = node.snapshot.RemoveSnapshot_Task(removeChildren=False)
    except Exception as exc:  # noqa: BLE001 - only a vanished snapshot is an answer; re-raised
        if fault_name(exc) == GONE:
            return
        raise
    info = wait_task(provider, session, task._moId,
                     "removing snapshot %r of VM %r" % (node.name, props.get("name")))
    error = info.get("info.error") if info is not None else None
    if error is not None:
        current = vm_props(session, ref)
        if current is None or not any(n.snapshot._moId == node.snapshot._moId
                                      for n, p in snapshot_tree(current)):
            return
        raise error
