"""Backups of libvirt domains: plan, start, follow, cancel and delete them (the layout in the
backup pool, the handle and the artifact are described in ``backup.py``).

* A running VM is backed up by a push-mode backup job (``backupBegin``) that creates a
  checkpoint named after the backup (a bitmap per disk). Its volumes are made first as qcow2 v3
  images and the job reuses them; those of an incremental backup are overlays of the parent's
  volumes, so that the clusters the job does not write (unchanged since the parent's
  checkpoint) read through to the parent: each backup reads as a whole disk through its chain.
* A stopped VM has no bitmap to track changes: ``start`` copies its disks (``createXMLFrom``)
  and writes the marker before it returns. An incremental request then makes a full copy, with
  a warning.

``poll`` decides from libvirt alone - the marker, the domain's backup job and its targets, the
statistics of its last completed job, the checkpoint, volumes still being copied - so a run that
adopts a handle gets the answer the run that started it would get.
"""
import re
import time
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, NotSupported, Timeout, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import required_text
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backup_storage import (
    artifact_of, drop_backup_volumes, missing_status, poll_status, read_marker, record_name,
    volumes_by_backup, write_marker)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.domain import (
    domain_disks)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.volumes import (
    backing_path, being_copied, directory_pool, drop_volume, find_volume, forget_volumes,
    volume_at, volume_xml)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    is_error, load as libvirt)

__all__ = ("prepare_backup", "start_push", "start_copy", "poll_push", "poll_copy",
           "cancel_backup", "delete_backup")

_TARGET_RE = re.compile(r"^[a-z]+$")
_MAX_NAME = 255  # bytes of a file name
_ABORT_WAIT = 30.0
_SKIPPED_DEVICES = ("cdrom", "floppy")
# virDomainJobType
_JOB_NONE, _JOB_COMPLETED, _JOB_CANCELLED = 0, 3, 5


# -- domains, jobs and checkpoints --------------------------------------------------------------
def _domain(conn, uuid):
    try:
        return conn.lookupByUUIDString(uuid)
    except Exception as exc:
        if is_error(exc, "NO_DOMAIN"):
            return None
        raise


def _checkpoint(dom, name):
    try:
        return dom.checkpointLookupByName(name)
    except Exception as exc:
        if is_error(exc, "NO_DOMAIN_CHECKPOINT"):
            return None
        raise


def _created(checkpoint):
    lv = libvirt()
    text = ET.fromstring(checkpoint.getXMLDesc(lv.VIR_DOMAIN_CHECKPOINT_XML_NO_DOMAIN)).findtext(
        "creationTime")
    return int(text) if text else 0


def _drop_checkpoint(dom, name):
    """Delete checkpoint ``name`` of ``dom`` (gone already is fine). A stopped domain's bitmaps
    cannot be removed from its images, so only the checkpoint's metadata goes then."""
    lv = libvirt()
    checkpoint = _checkpoint(dom, name)
    if checkpoint is None:
        return
    flags = 0 if dom.isActive() else lv.VIR_DOMAIN_CHECKPOINT_DELETE_METADATA_ONLY
    try:
        checkpoint.delete(flags)
    except Exception as exc:
        if is_error(exc, "NO_DOMAIN_CHECKPOINT"):
            return
        if flags or not is_error(exc, "OPERATION_INVALID", "OPERATION_UNSUPPORTED", "NO_SUPPORT"):
            raise
        checkpoint.delete(lv.VIR_DOMAIN_CHECKPOINT_DELETE_METADATA_ONLY)  # stopped meanwhile


def _job(dom):
    """Statistics of the domain's active job, or None (no job, or the domain is stopped)."""
    try:
        stats = dom.jobStats(0)
    except Exception as exc:
        if is_error(exc, "OPERATION_INVALID", "NO_DOMAIN"):
            return None
        raise
    return None if stats.get("type", _JOB_NONE) == _JOB_NONE else stats


