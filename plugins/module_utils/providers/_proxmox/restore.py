"""Restores of Proxmox VE vzdump archives: plan, start, follow and cancel them (the hooks are in
``backup.py``).

A restore is PVE's qmrestore through the API: ``POST /nodes/<node>/qemu`` with ``archive`` (the
archive's volume id), a ``qmrestore`` task followed by its UPID, the VM locked ``create`` while
it runs. The disks are made on ``provider.storage``. Onto the VM the backup was taken of (it
must be stopped: PVE's ``force`` replaces its configuration and disks), on its node; onto a new
name, on the node whose storage holds the archive, with a VM id from ``/cluster/nextid`` picked
when planning, the name set and new MAC addresses (``unique``), so that it can run beside the
original. The VM is left stopped.

The handle names the VM id, so a retried start looks first: the handle's task, or a
``qmrestore`` task of that VM id on the node that was not there when the restore was planned
(``after``, ``seen``), is this restore's, and it is followed instead of restoring twice.
Cancelling stops the task and waits for its end; a new VM this restore made is then deleted,
the VM the backup was taken of never is (a restore onto it that PVE interrupted leaves it
locked ``create``; see docs/backup.md).
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, VirtError, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import required_text
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.delete import (
    delete)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.tasks import (
    status_of, wait)

__all__ = ("prepare_restore", "start_restore", "poll_restore", "cancel_restore")

TASK_TYPE = "qmrestore"


def _by_vmid(session, vmid):
    """The ``/cluster/resources`` entry of VM ``vmid`` (VMs and containers), or None."""
    found = [r for r in session.resources("vm") if str(r.get("vmid")) == str(vmid)]
    return found[0] if found else None


def _by_name(session, name):
    try:
        return session.find_vm(name)
    except NotFound:
        return None


def _restore_tasks(session, node, vmid):
    """``(starttime, UPID)`` of the ``qmrestore`` tasks of VM ``vmid`` on ``node``, newest
    first."""
    tasks = session.get("nodes", node, "tasks", vmid=vmid, typefilter=TASK_TYPE,
                        source="all") or []
    return sorted(((int(t.get("starttime") or 0), t["upid"]) for t in tasks
                   if t.get("type") == TASK_TYPE and str(t.get("id")) == str(vmid)), reverse=True)


def _before(session, node, vmid):
    """What the handle keeps of the restore tasks there already: the newest ones' start time
    and UPIDs (``{"after": 0, "seen": []}`` when none)."""
    tasks = _restore_tasks(session, node, vmid)
    after = tasks[0][0] if tasks else 0
    return {"after": after, "seen": [upid for start, upid in tasks if start == after]}


def _task_of(session, handle):
    """This restore's task: the handle's, or one started since it was planned; None."""
    if handle.get("task"):
        return handle["task"]
    started = [upid for start, upid in _restore_tasks(session, handle["node"], handle["vmid"])
               if start > handle["after"] or (start == handle["after"] and upid not in handle["seen"])]
    return started[0] if started else None


def _refuse_running(target, record):
    if record is not None and record.get("status") == "running":
        raise Conflict("VM %r is running; stop it first (resilient.virt.vm with state: stopped): "
                       "a restore replaces its configuration and disks" % target)


# -- prepare ------------------------------------------------------------------------------------
def prepare_restore(provider, session, request):
    """The handle of the restore ``request``: its archive is there; the same VM is stopped; a
    new name is free and gets a new VM id."""
    name = required_text(request, "name", "request.name")
    vm = required_text(request, "vm", "request.vm")
    backup = request.get("backup")
    location = backup.get("location") if isinstance(backup, dict) else None
    if not isinstance(location, dict) or not all(location.get(k) for k in ("volid", "node",
                                                                           "storage")):
        raise field_error("request.backup", "must be the artifact of a completed vzdump backup "
                                            "(with location volid, node and storage)")
    volid, node, storage = location["volid"], location["node"], location["storage"]
    listed = session.get("nodes", node, "storage", storage, "content", content="backup") or []
    if not any(v.get("volid") == volid for v in listed):
        raise NotFound("backup %r cannot be restored: its archive %s is no longer on storage %s "
                       "of node %s" % (backup.get("name"), volid, storage, node))
    target = request.get("target") or vm
    if not isinstance(target, str):
        raise field_error("target", "must be a VM name, got %r" % (target,))
    same = target == vm
    provider.check_name(target, creating=not same)
    record = _by_name(session, target)
    if record is not None and not same:
        raise Conflict("VM %r already exists on %s; restore to a new name, or onto the VM the "
                       "backup was taken of (%r), stopped" % (target, provider.key, vm))
    _refuse_running(target, record)
    if record is not None:
        node, vmid = record["node"], record["vmid"]
    else:
        vmid = int(session.get("cluster", "nextid"))
    return {"kind": "restore", "name": name, "vm": vm, "backup": backup.get("name"),
            "volid": volid, "target": target, "same_vm": record is not None, "node": node,
            "vmid": vmid, "storage": provider.config["storage"], "task": None,
            **_before(session, node, vmid)}


# -- start --------------------------------------------------------------------------------------
def start_restore(provider, session, handle):
    """``qmrestore`` of the archive onto the handle's VM id, unless this restore's task is there
    already; the handle gets the task's UPID."""
    task = _task_of(session, handle)
    if task is not None:
        return dict(handle, task=task)
    record = _by_vmid(session, handle["vmid"])
    if handle["same_vm"]:
        if record is None:
            raise NotFound("VM %r (VM id %s) is gone since the restore was planned; restore "
                           "again to recreate it" % (handle["target"], handle["vmid"]))
        _refuse_running(handle["target"], record)
    elif record is not None or _by_name(session, handle["target"]) is not None:
        raise Conflict("VM id %s or the name %r was taken on %s since the restore was planned; "
                       "restore again under a new record name (it picks a new VM id)"
                       % (handle["vmid"], handle["target"], provider.key))
    params = {"vmid": handle["vmid"], "archive": handle["volid"], "storage": handle["storage"]}
    if handle["same_vm"]:
        params["force"] = 1
    else:
        params.update(name=handle["target"], unique=1)
    upid = session.post("nodes", handle["node"], "qemu", **params)
    return dict(handle, task=upid)


