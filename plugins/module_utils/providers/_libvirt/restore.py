"""Restores of libvirt backups: plan, start, follow and cancel them (the handle is described in
``backup.py``).

A restore copies each disk of a backup, its chain flattened, to new volumes of
``provider.storage_pool`` and defines the VM from the saved definition, left stopped. The new
volumes are listed in the domain's metadata like those ``create`` makes (so deleting the VM
removes them) and the metadata element ``rv:restored`` names the restore record. A restore onto
the VM the backup was taken of keeps its uuid, forgets its checkpoints (the restored images hold
none of their bitmaps) and then deletes the managed volumes of the disks it replaced. A new VM
does not keep the source's vm_fleet owner marker: no fleet created it, so no prune may delete it.

``poll`` decides from libvirt alone - the ``rv:restored`` element of the target VM, volumes still
being copied - so a run that adopts a handle gets the answer the run that started it would get.
"""
import math
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backup_storage import (
    missing_status, poll_status, read_marker, record_name)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    is_error, load as libvirt)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.domain import (
    SEED_ROLE, domain_disks, managed_volumes, qualified)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.volumes import (
    backing_path, being_copied, directory_pool, drop_volume, find_volume, forget_volumes,
    volume_at, volume_xml)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.spec import (
    volumes_element)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import OWNER_KEY

__all__ = ("prepare_restore", "start_restore", "poll_restore", "cancel_restore")

_GIB = 1024 ** 3


def _lookup(session, name):
    """The domain ``name``, or None."""
    try:
        return session.lookup(name)
    except NotFound:
        return None


def _restored(dom):
    """The ``rv:restored`` element of the domain's persistent definition, or None."""
    root = ET.fromstring(dom.XMLDesc(libvirt().VIR_DOMAIN_XML_INACTIVE))
    return root.find("metadata/%s/%s" % (qualified("vm"), qualified("restored")))


def _restored_by(dom, name):
    node = _restored(dom)
    return node is not None and node.get("record") == name


# -- prepare ------------------------------------------------------------------------------------
def prepare_restore(session, request):
    """The handle of the restore ``request`` of a complete backup, to a new VM or onto the
    stopped VM it was taken of."""
    provider, conn = session.provider, session.connection
    name = record_name(request, "name", "name")
    backup = request.get("backup")
    backup_name = record_name(backup if isinstance(backup, dict) else {}, "name", "backup.name")
    location = backup.get("location") if isinstance(backup.get("location"), dict) else {}
    pool = directory_pool(provider, conn, "backup_pool", location.get("pool"))
    _vol, marker = read_marker(conn, pool, backup_name)
    if marker is None:
        raise NotFound("backup %r is not a complete backup in storage pool %r on %s"
                       % (backup_name, pool.name(), provider.key))
    target = request.get("target") or marker["vm"]
    if not isinstance(target, str):
        raise field_error("target", "must be a VM name, got %r" % (target,))
    same = target == marker["vm"]
    provider.check_name(target, creating=not same)
    dom = _lookup(session, target)
    done = dom is not None and _restored_by(dom, name)
    if dom is not None and not done:
        if not same:
            raise Conflict("VM %r already exists on %s; restore to a new name, or to the VM the "
                           "backup was taken of (%r), stopped"
                           % (target, provider.key, marker["vm"]))
        if dom.isActive():
            raise Conflict("VM %r is running; stop it first: a restore replaces its disks and "
                           "definition" % target)
    disks = []
    for vol in marker["location"]["volumes"]:
        source = find_volume(pool, vol["name"])
        _check_chain(conn, source, vol["name"], backup_name)
        disks.append({"target": vol["target"], "source": vol["name"],
                      "volume": "%s-%s.qcow2" % (name, vol["target"])})
    storage = directory_pool(provider, conn, "storage_pool")
    taken = [d["volume"] for d in disks
             if not done and find_volume(storage, d["volume"]) is not None]
    if taken:  # start removes what an earlier attempt left: never a volume of someone else
        raise Conflict("storage pool %r already has volume(s) %s; choose another name for the "
                       "restore" % (storage.name(), ", ".join(taken)))
    return {"kind": "restore", "name": name, "vm": marker["vm"], "backup": backup_name,
            "backup_pool": pool.name(), "target": target, "same_vm": same,
            "pool": storage.name(), "disks": disks}


