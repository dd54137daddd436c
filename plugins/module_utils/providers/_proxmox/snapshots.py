"""Snapshots of the Proxmox VE provider: the snapshot capabilities of the contract, each one PVE
task (``POST .../snapshot``, ``DELETE .../snapshot/<name>``, ``POST .../snapshot/<name>/rollback``)
followed by its UPID (``tasks.py``), read back from ``GET .../snapshot``.

PVE lists the VM's own state as a pseudo-snapshot ``current`` whose ``parent`` is the current
snapshot; it is left out of the list and marks that snapshot ``current``. A snapshot with
``vmstate`` holds the VM's memory: a revert brings the VM back running, one without leaves it
stopped. PVE's snapshot call has no quiesce flag and reports none, so a quiesced snapshot is
refused before anything is made (``quiesce`` True), or taken unquiesced with the reason (best
effort); docs/snapshots.md says why the guest agent's fsfreeze is not used instead. A VM with
a disk on a storage that keeps no snapshots (a raw image on a directory storage, say) is
refused by PVE's snapshot task before it makes anything: that refusal is NotSupported here.
"""
import re

from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, NotSupported, VirtError, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import new_snapshot
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.tasks import wait

__all__ = ("list_snapshots", "create_snapshot", "delete_snapshot", "revert_snapshot")

CURRENT = "current"  # PVE's pseudo-entry for the VM's own state
# PVE's snapshot names (its pve-configid format): a letter, then letters, digits, _ and -
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]+$")
MAX_NAME_LENGTH = 40
NO_FEATURE = "snapshot feature is not available"  # PVE's has_feature('snapshot') refusal
NO_QUIESCE = ("Proxmox VE's snapshot API has no quiesce option and does not report whether the "
              "guest's filesystems were frozen")


def _path(record):
    return ("nodes", record["node"], "qemu", record["vmid"], "snapshot")


def _entries(session, record):
    """(PVE's snapshot entries without ``current``, the name of the current snapshot)."""
    entries = session.get(*_path(record)) or []
    current = next((e.get("parent") for e in entries if e.get("name") == CURRENT), None)
    return [e for e in entries if e.get("name") != CURRENT], current


def _parents_first(entries):
    """The entries ordered parents before children, siblings oldest first."""
    names = {e["name"] for e in entries}
    children = {}
    for entry in sorted(entries, key=lambda e: (e.get("snaptime") or 0, e["name"])):
        parent = entry.get("parent") if entry.get("parent") in names else None
        children.setdefault(parent, []).append(entry)
    ordered, stack = [], list(reversed(children.get(None, [])))
    while stack:
        entry = stack.pop()
        ordered.append(entry)
        stack.extend(reversed(children.get(entry["name"], [])))
    return ordered


def _snapshot(entry, current):
    memory = bool(entry.get("vmstate"))
    return new_snapshot(
        entry["name"], description=entry.get("description") or "",
        created=format_time(int(entry["snaptime"])) if entry.get("snaptime") else None,
        parent=entry.get("parent") or None, memory=memory, quiesced=False,
        vm_state="running" if memory else "stopped", current=entry["name"] == current,
        id=entry["name"])


def _listed(session, record):
    entries, current = _entries(session, record)
    return [_snapshot(entry, current) for entry in _parents_first(entries)]


def list_snapshots(provider, name):
    session = provider.session()
    return _listed(session, session.find_vm(name))


def _named(provider, session, record, name, snapshot):
    found = [s for s in _listed(session, record) if s["name"] == snapshot]
    if not found:
        raise NotFound("VM %r on %s has no snapshot %r" % (name, provider.key, snapshot))
    return found[0]


def _check_name(snapshot):
    if not isinstance(snapshot, str) or not _NAME.match(snapshot) or \
            len(snapshot) > MAX_NAME_LENGTH or snapshot.lower() in (CURRENT, "pending"):
        raise field_error("name", "snapshot name %r is not one Proxmox VE takes: a letter, then "
                          "at least one more letter, digit, _ or - (at most %d characters; not "
                          "'current' or 'pending')" % (snapshot, MAX_NAME_LENGTH))


def create_snapshot(provider, name, snapshot, description="", memory=False, quiesce=False):
    """``POST .../snapshot`` (``vmstate`` 1 with memory), its task followed to its end."""
    _check_name(snapshot)
    session = provider.session()
    record = session.find_vm(name)
    if any(s["name"] == snapshot for s in _listed(session, record)):
        raise Conflict("VM %r on %s already has a snapshot %r" % (name, provider.key, snapshot))
    not_quiesced = None
    if quiesce:
        if quiesce != "best_effort":
            raise NotSupported("cannot take a quiesced snapshot of VM %r on %s: %s; give "
                               "quiesce: best_effort (taken unquiesced, and said so), memory: "
                               "true (the running state kept whole), or quiesce: false"
                               % (name, provider.key, NO_QUIESCE))
        not_quiesced = NO_QUIESCE
    params = {"snapname": snapshot}
    if description:
        params["description"] = description
    if memory:
        params["vmstate"] = 1
    try:
        wait(session, session.post(*_path(record), **params),
             "taking snapshot %r of VM %r" % (snapshot, name))
    except VirtError as err:
        if NO_FEATURE not in err.message:
            raise
        raise NotSupported(
            "cannot snapshot VM %r on %s: Proxmox VE says the %s, because a disk of the VM is on "
            "a storage that keeps no snapshots (a raw image on a directory, NFS or CIFS storage, "
            "or thick LVM); move the disk to a qcow2 image, or to LVM-thin, ZFS, Ceph RBD or "
            "Btrfs storage, or back the VM up instead" % (name, provider.key, NO_FEATURE),
            cause=err) from err
    out = dict(_named(provider, session, record, name, snapshot))
    if not_quiesced:
        out["not_quiesced"] = not_quiesced
    return out


def delete_snapshot(provider, name, snapshot):
    """``DELETE .../snapshot/<name>``: PVE makes its children build on its parent."""
    session = provider.session()
    record = session.find_vm(name)
    _named(provider, session, record, name, snapshot)
    wait(session, session.delete(*_path(record) + (snapshot,)),
         "deleting snapshot %r of VM %r" % (snapshot, name))


def revert_snapshot(provider, name, snapshot):
    """``POST .../snapshot/<name>/rollback``, then the VM started when the snapshot holds memory
    and the rollback left it stopped: the VM ends in the snapshot's ``vm_state``."""
    session = provider.session()
    record = session.find_vm(name)
    wanted = _named(provider, session, record, name, snapshot)["vm_state"]
    wait(session, session.post(*_path(record) + (snapshot, "rollback")),
         "reverting VM %r to snapshot %r" % (name, snapshot))
    status = session.get("nodes", record["node"], "qemu", record["vmid"], "status", "current")
    if wanted == "running" and status.get("status") != "running":
        wait(session, session.post("nodes", record["node"], "qemu", record["vmid"], "status",
                                   "start"), "starting VM %r after its revert" % name)
    return session.describe(session.find_vm(name), name)
