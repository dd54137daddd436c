"""Backups of the vSphere provider: VM snapshots, followed as vSphere tasks. What its
``resilient_virt_backup_*`` hooks do (see ``hookspecs.py``; ``_registry.BuiltinBackups`` calls
``backup_<operation>`` here on the first backup call).

A backup is a snapshot named after the backup record, its description starting with
:data:`MARKER` (this is how a snapshot made by this collection is told from the others). It
keeps no memory and is not quiesced, so it is crash-consistent: quiescing needs VMware Tools in
the guest (simulated VMs and many guests have none) and memory makes the snapshot as large as
the VM's memory. A restore reverts the stopped VM to a snapshot (to another VM it would be a
clone from the snapshot, not offered yet); snapshots live and die with their VM. Cancelling a
backup removes its snapshot, finished or not.

``incremental`` has no meaning of its own here: every snapshot is a delta on its parent (the
VM's current snapshot when it was taken). It is accepted, kept in the description and the
artifact, and the artifact's ``parent`` always names the parent snapshot, or None for a root.

The snapshot tree and its tasks are read and followed with ``snapshot_tree.py``. A task id in a
handle counts only while the server knows that task for the handle's VM or snapshot;
afterwards the snapshot tree answers.

Handle of a backup: ``{kind, name, vm, vm_moref, vm_uuid, snapshot_name, incremental, parent,
task}``; of a restore: ``{kind, name, vm, target, vm_moref, vm_uuid, snapshot, snapshot_name,
task}`` (``task`` None until started). Artifact: ``{name, vm, incremental, parent, location:
{snapshot, vm, vm_uuid}, size_bytes: None, created_at, complete, managed, quiesced}``.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, NotSupported, classify, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.backend import VSphereProvider
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import required_text
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.faults import (
    fault_name)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    retrieve_view)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.snapshot_tree import (
    VM_PATHS, current_moref, locate_vm, remove_snapshot, snapshot_tree, task_props,
    task_state, utc, vm_by_name, vm_props, wait_task)

__all__ = ("MARKER", "backup_prepare", "backup_start", "backup_poll", "backup_cancel",
           "backup_list", "backup_delete")

MARKER = "resilient.virt backup"


def _vsphere(provider):
    return isinstance(provider, VSphereProvider)


# -- reading --------------------------------------------------------------------------------------
def _managed(node):
    return (node.description or "").startswith(MARKER)


def _ours(props, name):
    """(node, parent) of the snapshots named ``name`` made by this collection, newest last."""
    return sorted(((node, parent) for node, parent in snapshot_tree(props)
                   if node.name == name and _managed(node)), key=lambda pair: pair[0].createTime)


def _find_backup(props, artifact):
    """(node, parent) of the snapshot ``artifact`` names: its moref, else its name and creation
    time; None when it is not in the VM's tree."""
    location = artifact.get("location") if isinstance(artifact.get("location"), dict) else {}
    tree = snapshot_tree(props)
    for node, parent in tree:
        if location.get("snapshot") and node.snapshot._moId == location["snapshot"]:
            return node, parent
    for node, parent in tree:
        if node.name == artifact.get("name") and artifact.get("created_at") and \
                utc(node.createTime) == artifact["created_at"]:
            return node, parent
    return None


def _artifact(ref, props, node, parent, incremental=None):
    description = node.description or ""
    if incremental is None:
        incremental = description.startswith(MARKER + " (incremental")
    return {"name": node.name, "vm": props.get("name"), "incremental": bool(incremental),
            "parent": parent.name if parent is not None else None,
            "location": {"snapshot": node.snapshot._moId, "vm": ref._moId,
                         "vm_uuid": props.get("config.instanceUuid")},
            "size_bytes": None, "created_at": utc(node.createTime), "complete": True,
            "managed": _managed(node), "quiesced": bool(node.quiesced)}


def _our_task(session, handle, vm_ref):
    """The handle's task when the server still knows it as the handle's operation, else None
    (task ids are reused when a server restarts)."""
    info = task_props(session, handle.get("task"))
    if info is None:
        return None
    entity = info.get("info.entity")
    entities = set(filter(None, (vm_ref._moId if vm_ref is not None else None,
                                 handle.get("vm_moref"), handle.get("snapshot"))))
    operation = (info.get("info.descriptionId") or "").lower()
    wanted = "createsnapshot" if handle["kind"] == "backup" else "revert"
    if entity is None or entity._moId not in entities or wanted not in operation:
        return None
    return info


# -- hooks ----------------------------------------------------------------------------------------
def backup_prepare(provider, request):
    """Backup: the VM exists and no foreign snapshot has the record's name. Restore: the
    target is the VM itself, stopped, and the snapshot is still in its tree."""
    if not _vsphere(provider):
        return None
    if not isinstance(request, dict) or request.get("kind") not in ("backup", "restore"):
        raise field_error("request.kind", "must be backup or restore")
    name = required_text(request, "name", "request.name")
    vm = required_text(request, "vm", "request.vm")
    session = provider.session()
    if request["kind"] == "backup":
        return _prepare_backup(provider, session, request, name, vm)
    return _prepare_restore(provider, session, request, name, vm)