def _backup_targets(dom):
    """{disk target: target file} of the domain's running backup job, or None."""
    try:
        xml = dom.backupGetXMLDesc(0)
    except Exception as exc:
        if is_error(exc, "NO_DOMAIN_BACKUP", "OPERATION_INVALID", "NO_DOMAIN"):
            return None
        raise
    found = {}
    for node in ET.fromstring(xml).findall("disks/disk"):
        target = node.find("target")
        if target is not None and node.get("backup", "yes") == "yes":
            found[node.get("name")] = target.get("file") or target.get("dev")
    return found


def _our_job(dom, paths):
    """Statistics of the running backup job of ``dom`` when it writes one of ``paths``
    ({disk target: volume path}), else None."""
    stats = _job(dom)
    if stats is None or stats.get("operation") != libvirt().VIR_DOMAIN_JOB_OPERATION_BACKUP:
        return None
    targets = _backup_targets(dom)
    if not targets or not any(targets.get(t) == p for t, p in paths.items() if p):
        return None
    return stats


def _progress(stats):
    total, done = stats.get("disk_total"), stats.get("disk_processed")
    if not total or done is None:
        return None
    return max(0, min(100, int(100 * done / total)))


def _outcome(dom, name):
    """How the ended backup job that created checkpoint ``name`` went: ("completed", None),
    ("cancelled", None), ("failed", message), or None when libvirt no longer knows it. The
    statistics of the domain's last completed job are ours when that job was a backup and
    ``name`` is the newest checkpoint (every job of this backend creates one)."""
    lv = libvirt()
    stats = dom.jobStats(lv.VIR_DOMAIN_JOB_STATS_COMPLETED | lv.VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED)
    if stats.get("operation") != lv.VIR_DOMAIN_JOB_OPERATION_BACKUP:
        return None
    leaves = dom.listAllCheckpoints(lv.VIR_DOMAIN_CHECKPOINT_LIST_LEAVES)
    newest = max(leaves, key=lambda c: (_created(c), c.getName() == name), default=None)
    if newest is None or newest.getName() != name:
        return None
    if stats.get("type") == _JOB_COMPLETED and stats.get("success", True):
        return "completed", None
    if stats.get("type") == _JOB_CANCELLED and dom.isActive():
        return "cancelled", None
    if stats.get("type") == _JOB_CANCELLED:
        return "failed", "the VM stopped while the backup job ran"
    return "failed", "the backup job failed: %s" % (stats.get("errmsg") or "libvirt gives no reason")


def _wait_for_targets_closed(dom, handle):
    """Return once QEMU has closed the backup's volumes. libvirt reports a push job completed
    before it detaches the target images, and QEMU writes a qcow2 image's metadata when it
    closes it: a volume read in between shows clusters missing. The detach runs inside a
    domain job, so an API call that takes a query job (``blockInfo``) waits for it to end."""
    try:
        dom.blockInfo(handle["disks"][0]["target"])
    except Exception as exc:
        if not is_error(exc, "NO_DOMAIN", "INVALID_ARG", "OPERATION_INVALID"):
            raise


