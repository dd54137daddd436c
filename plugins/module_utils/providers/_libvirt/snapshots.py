"""Snapshots of the libvirt provider: internal snapshots, kept inside the VM's qcow2 images.

Internal snapshots are the kind libvirt 9.0 (Debian 12) can both take and revert: an external
one (a new overlay file per disk) cannot be reverted or deleted before libvirt 9.9. What that
means for users - a running VM's snapshot always holds its memory, raw disks cannot hold one,
checkpoints of incremental backups get in the way - is in docs/snapshots.md. Every refusal is
made before libvirt is asked to change anything.

A running (or paused) VM's snapshot holds its memory and disks (QEMU's ``savevm``: the guest
pauses while its memory is written into the first qcow2 image); a stopped VM's holds its disks
(``qemu-img snapshot``). A revert brings back the state the snapshot was taken in: running, or
stopped. Read-only disks and cdroms are left out of every snapshot.
"""
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, NotSupported, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.domain import (
    name_problem)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    SHUTOFF, is_error, load)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import new_snapshot

__all__ = ("list_snapshots", "create_snapshot", "delete_snapshot", "revert_snapshot")

# <state> of a snapshot's XML -> the VM state a revert to it brings back
_VM_STATE = {"running": "running", "blocked": "running", "paused": "paused", "pmsuspended": "paused",
             "shutoff": "stopped", "shutdown": "stopped", "crashed": "stopped",
             "disk-snapshot": "stopped"}


