"""Backups of the Proxmox VE provider: vzdump archives, followed as PVE tasks. What its
``resilient_virt_backup_*`` hooks do (see ``hookspecs.py``; ``_registry.BuiltinBackups`` calls
``backup_<operation>`` here on the first backup call).

A backup is one vzdump of the VM (``POST /nodes/<node>/vzdump``, mode ``snapshot``: a running
VM keeps running, compressed with zstd) to the storage ``provider.backup_storage``, its notes
:data:`MARKER` and the backup record's name: this is how an archive made by this collection,
and by which record, is told from the others. The vzdump task is followed by its UPID; once it
has ended well, the backup is the newest archive of the VM with those notes on that storage.
Cancelling stops a running vzdump task and deletes what it stored. A restore (qmrestore of the
archive onto the stopped VM or to a new name) is planned, started, followed and cancelled in
``restore.py``.

Not offered: ``incremental`` (vzdump to a storage writes full archives; Proxmox Backup
Server's incremental ones need a PBS storage).

Handle of a backup: ``{kind, name, vm, node, vmid, storage, notes, task}`` (``task``, the UPID,
None until started); of a restore: ``{kind, name, vm, backup, volid, target, same_vm, node,
vmid, storage, after, seen, task}``. Artifact: ``{name, vm, incremental: False, parent: None,
location: {volid, node, storage, vmid}, size_bytes, created_at, complete, managed}``.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    NotFound, NotSupported, VirtError, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import required_text
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.backend import (
    ProxmoxProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.restore import (
    cancel_restore, poll_restore, prepare_restore, start_restore)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.tasks import (
    status_of, wait)

__all__ = ("MARKER", "backup_prepare", "backup_start", "backup_poll", "backup_cancel",
           "backup_list", "backup_delete")

MARKER = "resilient.virt backup "


def _proxmox(provider):
    return isinstance(provider, ProxmoxProvider)


def _created_at(ctime):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(ctime or 0)))


def _archives(session, node, storage, vmid=None):
    """The backup volumes of ``storage`` as ``node`` lists them (of ``vmid`` when given)."""
    params = {"content": "backup"}
    if vmid is not None:
        params["vmid"] = vmid
    return session.get("nodes", node, "storage", storage, "content", **params) or []


def _artifact(volume, node, storage, names):
    notes = str(volume.get("notes") or "")
    managed = notes.startswith(MARKER)
    return {"name": notes[len(MARKER):] if managed else volume["volid"],
            "vm": names.get(volume.get("vmid")), "incremental": False, "parent": None,
            "location": {"volid": volume["volid"], "node": node, "storage": storage,
                         "vmid": volume.get("vmid")},
            "size_bytes": volume.get("size"), "created_at": _created_at(volume.get("ctime")),
            "complete": True, "managed": managed}


def _restore(handle):
    """True for a restore's handle; InvalidSpec naming ``handle.kind`` for neither kind."""
    kind = handle.get("kind") if isinstance(handle, dict) else None
    if kind not in ("backup", "restore"):
        raise field_error("handle.kind", "must be backup or restore, got %r" % (kind,))
    return kind == "restore"


def _ours(session, handle):
    """The handle's archives (its notes, on its storage), newest last."""
    found = [v for v in _archives(session, handle["node"], handle["storage"], handle["vmid"])
             if v.get("notes") == handle["notes"]]
    return sorted(found, key=lambda v: (v.get("ctime") or 0, v["volid"]))


# -- hooks ----------------------------------------------------------------------------------------
def backup_prepare(provider, request):
    """Backup: the VM exists; the handle names its node, VM id and the backup storage. Restore:
    see ``restore.prepare_restore``."""
    if not _proxmox(provider):
        return None
    if not isinstance(request, dict) or request.get("kind") not in ("backup", "restore"):
        raise field_error("request.kind", "must be backup or restore")
    if request["kind"] == "restore":
        return prepare_restore(provider, provider.session(), request)
    name = required_text(request, "name", "request.name")
    vm = required_text(request, "vm", "request.vm")
    if request.get("incremental"):
        raise NotSupported("the proxmox provider takes full vzdump archives only; back up VM %r "
                           "without incremental" % vm)
    session = provider.session()
    record = session.find_vm(vm)
    return {"kind": "backup", "name": name, "vm": vm, "node": record["node"],
            "vmid": record["vmid"], "storage": provider.config["backup_storage"],
            "notes": MARKER + name, "task": None}