# -- prepare ------------------------------------------------------------------------------------
def prepare_backup(session, request):
    """The handle of the backup ``request``: a push-mode job for a running VM, a copy for a
    stopped one. Nothing is made yet."""
    provider, conn = session.provider, session.connection
    lv = libvirt()
    name = record_name(request, "name", "name")
    vm = required_text(request, "vm", "vm")
    provider.check_name(vm)
    dom = session.lookup(vm)
    pool = directory_pool(provider, conn, "backup_pool")
    uuid = dom.UUIDString()
    running = dom.isActive()
    _vol, existing = read_marker(conn, pool, name)
    if existing is not None and existing.get("vm_uuid") != uuid:
        raise Conflict("a backup named %r of VM %r already exists in storage pool %r; choose "
                       "another name" % (name, existing.get("vm"), pool.name()))
    disks = []
    for disk in domain_disks(dom.XMLDesc(0 if running else lv.VIR_DOMAIN_XML_INACTIVE)):
        if disk["device"] in _SKIPPED_DEVICES:
            continue
        where = "disk %s (%s) of VM %r" % (disk["target"], disk["path"], vm)
        if not _TARGET_RE.match(disk["target"] or ""):
            raise NotSupported("%s has a target name this backend cannot name a volume after"
                               % where)
        if disk["type"] != "file" or not disk["path"]:
            raise NotSupported("%s is not a file; only file disks can be backed up: move its "
                               "data to a qcow2 v3 image in a storage pool" % where)
        source = volume_at(conn, disk["path"])
        if running:
            # libvirt shows <compat>1.1</compat> for a qcow2 v3 volume, nothing for a v2 one;
            # an image in no pool is left for the job itself to refuse
            compat = None if source is None else ET.fromstring(source.XMLDesc(0)).findtext(
                "target/compat")
            if disk["format"] != "qcow2" or (source is not None and compat != "1.1"):
                raise NotSupported(
                    "%s is %s: a running VM's backup job needs qcow2 v3 disks (for their change "
                    "bitmaps); convert it to qcow2 v3 with the VM stopped (qemu-img convert -O "
                    "qcow2 -o compat=1.1, or qemu-img amend -o compat=1.1 for an older qcow2, "
                    "then virsh pool-refresh of its pool), or stop the VM to back it up by copy"
                    % (where, "qcow2 v2" if disk["format"] == "qcow2" else
                       "in format %s" % disk["format"]))
        elif source is None:
            raise NotSupported("%s is in no libvirt storage pool, so the stopped VM's disk cannot "
                               "be copied through libvirt; put the image in a storage pool "
                               "(virsh pool-define-as ... dir --target <its directory>) or start "
                               "the VM to back it up with a backup job" % where)
        disks.append({"target": disk["target"], "source": disk["path"],
                      "volume": "%s.%s.qcow2" % (name, disk["target"]), "parent_volume": None})
    if not disks:
        raise NotSupported("VM %r has no disk to back up (cdroms are skipped)" % vm)
    for disk in disks:
        if len(disk["volume"].encode("utf-8")) > _MAX_NAME:
            raise field_error("name", "%r is too long for volume names in storage pool %r"
                              % (name, pool.name()))
    incremental = bool(request.get("incremental"))
    parent = parent_checkpoint = None
    warnings = []
    if incremental and not running:
        parent_name = request["parent"].get("name") if isinstance(request.get("parent"), dict) \
            else None
        warnings.append("VM %r is stopped, so no checkpoint tracks its changes: backup %r is a "
                        "full copy of its disks, not an increment%s"
                        % (vm, name, " of %r" % parent_name if parent_name else ""))
        incremental = False
    elif incremental:
        parent, parent_checkpoint = _check_parent(provider, conn, pool, dom, request, disks)
    return {"kind": "backup", "name": name, "vm": vm, "uuid": uuid,
            "mode": "push" if running else "copy", "incremental": incremental, "parent": parent,
            "parent_checkpoint": parent_checkpoint, "checkpoint": name if running else None,
            "pool": pool.name(), "marker": name + ".json", "disks": disks, "warnings": warnings}


def _check_parent(provider, conn, pool, dom, request, disks):
    """(parent name, its checkpoint) of an incremental backup, whose parent must be a complete
    backup of this VM in the pool whose checkpoint still exists; fills the disks' parents."""
    vm = request["vm"]
    if not isinstance(request.get("parent"), dict):
        raise field_error("parent", "an incremental backup needs the artifact of the backup it "
                                    "builds on, got %r" % (request.get("parent"),))
    parent = record_name(request["parent"], "name", "parent.name")
    full = "take a full backup (incremental: false) first"
    _vol, marker = read_marker(conn, pool, parent)
    if marker is None:
        raise Conflict("parent backup %r is not a complete backup in storage pool %r; %s"
                       % (parent, pool.name(), full))
    if marker.get("vm_uuid") != dom.UUIDString():
        raise Conflict("parent backup %r is of VM %r (uuid %s), not of this VM %r; %s"
                       % (parent, marker.get("vm"), marker.get("vm_uuid"), vm, full))
    checkpoint = marker.get("checkpoint")
    if not checkpoint or _checkpoint(dom, checkpoint) is None:
        raise Conflict("the checkpoint of parent backup %r no longer exists on VM %r (the parent "
                       "was a copy of the stopped VM, or its checkpoint was deleted, or the VM "
                       "was restored since): %s" % (parent, vm, full))
    volumes = dict((v["target"], v) for v in marker["location"]["volumes"])
    for disk in disks:
        vol = volumes.get(disk["target"])
        if vol is None or find_volume(pool, vol["name"]) is None:
            raise Conflict("disk %s of VM %r has no volume in parent backup %r; %s"
                           % (disk["target"], vm, parent, full))
        disk["parent_volume"] = vol["name"]
    return parent, checkpoint