def _check_chain(conn, vol, name, backup):
    """Conflict unless ``vol`` and every image it builds on are there."""
    seen = 0
    while True:
        if vol is None:
            raise Conflict("backup %r cannot be restored: %s is gone from its chain (a backup it "
                           "builds on was deleted)" % (backup, name))
        path = backing_path(vol)
        seen += 1
        if path is None or seen > 1000:
            return
        name, vol = path, volume_at(conn, path)


# -- start --------------------------------------------------------------------------------------
def start_restore(session, handle):
    """Copy the backup's disks to new volumes, define the VM and delete the volumes it replaced
    (once the VM is defined, a retry does only that); nothing while an earlier attempt copies."""
    provider, conn = session.provider, session.connection
    dom = _lookup(session, handle["target"])
    if dom is not None and _restored_by(dom, handle["name"]):
        _finish_restore(conn, dom, handle)
        return handle
    if dom is not None and not handle["same_vm"]:
        raise Conflict("VM %r already exists on %s; restore to a new name"
                       % (handle["target"], provider.key))
    if dom is not None and dom.isActive():
        raise Conflict("VM %r is running; stop it first: a restore replaces its disks and "
                       "definition" % handle["target"])
    backups = directory_pool(provider, conn, "backup_pool", handle["backup_pool"])
    _vol, marker = read_marker(conn, backups, handle["backup"])
    if marker is None:
        raise NotFound("backup %r is no longer a complete backup in storage pool %r"
                       % (handle["backup"], handle["backup_pool"]))
    pool = directory_pool(provider, conn, "storage_pool", handle["pool"])
    leftovers = [v for v in (find_volume(pool, d["volume"]) for d in handle["disks"])
                 if v is not None]
    if any(being_copied(conn, v) for v in leftovers):
        return handle  # an earlier attempt's copy still runs
    for vol in leftovers:  # not in any definition yet: an attempt that stopped half-way
        drop_volume(conn, vol, "volume %s" % vol.name())
    made = {}
    try:
        for disk in handle["disks"]:
            source = find_volume(backups, disk["source"])
            _check_chain(conn, source, disk["source"], handle["backup"])
            vol = pool.createXMLFrom(volume_xml(disk["volume"], source.info()[1]), source, 0)
            made[disk["target"]] = {"pool": pool.name(), "name": disk["volume"],
                                    "path": vol.path(), "vol": vol,
                                    "size_gb": max(1, int(math.ceil(vol.info()[1] / float(_GIB))))}
        current = None
        if dom is not None:  # the restored images hold none of its checkpoints' bitmaps
            current = dom.XMLDesc(libvirt().VIR_DOMAIN_XML_INACTIVE)
            for checkpoint in dom.listAllCheckpoints(0):
                _forget_checkpoint(checkpoint)
        conn.defineXML(_restored_xml(marker["definition"], handle, made, current))
    except Exception:
        forget_volumes(v["vol"] for v in made.values())
        raise
    if dom is not None:
        _finish_restore(conn, _lookup(session, handle["target"]), handle)
    return handle


def _forget_checkpoint(checkpoint):
    try:
        checkpoint.delete(libvirt().VIR_DOMAIN_CHECKPOINT_DELETE_METADATA_ONLY)
    except Exception as exc:
        if not is_error(exc, "NO_DOMAIN_CHECKPOINT"):
            raise


def _finish_restore(conn, dom, handle):
    """After a restore onto an existing VM: delete the managed volumes whose disks it replaced
    (idempotent: a retried start finishes what a killed one left)."""
    node = _restored(dom)
    if node is None or node.get("record") != handle["name"]:
        return
    in_use = set(d["path"] for d in domain_disks(dom.XMLDesc(libvirt().VIR_DOMAIN_XML_INACTIVE)))
    for replaced in node.findall(qualified("replaced")):
        if replaced.get("path") in in_use:
            continue
        vol = volume_at(conn, replaced.get("path"))
        if vol is not None:
            drop_volume(conn, vol, "volume %s" % replaced.get("path"))