def _prepare_backup(provider, session, request, name, vm):
    ref, props = vm_by_name(provider, session, vm)
    foreign = [n for n, p in snapshot_tree(props) if n.name == name and not _managed(n)]
    if foreign:
        raise Conflict("VM %r on %s already has a snapshot named %r that resilient.virt did not "
                       "make; rename or remove it, or name the backup otherwise"
                       % (vm, provider.key, name))
    parent = request.get("parent") if request.get("incremental") else None
    if isinstance(parent, dict) and _find_backup(props, parent) is None:
        raise Conflict("the parent backup %r of VM %r no longer exists on %s; take a full backup"
                       % (parent.get("name"), vm, provider.key))
    return {"kind": "backup", "name": name, "vm": vm, "vm_moref": ref._moId,
            "vm_uuid": props.get("config.instanceUuid"), "snapshot_name": name,
            "incremental": bool(request.get("incremental")),
            "parent": parent.get("name") if isinstance(parent, dict) else None, "task": None}


def _prepare_restore(provider, session, request, name, vm):
    target = request.get("target") or vm
    if target != vm:
        raise NotSupported("restoring VM %r to another VM (%r) is not offered by the vSphere "
                           "provider: a backup is a snapshot of the VM, restored by reverting "
                           "the VM itself (target: %r); a new VM would be a clone from the "
                           "snapshot, which is not offered yet" % (vm, target, vm))
    backup = request.get("backup")
    if not isinstance(backup, dict):
        raise field_error("request.backup", "must be the artifact of the backup to restore")
    ref, props = vm_by_name(provider, session, vm)
    location = backup.get("location") if isinstance(backup.get("location"), dict) else {}
    uuid = location.get("vm_uuid")
    found = _find_backup(props, backup)
    if found is None or (uuid and uuid != props.get("config.instanceUuid")):
        raise NotFound("backup %r is no longer a snapshot of VM %r on %s (snapshots are "
                       "deleted with their VM)" % (backup.get("name"), vm, provider.key))
    if str(props.get("runtime.powerState")) != "poweredOff":
        raise Conflict("VM %r on %s is %s; stop it before restoring it (reverting replaces its "
                       "disks)" % (vm, provider.key, props.get("runtime.powerState")))
    node = found[0]
    return {"kind": "restore", "name": name, "vm": vm, "target": vm, "vm_moref": ref._moId,
            "vm_uuid": props.get("config.instanceUuid"), "snapshot": node.snapshot._moId,
            "snapshot_name": node.name, "task": None}


def _handle_vm(provider, session, handle):
    return locate_vm(provider, session, handle.get("vm"), handle.get("vm_moref"),
                     handle.get("vm_uuid"))


def backup_start(provider, handle):
    """Start CreateSnapshot_Task or RevertToSnapshot_Task without waiting; the handle gets the
    task id. A backup is not started again while its task runs or once its snapshot exists; a
    restore is not started again while its task is known (running or done)."""
    if not _vsphere(provider):
        return None
    session = provider.session()
    found = _handle_vm(provider, session, handle)
    if found is None:
        raise NotFound("VM %r of backup %r not found on %s" % (handle.get("vm"), handle.get("name"),
                                                               provider.key))
    ref, props = found
    if handle["kind"] == "backup":
        if _status(provider, session, handle, found)["state"] in ("running", "completed"):
            return handle
        description = "%s (%s, crash-consistent: no memory, not quiesced)" % (
            MARKER, "incremental" if handle.get("incremental") else "full")
        task = ref.CreateSnapshot_Task(name=handle["snapshot_name"], description=description,
                                       memory=False, quiesce=False)
        return dict(handle, task=task._moId)
    info = _our_task(session, handle, ref)
    if info is not None and task_state(info) in ("running", "completed"):
        return handle
    if str(props.get("runtime.powerState")) != "poweredOff":
        raise Conflict("VM %r on %s is %s; stop it before restoring it"
                       % (props.get("name"), provider.key, props.get("runtime.powerState")))
    if not any(n.snapshot._moId == handle["snapshot"] for n, p in snapshot_tree(props)):
        raise NotFound("backup %r (snapshot %s) no longer exists on VM %r"
                       % (handle.get("snapshot_name"), handle["snapshot"], props.get("name")))
    from pyVmomi import vim

    task = vim.vm.Snapshot(handle["snapshot"], stub=session.si._stub).RevertToSnapshot_Task(
        suppressPowerOn=True)
    return dict(handle, task=task._moId)