def backup_start(provider, handle):
    """``vzdump`` of the VM, unless the handle's task already runs or its archive exists; the
    handle gets the task's UPID. A restore: ``restore.start_restore``."""
    if not _proxmox(provider):
        return None
    if _restore(handle):
        return start_restore(provider, provider.session(), handle)
    if backup_poll(provider, handle)["state"] in ("running", "completed"):
        return handle
    upid = provider.session().post("nodes", handle["node"], "vzdump", vmid=handle["vmid"],
                                   storage=handle["storage"], mode="snapshot", compress="zstd",
                                   **{"notes-template": handle["notes"]})
    return dict(handle, task=upid)


def backup_poll(provider, handle):
    """From the handle's task while it runs or failed, else from the storage's archives: the
    backup is completed when its archive is there. A restore: ``restore.poll_restore``."""
    if not _proxmox(provider):
        return None
    session = provider.session()
    if _restore(handle):
        return poll_restore(session, handle)
    out = {"state": "missing", "progress": None, "message": None, "warnings": [],
           "task": handle.get("task")}
    if handle.get("task"):
        task = status_of(session, handle["task"], "vzdump of VM %r" % handle.get("vm"))
        if task["state"] == "running":
            out["state"] = "running"
            return out
        if task["state"] == "error":
            out.update(state="failed", message=task["error"]["message"])
            return out
    ours = _ours(session, handle)
    if not ours:
        if handle.get("task"):
            out["message"] = "task %s ended, but no archive with the notes %r is on storage %s" \
                % (handle["task"], handle["notes"], handle["storage"])
        return out
    artifact = _artifact(ours[-1], handle["node"], handle["storage"],
                         {handle["vmid"]: handle["vm"]})
    out.update(state="completed", progress=100, artifact=artifact)
    return out


def backup_cancel(provider, handle):
    """Stop the handle's task when it runs and wait until it has ended (an archive may still
    land meanwhile), then delete its archives. A restore: ``restore.cancel_restore``."""
    if not _proxmox(provider):
        return None
    session = provider.session()
    if _restore(handle):
        return cancel_restore(provider, session, handle)
    if handle.get("task") and status_of(session, handle["task"])["state"] == "running":
        session.delete("nodes", handle["node"], "tasks", handle["task"])
        try:
            wait(session, handle["task"], "stopping vzdump of VM %r" % handle.get("vm"))
        except VirtError as err:
            if err.type == "Timeout":
                raise
            # a task stopped on request ends with an error: that is the cancel
    for volume in _ours(session, handle):
        _delete_volume(session, handle["node"], handle["storage"], volume["volid"])
    return True


def backup_list(provider, vm):
    """The backup archives of VM ``vm`` (none when it does not exist) or of every VM, on the
    backup storage of every online node; ``managed`` tells those made by this collection."""
    if not _proxmox(provider):
        return None
    session = provider.session()
    records = session.resources()
    names = {r["vmid"]: r.get("name") for r in session.qemu_of(records)}
    vmid = None
    if vm is not None:
        try:
            vmid = session.find_vm(vm, session.qemu_of(records))["vmid"]
        except NotFound:
            return []
    storage = provider.config["backup_storage"]
    out, seen = [], set()
    for node in sorted(r["node"] for r in records
                       if r.get("type") == "node" and r.get("status") == "online"):
        for volume in _archives(session, node, storage, vmid):
            if volume["volid"] not in seen:  # a shared storage lists them on every node
                seen.add(volume["volid"])
                out.append(_artifact(volume, node, storage, names))
    return sorted(out, key=lambda a: (a["vm"] or "", a["created_at"], a["location"]["volid"]))


def _delete_volume(session, node, storage, volid):
    upid = session.delete("nodes", node, "storage", storage, "content", volid)
    if upid:
        wait(session, upid, "deleting backup %s" % volid)


def backup_delete(provider, artifact):
    """Delete the archive's volume; one already gone counts as deleted."""
    if not _proxmox(provider):
        return None
    location = artifact.get("location") if isinstance(artifact, dict) else None
    if not isinstance(location, dict) or not location.get("volid"):
        raise field_error("artifact", "must be a backup artifact (as listed or polled)")
    session = provider.session()
    node, storage = location.get("node"), location.get("storage")
    if not any(v["volid"] == location["volid"] for v in _archives(session, node, storage)):
        return True
    _delete_volume(session, node, storage, location["volid"])
    return True