def _restored_xml(definition, handle, made, current):
    """The domain XML of a restore: the saved ``definition`` with the target's name, its disks
    on the new volumes ``made`` ({disk target: volume}, recorded with the base image their disk
    came from), the restore marked in its metadata. A new VM gets a new identity (no uuid, MAC
    addresses or NVRAM path: libvirt makes them) and no cloud-init seed;
    the same VM keeps the uuid of its ``current`` definition (or of the saved one when gone),
    and the managed volumes of the disks replaced are listed to be deleted afterwards."""
    root = ET.fromstring(definition)
    root.find("name").text = handle["target"]
    uuid = root.find("uuid")
    base = []
    saved = dict((v["path"], v) for v in managed_volumes(definition))
    origin = dict((d["target"], saved.get(d["path"], {})) for d in domain_disks(definition))
    if not handle["same_vm"]:
        # the cloud-init seed is the source VM's (its instance-id, and deleted with it)
        for node in root.findall("devices/disk"):
            source = node.find("source")
            path = None if source is None else source.get("file")
            if saved.get(path, {}).get("role") == SEED_ROLE:
                root.find("devices").remove(node)
        if uuid is not None:
            root.remove(uuid)
        for nic in root.findall("devices/interface"):
            for mac in nic.findall("mac"):
                nic.remove(mac)
        nvram = root.find("os/nvram")
        if nvram is not None:
            nvram.text = None
    elif current is not None:
        if uuid is None:
            uuid = ET.SubElement(root, "uuid")
        uuid.text = ET.fromstring(current).findtext("uuid")
        base = managed_volumes(current)
    replaced_paths = set(d["path"] for d in (domain_disks(current) if current else ())
                         if d["target"] in made)
    replaced = [v for v in base if v["path"] in replaced_paths]
    kept = [v for v in base if v["path"] not in replaced_paths]
    for node in root.findall("devices/disk"):
        target = node.find("target")
        volume = made.get(None if target is None else target.get("dev"))
        if volume is None:
            continue
        node.set("type", "file")
        for child in list(node):
            if child.tag in ("source", "backingStore"):
                node.remove(child)
        driver = node.find("driver")
        if driver is None:
            driver = ET.SubElement(node, "driver", name="qemu")
        driver.set("type", "qcow2")
        node.insert(0, ET.Element("source", file=volume["path"]))
    metadata = root.find("metadata")
    if metadata is None:
        metadata = ET.SubElement(root, "metadata")
    rv = metadata.find(qualified("vm"))
    if rv is None:
        rv = ET.SubElement(metadata, qualified("vm"))
    for child in list(rv):
        if child.tag in (qualified("volumes"), qualified("restored")):
            rv.remove(child)
    items = rv.find(qualified("metadata"))
    if not handle["same_vm"] and items is not None:
        # the owner marker says a fleet created the VM (and may prune it): not true of a copy
        for item in items.findall(qualified("item")):
            if item.get("key") == OWNER_KEY:
                items.remove(item)
    # a restored disk is a full copy of the data of a disk that may have come from a base image
    restored = [dict(made[t], base_image=origin.get(t, {}).get("base_image"),
                     clone="copy" if origin.get(t, {}).get("base_image") else None)
                for t in sorted(made)]
    volumes_element(rv, kept + restored)
    mark = ET.SubElement(rv, qualified("restored"), record=handle["name"],
                         backup=handle["backup"])
    for volume in replaced:
        ET.SubElement(mark, qualified("replaced"), pool=volume["pool"], name=volume["name"],
                      path=volume["path"])
    return ET.tostring(root, encoding="unicode")


# -- poll and cancel ----------------------------------------------------------------------------
def poll_restore(session, handle):
    """The status of a restore."""
    provider, conn = session.provider, session.connection
    dom = _lookup(session, handle["target"])
    if dom is not None and _restored_by(dom, handle["name"]):
        return poll_status("completed", 100, vm=handle["target"])
    pool = directory_pool(provider, conn, "storage_pool", handle["pool"])
    vols = [v for v in (find_volume(pool, d["volume"]) for d in handle["disks"]) if v is not None]
    if any(being_copied(conn, v) for v in vols):
        return poll_status("running")
    return missing_status(vols, None)


def cancel_restore(session, handle):
    """Delete the volumes of an unfinished restore; a finished one is left as it is."""
    provider, conn = session.provider, session.connection
    dom = _lookup(session, handle["target"])
    if dom is not None and _restored_by(dom, handle["name"]):
        return True  # finished: nothing runs
    pool = directory_pool(provider, conn, "storage_pool", handle["pool"])
    for disk in handle["disks"]:
        vol = find_volume(pool, disk["volume"])
        if vol is not None:
            drop_volume(conn, vol, "volume %s" % disk["volume"])
    return True