def _status(provider, session, handle, found):
    out = {"state": "missing", "progress": None, "message": None, "warnings": [],
           "task": handle.get("task")}
    if found is None:
        out["message"] = "VM %r is gone from %s" % (handle.get("vm"), provider.key)
        return out
    ref, props = found
    info = _our_task(session, handle, ref)
    if info is not None:
        out["state"] = task_state(info)
        if out["state"] == "running":
            out["progress"] = info.get("info.progress")
            return out
        if out["state"] != "completed":
            error = info.get("info.error")
            out["message"] = classify(error, (provider.classify_error,)).message if error \
                is not None else "task %s ended %s" % (handle["task"], out["state"])
            return out
    elif handle.get("task"):
        out["warnings"].append("task %s is no longer known to %s; judged from the snapshots of "
                               "VM %r" % (handle["task"], provider.key, props.get("name")))
    if handle["kind"] == "restore":
        return _restore_status(handle, props, info, out)
    result = info.get("info.result") if info is not None else None
    ours = _ours(props, handle["snapshot_name"])
    # the task's own snapshot when the task tells it, else the newest of that name
    chosen = [(n, p) for n, p in ours if n.snapshot._moId == result._moId] \
        if result is not None else ours[-1:]
    if not chosen:
        out["state"] = "missing"
        out["message"] = "no snapshot %r of VM %r on %s" % (
            handle["snapshot_name"], props.get("name"), provider.key)
        return out
    node, parent = chosen[0]
    artifact = _artifact(ref, props, node, parent, handle.get("incremental"))
    if handle.get("parent") and artifact["parent"] != handle["parent"]:
        out["warnings"].append("snapshot %r builds on %r (the VM's current snapshot when it was "
                               "taken), not on backup %r" % (node.name, artifact["parent"],
                                                             handle["parent"]))
    out.update(state="completed", progress=100, artifact=artifact)
    return out


def _restore_status(handle, props, info, out):
    if info is None and current_moref(props) != handle["snapshot"]:
        out["state"] = "missing"
        return out
    out.update(state="completed", progress=100, vm=props.get("name"))
    return out


def backup_poll(provider, handle):
    """From the handle's task while the server knows it, else from the VM's snapshots: a
    backup is completed when its snapshot exists, a restore when it is the VM's current one."""
    if not _vsphere(provider):
        return None
    session = provider.session()
    return _status(provider, session, handle, _handle_vm(provider, session, handle))


def backup_cancel(provider, handle):
    """CancelTask on the handle's running task, waited on; then a backup's snapshots (named
    after its record, made by this collection) are removed, half-made or not: the record says
    cancelled, so a snapshot finished meanwhile would be left to nobody."""
    if not _vsphere(provider):
        return None
    session = provider.session()
    found = _handle_vm(provider, session, handle)
    if found is None:
        return True
    ref, props = found
    info = _our_task(session, handle, ref)
    if info is not None and task_state(info) == "running":
        from pyVmomi import vim

        try:
            vim.Task(handle["task"], stub=session.si._stub).CancelTask()
        except Exception as exc:  # noqa: BLE001 - a task that ended meanwhile is fine; re-raised
            if fault_name(exc) != "vim.fault.InvalidState":
                raise
        wait_task(provider, session, handle["task"], "cancelling task %s" % handle["task"])
    if handle["kind"] == "backup":
        props = vm_props(session, ref) or {}
        for node, _parent in _ours(props, handle["snapshot_name"]):
            remove_snapshot(provider, session, ref, props, node)
    return True


def backup_list(provider, vm):
    """Every snapshot of VM ``vm`` (none when it does not exist) or of every VM, ``managed``
    telling those made by this collection."""
    if not _vsphere(provider):
        return None
    from pyVmomi import vim

    session = provider.session()
    if vm is None:
        found = retrieve_view(session.content, session.view([vim.VirtualMachine]),
                              {vim.VirtualMachine: VM_PATHS})
    else:
        found = [(ref, vm_props(session, ref)) for ref in session.vm_refs(vm)]
    out = []
    for ref, props in sorted(((r, p) for r, p in found if p),
                             key=lambda item: (item[1].get("name") or "", item[0]._moId)):
        out.extend(_artifact(ref, props, node, parent) for node, parent in snapshot_tree(props))
    return out


def backup_delete(provider, artifact):
    """RemoveSnapshot_Task(removeChildren=False): the children keep their data. A snapshot or
    VM already gone counts as deleted."""
    if not _vsphere(provider):
        return None
    if not isinstance(artifact, dict):
        raise field_error("artifact", "must be a backup artifact (as listed or polled)")
    location = artifact.get("location") if isinstance(artifact.get("location"), dict) else {}
    session = provider.session()
    found = locate_vm(provider, session, artifact.get("vm"), location.get("vm"),
                      location.get("vm_uuid"))
    if found is None:
        return True
    ref, props = found
    backup = _find_backup(props, artifact)
    if backup is not None:
        remove_snapshot(provider, session, ref, props, backup[0])
    return True
