# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restoring an evacuated VM from its last completed backup, onto its reservation's host, when
its disks were on the failed hypervisor's local storage: opt-in per VM (``restore_from_backup``:
VM name patterns, matched as ``priorities`` are).

The backup is one the target itself lists (``backup_list``): only a backup kept on storage the
target also sees can be restored there. The restore is the target provider's own (the backup
hooks prepare, start and poll with kind ``restore``); the VM comes back with its name and uuid,
its disks new volumes of the target's storage, and is started. A restore that fails is cancelled
(its volumes removed) and a VM it defined is deleted, so nothing half-made stays on the target.
The record name is the same for the same VM and backup, so a retried run finds its own restore:
its handle, kept in the state store before it starts (``restore_handles.py``), is started again
instead of planning the restore anew.
"""
import hashlib
import time

from ansible_collections.resilient.virt.plugins.module_utils._backup.operations import poll_interval
from ansible_collections.resilient.virt.plugins.module_utils._failover.name_patterns import (
    checked_entries, matches)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import Deadline
from ansible_collections.resilient.virt.plugins.module_utils._time import parse_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    NotFound, Timeout, VirtError)

__all__ = ("validate_restore_from_backup", "restores_from_backup", "last_backup",
           "recovery_point", "restore_record_name", "restore_onto")

# a restore that has not ended after this long is cancelled and the move reported failed
RESTORE_WAIT_SECONDS = 3600.0
_MAX_RECORD = 200


def validate_restore_from_backup(entries, path="restore_from_backup"):
    """Checked VM name patterns from ``[{match: pattern}]``; InvalidSpec names the entry and the
    fix."""
    return [pattern for _where, _entry, pattern in checked_entries(entries, path, ("match",), "{match: 'db-*'}")]


def restores_from_backup(name, patterns):
    """True when one of ``patterns`` (checked) matches the VM name ``name``."""
    return any(matches(pattern, name) for pattern in patterns)


def last_backup(artifacts, name, uuid=None):
    """The newest complete backup of VM ``name`` among ``artifacts`` (a provider's
    ``backup_list``), or None; one recorded with another VM uuid than ``uuid`` (another VM of
    that name) is never taken."""
    mine = [a for a in artifacts or () if a.get("complete") and a.get("vm") == name
            and a.get("created_at") and (uuid is None or a.get("vm_uuid") in (None, uuid))]
    return max(mine, key=lambda a: (parse_time(a["created_at"], "created_at"), a["name"])) if mine else None


def recovery_point(artifact, now):
    """The outcome fields of a restore of ``artifact`` at epoch ``now``: the backup's name, its
    creation time (the recovery point) and its age in whole seconds."""
    created = parse_time(artifact["created_at"], "created_at")
    return {"backup": artifact["name"], "recovery_point": artifact["created_at"],
            "recovery_point_age_seconds": max(0, int(now - created))}


def restore_record_name(backup):
    """The restore's record name: the same for the same backup (a backup is of one VM)."""
    name = "evacuation-" + backup
    if len(name) > _MAX_RECORD:
        name = "evacuation-%s-%s" % (hashlib.sha256(backup.encode("utf-8")).hexdigest()[:16],
                                     backup[-(_MAX_RECORD - 28):])
    return name


def restore_onto(target, definition, uuid, check_mode, handles, now=None, sleep=time.sleep,
                 clock=time.monotonic):
    """Restore VM ``definition`` (its recorded dict, uuid ``uuid``) on ``target`` (a provider)
    from the newest complete backup ``target`` lists, and start it; in check mode only choose the
    backup and plan the restore. ``handles`` (a RestoreHandles) keeps the restore's handle until
    the VM runs; one an earlier run kept is started again. The outcome fields
    (:func:`recovery_point`); VirtError when there is no such backup or the restore fails."""
    name = definition["name"]
    artifacts = target.backup("backup_list", vm=name)
    artifact = last_backup(artifacts, name, uuid)
    if artifact is None:
        raise NotFound(
            "%s has no completed backup of %s that it can reach (it lists %d backup(s) of it, none "
            "complete); keep the VM's backups on storage the failover hosts also see (libvirt: "
            "provider.backup_pool naming a directory pool on shared storage) so that its "
            "reservation's host can restore it" % (target.key, name, len(
                [a for a in artifacts or () if a.get("vm") == name])))
    fields = recovery_point(artifact, time.time() if now is None else now)
    record = restore_record_name(artifact["name"])
    handle = handles.kept(target.key, record)
    if handle is None:
        handle = target.backup("backup_prepare", request={
            "kind": "restore", "name": record, "vm": name, "backup": artifact, "target": name})
        if not check_mode:
            handles.keep(target.key, record, name, handle)
    if check_mode:
        return fields
    try:
        _follow(target, target.backup("backup_start", handle=handle), sleep, clock)
        target.power(name, "on")
    except VirtError as err:
        try:
            _undo(target, handle, name)
        except VirtError as undo:
            err.message = "%s; removing what the restore made failed too (%s)" % (err.message, undo.message)
        else:  # nothing of it is left to resume
            handles.forget(target.key, record)
        raise
    handles.forget(target.key, record)
    return fields


def _follow(target, handle, sleep, clock):
    """Poll the restore of ``handle`` until it ends; VirtError unless it completed."""
    deadline = Deadline.after(RESTORE_WAIT_SECONDS, clock)
    begun = clock()
    while True:
        status = target.backup("backup_poll", handle=handle)
        state = status.get("state")
        if state == "completed":
            return
        if state != "running":
            raise VirtError("the restore of backup %s ended %s: %s" % (
                handle.get("backup", handle.get("name")), state,
                status.get("message") or "; ".join(status.get("warnings") or []) or "no reason given"))
        if deadline.expired():
            raise Timeout("the restore %s did not end within %gs; it is cancelled"
                          % (handle.get("name"), RESTORE_WAIT_SECONDS))
        sleep(min(poll_interval(clock() - begun), deadline.remaining()))


def _undo(target, handle, name):
    """Remove what a failed restore made: its volumes (cancel), and the VM once it is defined."""
    target.backup("backup_cancel", handle=handle)
    try:
        target.describe(name)
    except NotFound:
        return
    target.delete(name)