# -- poll ---------------------------------------------------------------------------------------
def poll_restore(session, handle):
    """From this restore's task: running, failed with its error, or completed once the VM is
    there."""
    out = {"state": "missing", "progress": None, "message": None, "warnings": [], "task": None}
    task = _task_of(session, handle)
    if task is None:
        return out
    out["task"] = task
    status = status_of(session, task, "restore of backup %r" % handle.get("backup"))
    if status["state"] == "running":
        out["state"] = "running"
    elif status["state"] == "error":
        out.update(state="failed", message=status["error"]["message"])
    elif _by_vmid(session, handle["vmid"]) is None:
        out.update(state="failed", message="task %s ended, but VM id %s is not on the cluster"
                   % (task, handle["vmid"]))
    else:
        out.update(state="completed", progress=100, vm=handle["target"])
    return out


# -- cancel -------------------------------------------------------------------------------------
def cancel_restore(provider, session, handle):
    """Stop this restore's task and wait for its end; delete the new VM it made (never the VM
    the backup was taken of)."""
    task = _task_of(session, handle)
    if task is None:
        return True
    if status_of(session, task)["state"] == "running":
        session.delete("nodes", handle["node"], "tasks", task)
        try:
            wait(session, task, "stopping the restore of backup %r" % handle.get("backup"))
        except VirtError as err:
            if err.type == "Timeout":
                raise
            # a task stopped on request ends with an error: that is the cancel
    record = _by_vmid(session, handle["vmid"])
    if not handle["same_vm"] and record is not None:
        delete(provider, "/%s/%s" % (record["node"], record["vmid"]))
    return True