# -- start --------------------------------------------------------------------------------------
def _paths(pool, handle):
    """{disk target: path} of the handle's volumes that exist."""
    found = {}
    for disk in handle["disks"]:
        vol = find_volume(pool, disk["volume"])
        if vol is not None:
            found[disk["target"]] = vol.path()
    return found


def start_push(session, handle):
    """Make the volumes and begin the backup job; nothing again once the job runs or ran."""
    provider, conn = session.provider, session.connection
    lv = libvirt()
    pool = directory_pool(provider, conn, "backup_pool", handle["pool"])
    if read_marker(conn, pool, handle["name"])[1] is not None:
        return handle
    dom = _domain(conn, handle["uuid"])
    if dom is None:
        raise NotFound("VM %r (uuid %s) is gone from %s"
                       % (handle["vm"], handle["uuid"], provider.key))
    if _our_job(dom, _paths(pool, handle)) is not None or \
            _checkpoint(dom, handle["checkpoint"]) is not None:
        return handle  # running, or ran: poll says how it went
    if not dom.isActive():
        raise Conflict("VM %r was running when backup %r was planned and is stopped now; plan "
                       "it again" % (handle["vm"], handle["name"]))
    busy = _job(dom)
    if busy is not None:
        raise Conflict("VM %r is busy with another job (libvirt job operation %s); back it up "
                       "once that ends" % (handle["vm"], busy.get("operation")))
    if handle["incremental"] and _checkpoint(dom, handle["parent_checkpoint"]) is None:
        raise Conflict("the checkpoint of parent backup %r is gone from VM %r; take a full "
                       "backup" % (handle["parent"], handle["vm"]))
    ours = set(d["target"] for d in handle["disks"])
    others = [d["target"] for d in domain_disks(dom.XMLDesc(0)) if d["target"] not in ours]
    made = []  # (disk with the path of its new volume, volume)
    try:
        for disk in handle["disks"]:
            old = find_volume(pool, disk["volume"])
            if old is not None:  # made by an attempt whose job never began
                drop_volume(conn, old, "volume %s" % disk["volume"])
            backing = None
            if disk["parent_volume"]:
                parent = find_volume(pool, disk["parent_volume"])
                if parent is None:
                    raise Conflict("volume %s of parent backup %r is gone; take a full backup"
                                   % (disk["parent_volume"], handle["parent"]))
                backing = parent.path()
            capacity = dom.blockInfo(disk["target"], 0)[0]
            vol = pool.createXML(volume_xml(disk["volume"], capacity, backing=backing), 0)
            made.append((dict(disk, path=vol.path()), vol))
        dom.backupBegin(_backup_xml([d for d, _v in made], others, handle),
                        _checkpoint_xml(handle, others),
                        lv.VIR_DOMAIN_BACKUP_BEGIN_REUSE_EXTERNAL)
    except Exception:
        forget_volumes(v for _d, v in made)
        raise
    return handle


def _backup_xml(disks, others, handle):
    root = ET.Element("domainbackup", mode="push")
    if handle["incremental"]:
        ET.SubElement(root, "incremental").text = handle["parent_checkpoint"]
    node = ET.SubElement(root, "disks")
    for disk in disks:
        item = ET.SubElement(node, "disk", name=disk["target"], backup="yes", type="file")
        ET.SubElement(item, "driver", type="qcow2")
        ET.SubElement(item, "target", file=disk["path"])
    for target in others:
        ET.SubElement(node, "disk", name=target, backup="no")
    return ET.tostring(root, encoding="unicode")