def _utc(seconds):
    if seconds is None:
        return None
    return datetime.fromtimestamp(int(seconds), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _snapshot(item):
    """The snapshot dict of a libvirt snapshot object."""
    root = ET.fromstring(item.getXMLDesc(0))
    memory = root.find("memory")
    return new_snapshot(
        root.findtext("name"), description=root.findtext("description") or "",
        created=_utc(root.findtext("creationTime")), parent=root.findtext("parent/name"),
        memory=memory is not None and memory.get("snapshot") in ("internal", "external"),
        vm_state=_VM_STATE.get(root.findtext("state"), "stopped"),
        current=bool(item.isCurrent(0)), id=root.findtext("name"))


def _snapshots(dom):
    lv = load()
    try:  # parents before children
        items = dom.listAllSnapshots(lv.VIR_DOMAIN_SNAPSHOT_LIST_TOPOLOGICAL)
    except Exception as exc:
        if not is_error(exc, "INVALID_ARG", "NO_SUPPORT", "ARGUMENT_UNSUPPORTED"):
            raise
        items = dom.listAllSnapshots(0)
    return [_snapshot(item) for item in items]


def list_snapshots(provider, name):
    session = provider.session()
    return _snapshots(session.lookup(name))


def _lookup_snapshot(provider, dom, name, snapshot):
    try:
        return dom.snapshotLookupByName(snapshot, 0)
    except Exception as exc:
        if is_error(exc, "NO_DOMAIN_SNAPSHOT"):
            raise NotFound("VM %r on %s has no snapshot %r" % (name, provider.key, snapshot),
                           cause=exc) from exc
        raise


def _checkpoints(dom):
    try:
        return sorted(c.getName() for c in dom.listAllCheckpoints(0))
    except Exception as exc:  # a driver without checkpoints has none
        if not is_error(exc, "NO_SUPPORT", "ARGUMENT_UNSUPPORTED", "OPERATION_UNSUPPORTED"):
            raise
        return []


def _refuse_checkpoints(provider, dom, name, doing):
    """NotSupported when the VM has checkpoints: QEMU 7.2 cannot load an internal snapshot into
    an image that carries dirty bitmaps, and libvirt 9.0 refuses a stopped VM's snapshot then."""
    found = _checkpoints(dom)
    if found:
        raise NotSupported(
            "cannot %s VM %r on %s: it has checkpoints (%s), which its backups keep for the next "
            "incremental backup; QEMU cannot revert an internal snapshot of a disk that carries "
            "their dirty bitmaps, and libvirt refuses a stopped VM's snapshot while they exist. "
            "Delete them first (virsh checkpoint-delete %s NAME; the next backup is then full), "
            "or keep a backup instead of a snapshot" % (doing, name, provider.key,
                                                        ", ".join(found), name))


def _disks(provider, dom, name):
    """[(target, True when it goes into the snapshot)] of the VM's disks; NotSupported naming
    a writable disk that is not a qcow2 image (an internal snapshot lives inside the image), or
    when no disk is writable."""
    root = ET.fromstring(dom.XMLDesc(0))
    out = []
    for node in root.findall("devices/disk"):
        target, driver = node.find("target"), node.find("driver")
        dev = None if target is None else target.get("dev")
        writable = node.get("device", "disk") == "disk" and node.find("readonly") is None
        if writable and (driver is None or driver.get("type") != "qcow2"):
            source = node.find("source")
            path = None if source is None else source.get("file") or source.get("dev")
            raise NotSupported(
                "cannot snapshot VM %r on %s: its disk %s (%s) is %s, and libvirt keeps a "
                "snapshot inside qcow2 images only (a raw image has no room for one, nor for "
                "the VM's memory); convert the disk to qcow2 (qemu-img convert -O qcow2) or "
                "back the VM up instead" % (name, provider.key, dev, path,
                                            "raw" if driver is None else driver.get("type")))
        out.append((dev, writable))
    if not any(included for _dev, included in out):
        raise NotSupported(
            "cannot snapshot VM %r on %s: it has no writable disk, and libvirt keeps a snapshot "
            "inside the VM's qcow2 images; add a qcow2 disk to the VM first" % (name, provider.key))
    return out


def _snapshot_xml(snapshot, description, memory, disks):
    root = ET.Element("domainsnapshot")
    ET.SubElement(root, "name").text = snapshot
    if description:
        ET.SubElement(root, "description").text = description
    ET.SubElement(root, "memory", snapshot="internal" if memory else "no")
    holder = ET.SubElement(root, "disks")
    for dev, included in disks:
        ET.SubElement(holder, "disk", name=dev, snapshot="internal" if included else "no")
    return ET.tostring(root, encoding="unicode")


def create_snapshot(provider, name, snapshot, description="", memory=False, quiesce=False):
    """An internal snapshot; a running or paused VM's with its memory (``memory`` must say so:
    libvirt makes no disk-only internal snapshot of a running VM, so neither a snapshot without
    memory nor a quiesced one can be made of it)."""
    problem = name_problem(snapshot) if isinstance(snapshot, str) else None
    if problem:
        raise field_error("name", "snapshot name %r %s" % (snapshot, problem))
    session = provider.session()
    dom = session.lookup(name)
    state = dom.state()[0]
    if state == SHUTOFF and dom.hasManagedSaveImage(0):
        raise Conflict("VM %r on %s is suspended (its memory is saved to a file beside its "
                       "disks); resume it (state: running) or discard the saved memory (state: "
                       "stopped) before taking a snapshot" % (name, provider.key))
    disks = _disks(provider, dom, name)
    running = state != SHUTOFF
    if running and not memory:
        raise NotSupported(
            "cannot take a snapshot without memory of running VM %r on %s: libvirt's internal "
            "snapshots of a running VM always hold its memory (the disk-only kind, which a "
            "quiesce needs, is external, and libvirt 9.0 cannot revert external snapshots); "
            "give memory: true, or stop the VM first" % (name, provider.key))
    _refuse_checkpoints(provider, dom, name, "take a snapshot of")
    try:
        dom.snapshotCreateXML(_snapshot_xml(snapshot, description, running, disks), 0)
    except Exception as exc:
        if is_error(exc, "DOM_EXIST", "OPERATION_INVALID") and \
                snapshot in [s["name"] for s in _snapshots(dom)]:
            raise Conflict("VM %r on %s already has a snapshot %r" % (name, provider.key, snapshot),
                           cause=exc) from exc
        raise
    return _snapshot(_lookup_snapshot(provider, dom, name, snapshot))


def delete_snapshot(provider, name, snapshot):
    """Delete the snapshot; its children are rebased onto its parent (libvirt's default)."""
    session = provider.session()
    dom = session.lookup(name)
    _lookup_snapshot(provider, dom, name, snapshot).delete(0)


def revert_snapshot(provider, name, snapshot):
    """Revert to the snapshot: the VM ends running (a snapshot with memory) or stopped."""
    session = provider.session()
    dom = session.lookup(name)
    item = _lookup_snapshot(provider, dom, name, snapshot)
    _refuse_checkpoints(provider, dom, name, "revert")
    dom.revertToSnapshot(item, 0)
    return session.describe(dom)
