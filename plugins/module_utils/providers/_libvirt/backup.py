"""Backups of the libvirt provider: what its ``resilient_virt_backup_*`` hooks do (see
``hookspecs.py``; ``_registry.BuiltinBackups`` calls ``backup_<operation>`` here on the first
backup call, so that opening a provider does not import this code).

Everything is reached through the libvirt API, so a remote host (``qemu+ssh://``) works like a
local one; no file of the hypervisor is read or written from here. Backups are taken, followed,
cancelled and deleted in ``backup_jobs.py``, restored in ``restore.py``, and kept and listed in
``backup_storage.py``.

Backups live in the directory pool ``provider.backup_pool``: per backup ``R`` one qcow2 volume
per disk, ``R.<disk target>.qcow2``, and the marker ``R.json``, a raw volume holding the artifact
and the VM's inactive definition. The volumes of an incremental backup have those of its parent
as backing images. The marker is written last, once every volume is whole: a backup without a
valid marker is an incomplete leftover, never a finished backup.

Handle of a backup: ``{kind, name, vm, uuid, mode ("push" or "copy"), incremental, parent,
parent_checkpoint, checkpoint, pool, marker, disks: [{target, source, volume, parent_volume}],
warnings}``. Of a restore: ``{kind, name, vm, backup, backup_pool, target, same_vm, pool,
disks: [{target, source, volume}]}``. Artifact: ``{format, name, vm, vm_uuid, mode,
incremental, parent, checkpoint, location: {pool, marker, volumes: [{target, name, path,
capacity_bytes, backing}]}, size_bytes, created_at, complete}``.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import LibvirtProvider
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backup_jobs import (
    cancel_backup, delete_backup, poll_copy, poll_push, prepare_backup, start_copy, start_push)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backup_storage import (
    list_backups)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.restore import (
    cancel_restore, poll_restore, prepare_restore, start_restore)

__all__ = ("backup_prepare", "backup_start", "backup_poll", "backup_cancel", "backup_list",
           "backup_delete")


def _mine(provider):
    return isinstance(provider, LibvirtProvider)


def _kind(mapping, path):
    kind = mapping.get("kind") if isinstance(mapping, dict) else None
    if kind not in ("backup", "restore"):
        raise field_error(path, "must be backup or restore, got %r" % (kind,))
    return kind


def backup_prepare(provider, request):
    if not _mine(provider):
        return None
    session = provider.session()
    if _kind(request, "kind") == "backup":
        return prepare_backup(session, request)
    return prepare_restore(session, request)


def backup_start(provider, handle):
    if not _mine(provider):
        return None
    session = provider.session()
    if _kind(handle, "handle.kind") == "restore":
        return start_restore(session, handle)
    if handle["mode"] == "copy":
        return start_copy(session, handle)
    return start_push(session, handle)


def backup_poll(provider, handle):
    if not _mine(provider):
        return None
    session = provider.session()
    if _kind(handle, "handle.kind") == "restore":
        return poll_restore(session, handle)
    if handle["mode"] == "copy":
        return poll_copy(session, handle)
    return poll_push(session, handle)


def backup_cancel(provider, handle):
    if not _mine(provider):
        return None
    session = provider.session()
    if _kind(handle, "handle.kind") == "restore":
        return cancel_restore(session, handle)
    return cancel_backup(session, handle)


def backup_list(provider, vm):
    if not _mine(provider):
        return None
    return list_backups(provider.session(), vm)


def backup_delete(provider, artifact):
    if not _mine(provider):
        return None
    if not isinstance(artifact, dict):
        raise field_error("artifact", "must be a backup artifact (a dict), got %r" % (artifact,))
    return delete_backup(provider.session(), artifact)