def _checkpoint_xml(handle, others):
    root = ET.Element("domaincheckpoint")
    ET.SubElement(root, "name").text = handle["checkpoint"]
    ET.SubElement(root, "description").text = "resilient.virt backup %s" % handle["name"]
    node = ET.SubElement(root, "disks")
    for disk in handle["disks"]:
        ET.SubElement(node, "disk", name=disk["target"], checkpoint="bitmap")
    for target in others:
        ET.SubElement(node, "disk", name=target, checkpoint="no")
    return ET.tostring(root, encoding="unicode")


def start_copy(session, handle):
    """Copy the stopped VM's disks and write the marker; nothing again once finished, or while
    the copy of an earlier attempt runs."""
    provider, conn = session.provider, session.connection
    lv = libvirt()
    pool = directory_pool(provider, conn, "backup_pool", handle["pool"])
    marker_vol, marker = read_marker(conn, pool, handle["name"])
    if marker is not None:
        return handle
    dom = _domain(conn, handle["uuid"])
    if dom is None:
        raise NotFound("VM %r (uuid %s) is gone from %s"
                       % (handle["vm"], handle["uuid"], provider.key))
    if dom.isActive():
        raise Conflict("VM %r was stopped when backup %r was planned and runs now; plan it again "
                       "(a running VM is backed up by a backup job)" % (handle["vm"],
                                                                        handle["name"]))
    leftovers = [v for v in (find_volume(pool, d["volume"]) for d in handle["disks"])
                 if v is not None]
    if any(being_copied(conn, v) for v in leftovers):
        return handle  # an earlier attempt's copy still runs
    for vol in leftovers + ([marker_vol] if marker_vol is not None else []):
        drop_volume(conn, vol, "volume %s" % vol.name())
    created_at = format_time(time.time())
    definition = dom.XMLDesc(lv.VIR_DOMAIN_XML_INACTIVE)
    made = []
    try:
        for disk in handle["disks"]:
            source = volume_at(conn, disk["source"])
            if source is None:
                raise NotSupported("disk %s (%s) of VM %r is no longer in a storage pool"
                                   % (disk["target"], disk["source"], handle["vm"]))
            capacity = source.info()[1]
            vol = pool.createXMLFrom(volume_xml(disk["volume"], capacity), source, 0)
            made.append((disk, vol))
        write_marker(conn, pool, handle, made, created_at, definition, None)
    except Exception:
        forget_volumes(v for _d, v in made)
        raise
    return handle


# -- poll ---------------------------------------------------------------------------------------
def _completed(handle, marker):
    return poll_status("completed", 100, warnings=handle.get("warnings") or (),
                       artifact=artifact_of(marker))


def poll_push(session, handle):
    """The status of a push-mode backup; writes the marker once its job completed."""
    provider, conn = session.provider, session.connection
    pool = directory_pool(provider, conn, "backup_pool", handle["pool"])
    marker_vol, marker = read_marker(conn, pool, handle["name"])
    if marker is not None:
        return _completed(handle, marker)
    dom = _domain(conn, handle["uuid"])
    paths = _paths(pool, handle)
    if dom is not None:
        stats = _our_job(dom, paths)
        if stats is not None:
            return poll_status("running", _progress(stats))
    checkpoint = None if dom is None else _checkpoint(dom, handle["checkpoint"])
    if checkpoint is None:
        return missing_status(paths, marker_vol)
    outcome = _outcome(dom, handle["checkpoint"])
    if outcome is None:
        outcome = ("failed", "libvirt no longer knows how the backup job ended (libvirtd "
                             "restarted, or another job ran since), so its volumes cannot be "
                             "trusted; take the backup again")
    elif outcome[0] == "completed" and len(paths) < len(handle["disks"]):
        outcome = ("failed", "volumes of the backup are gone: %s" % ", ".join(
            d["volume"] for d in handle["disks"] if d["target"] not in paths))
    if outcome[0] != "completed":
        _drop_checkpoint(dom, handle["checkpoint"])  # no incremental may build on it
        return poll_status(outcome[0], message=outcome[1])
    _wait_for_targets_closed(dom, handle)
    if marker_vol is not None:  # a marker write cut short
        drop_volume(conn, marker_vol, "marker %s" % handle["marker"])
    made = [(d, find_volume(pool, d["volume"])) for d in handle["disks"]]
    try:
        marker = write_marker(conn, pool, handle, made, format_time(_created(checkpoint)),
                              dom.XMLDesc(libvirt().VIR_DOMAIN_XML_INACTIVE), handle["checkpoint"])
    except Exception as exc:
        if is_error(exc, "STORAGE_VOL_EXIST"):  # another poll writes it right now
            return poll_status("running", 100)
        raise
    return _completed(handle, marker)


def poll_copy(session, handle):
    """The status of the copy of a stopped VM."""
    provider, conn = session.provider, session.connection
    pool = directory_pool(provider, conn, "backup_pool", handle["pool"])
    marker_vol, marker = read_marker(conn, pool, handle["name"])
    if marker is not None:
        return _completed(handle, marker)
    vols = [v for v in (find_volume(pool, d["volume"]) for d in handle["disks"]) if v is not None]
    if any(being_copied(conn, v) for v in vols):
        return poll_status("running")
    if vols:
        return poll_status("failed", message=(
            "the copy of stopped VM %r ended before its marker was written (its run was "
            "interrupted), so its volumes cannot be trusted; cancel removes them, then take the "
            "backup again" % handle["vm"]))
    return missing_status({}, marker_vol)


# -- cancel and delete --------------------------------------------------------------------------
def cancel_backup(session, handle):
    """Abort the backup's job (waiting until it stops), delete its checkpoint and volumes; a
    finished backup is left as it is."""
    provider, conn = session.provider, session.connection
    pool = directory_pool(provider, conn, "backup_pool", handle["pool"])
    if read_marker(conn, pool, handle["name"])[1] is not None:
        return True  # finished: nothing runs
    dom = _domain(conn, handle["uuid"])
    if dom is not None and handle["mode"] == "push":
        paths = _paths(pool, handle)
        if _our_job(dom, paths) is not None:
            try:
                dom.abortJob()
            except Exception as exc:
                if not is_error(exc, "OPERATION_INVALID"):  # ended meanwhile
                    raise
            end = time.monotonic() + _ABORT_WAIT
            while _our_job(dom, paths) is not None:
                if time.monotonic() > end:
                    raise Timeout("the backup job of VM %r did not stop within %gs of its abort"
                                  % (handle["vm"], _ABORT_WAIT))
                time.sleep(0.1)
        _drop_checkpoint(dom, handle["checkpoint"])
    drop_backup_volumes(conn, pool, handle["name"], [d["volume"] for d in handle["disks"]])
    return True


def delete_backup(session, artifact):
    """Delete a stored backup and its checkpoint; Conflict while its job runs or while another
    backup builds on it."""
    provider, conn = session.provider, session.connection
    name = record_name(artifact, "name", "artifact.name")
    location = artifact.get("location") if isinstance(artifact.get("location"), dict) else {}
    pool = directory_pool(provider, conn, "backup_pool", location.get("pool"))
    _vol, marker = read_marker(conn, pool, name)
    info = marker or artifact
    groups = volumes_by_backup(pool)
    own = groups.get(name, {"disks": {}})["disks"]
    paths = dict((t, v.path()) for t, v in own.items())
    dom = _domain(conn, info["vm_uuid"]) if info.get("vm_uuid") else None
    if dom is not None and _our_job(dom, paths) is not None:
        raise Conflict("backup %r is being written by a running backup job of VM %r; cancel it "
                       "first" % (name, info.get("vm")))
    mine = set(paths.values())
    children = sorted(other for other, group in groups.items() if other != name and any(
        backing_path(v) in mine for v in group["disks"].values()))
    if children:
        raise Conflict("backup %r cannot be deleted: backup(s) %s build on it; delete them first"
                       % (name, ", ".join(children)))
    drop_backup_volumes(conn, pool, name, [v.name() for v in own.values()])
    checkpoint = info.get("checkpoint")
    if dom is not None and checkpoint:
        _drop_checkpoint(dom, checkpoint)
    return True
