"""Changes to an existing domain: its persistent XML edited, and the same changes as device
operations for the running domain (which it may refuse until a restart); :func:`reconfigure`
makes them for the libvirt provider. What a change refers to on the host is checked before the
definition is written (``checks.py``); a step the running domain fails with (other than one a
restart overcomes) takes the whole change back.

The rules of what may change are ``providers/_reconfigure.py``'s; the elements are ``spec.py``'s,
so a disk or an interface added later is written as one given at creation. Imported on the
reconfigure path only.
"""
import random
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error, redact
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.checks import check_host
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.create import (
    create_volumes, delete_volumes)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    error_code as _code, is_error as _is, load as _libvirt)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.domain import (
    disk_nodes, managed_volumes, mib, parse_domain_xml, NAMESPACE, qualified)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.spec import (
    disk_element, free_target, interface_element, vm_element, validate_spec)
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    list_changes, merged_metadata)

__all__ = ("DomainEdit", "random_mac", "reconfigure")

# a live change refused with one of these only needs a restart to apply
_NEEDS_RESTART = ("INVALID_ARG", "OPERATION_INVALID", "NO_SUPPORT", "OPERATION_UNSUPPORTED",
                  "CONFIG_UNSUPPORTED", "ARGUMENT_UNSUPPORTED", "OPERATION_FAILED")


def random_mac():
    """A locally administered unicast MAC in QEMU's 52:54:00 range, as libvirt would pick."""
    return "52:54:00:%02x:%02x:%02x" % tuple(random.randint(0, 255) for _byte in range(3))


def _text(node):
    return ET.tostring(node, encoding="unicode")


def _unqualified(node):
    copy = ET.Element(node.tag.rsplit("}", 1)[-1], node.attrib)
    copy.text = node.text
    copy.extend(_unqualified(child) for child in node)
    return copy


class DomainEdit:
    """The persistent XML of one domain, changed step by step. ``live`` collects the device
    operations that make a running domain match, each ``(operation, device XML, undo)``: the
    operation (``attach``, ``detach``, ``update``) and the one that takes it back; ``kept`` the
    volumes of removed disks (left in their pools)."""

    def __init__(self, xml):
        self.root = ET.fromstring(xml)
        self.current = parse_domain_xml(xml)
        self.volumes = managed_volumes(xml)
        self.labels_changed = False
        self.live = []
        self.kept = []

    def xml(self):
        return _text(self.root)

    def vm_element(self):
        """This collection's metadata element as it is now, without its namespace (which
        ``virDomainSetMetadata`` adds itself), for the running domain."""
        return _text(_unqualified(self.root.find("metadata/" + qualified("vm"))))

    def resources(self, vcpus=None, memory_mb=None):
        if vcpus is not None:
            vcpu = self.root.find("vcpu")
            if vcpu is None:
                vcpu = ET.SubElement(self.root, "vcpu")
            vcpu.attrib.pop("current", None)
            vcpu.text = str(vcpus)
        if memory_mb is not None:
            max_memory = self.root.find("maxMemory")
            if max_memory is not None and mib(max_memory) < memory_mb:
                raise field_error("memory_mb", "%d is above the domain's maxMemory of %d MiB"
                                  % (memory_mb, mib(max_memory)))
            for tag in ("memory", "currentMemory"):
                node = self.root.find(tag)
                if node is None:
                    node = ET.SubElement(self.root, tag)
                node.set("unit", "MiB")
                node.text = str(memory_mb)

    def labels(self, metadata=None, tags=None):
        """Merge ``metadata`` (None values remove keys) and set ``tags``."""
        if metadata is not None:
            self.current["metadata"] = merged_metadata(self.current["metadata"], metadata)
        if tags is not None:
            self.current["tags"] = list(tags)
        self.labels_changed = True

    def boot(self, devices):
        os_node = self.root.find("os")
        for node in os_node.findall("boot"):
            os_node.remove(node)
        position = len(os_node.findall("type"))
        for offset, dev in enumerate(devices):
            os_node.insert(position + offset, ET.Element("boot", dev=dev))
        # per-device boot order and <os><boot> exclude each other
        for device in self.root.find("devices"):
            for order in device.findall("boot"):
                device.remove(order)

    def disks(self, wanted, validated, volumes):
        """Make the disks ``wanted`` (as given); ``validated`` holds them with defaults,
        ``volumes`` the volumes created for added disks by index."""
        devices = self.root.find("devices")
        nodes = disk_nodes(self.root)  # as current["disks"]: the cloud-init seed is not one
        changes = list_changes("disks", self.current["disks"], wanted)
        for index, _have in changes["remove"]:
            node = nodes[index]
            devices.remove(node)
            self.live.append(("detach", _text(node), ("attach", _text(node))))
            source = node.find("source")
            path = None if source is None else source.get("file") or source.get("dev")
            for volume in [v for v in self.volumes if v["path"] == path]:
                self.volumes.remove(volume)
                self.kept.append(dict(volume, target=node.find("target").get("dev")))
        used = [node.find("target").get("dev") for node in devices.findall("disk")
                if node.find("target") is not None]
        for index, _item in changes["add"]:
            disk = validated[index]
            path = volumes[index]["path"] if index in volumes else disk.get("path")
            used.append(free_target(disk["bus"], used))
            node = disk_element(disk, path, used[-1])
            self._insert(devices, "disk", node)
            self.live.append(("attach", _text(node), ("detach", _text(node))))
            if index in volumes:
                self.volumes.append(volumes[index])
        self.labels_changed = self.labels_changed or bool(changes["remove"] or volumes)

    def interfaces(self, wanted, validated):
        """Make the interfaces ``wanted`` (as given); ``validated`` holds them with defaults.
        An added interface without a MAC gets one here, so that the running domain and its
        definition agree on it."""
        devices = self.root.find("devices")
        nodes = devices.findall("interface")
        changes = list_changes("interfaces", self.current["interfaces"], wanted)
        for index, item in changes["update"]:
            node = nodes[index]
            previous = _text(node)
            kind = "network" if item.get("network") else "bridge"
            node.set("type", kind)
            source = node.find("source")
            if source is None:
                source = ET.SubElement(node, "source")
            source.attrib.clear()
            source.set(kind, item[kind])
            self.live.append(("update", _text(node), ("update", previous)))
        for index, _have in changes["remove"]:
            devices.remove(nodes[index])
            self.live.append(("detach", _text(nodes[index]), ("attach", _text(nodes[index]))))
        for index, _item in changes["add"]:
            nic = dict(validated[index])
            nic.setdefault("mac", random_mac())
            node = interface_element(nic)
            self._insert(devices, "interface", node)
            self.live.append(("attach", _text(node), ("detach", _text(node))))

    def finish(self):
        """The persistent XML with this collection's metadata element rewritten."""
        if self.labels_changed:
            holder = self.root.find("metadata")
            if holder is None:
                holder = ET.SubElement(self.root, "metadata")
            old = holder.find(qualified("vm"))
            if old is not None:
                holder.remove(old)
            holder.append(vm_element(self.current["tags"], self.current["metadata"], self.volumes))
        return self.xml()

    @staticmethod
    def _insert(devices, tag, node):
        """Add ``node`` after the last device of ``tag`` (so positions keep their order)."""
        children = list(devices)
        last = max((i for i, child in enumerate(children) if child.tag == tag), default=None)
        devices.insert(len(children) if last is None else last + 1, node)


def reconfigure(provider, name, vcpus, memory_mb, changes):
    """``LibvirtProvider.reconfigure`` of VM ``name`` on ``provider``: its VM dict.

    What the change refers to on the host is checked before anything is written
    (``checks.check_host``). A running domain that then refuses a change is brought back to what
    it ran with, and the definition to what it was (the volumes made for the change deleted), so
    a failed change is not left half made."""
    import uuid as uuidlib

    validated = _changes_spec(name, vcpus, memory_mb, changes)
    lv = _libvirt()
    session = provider.session()
    conn = session.connection
    dom = session.lookup(name)
    before = dom.XMLDesc(lv.VIR_DOMAIN_XML_INACTIVE)
    edit = DomainEdit(before)
    added = {}
    nics = {}
    if "disks" in changes:
        added = dict((index, validated["disks"][index]) for index, _item in list_changes(
            "disks", edit.current["disks"], changes["disks"])["add"])
    if "interfaces" in changes:
        steps = list_changes("interfaces", edit.current["interfaces"], changes["interfaces"])
        nics = dict((index, validated["interfaces"][index])
                    for index, _item in steps["update"] + steps["add"])
    found = check_host(provider, conn, added, nics, "VM %r was not changed" % name)
    edit.resources(vcpus, memory_mb)
    if "metadata" in changes or "tags" in changes:
        edit.labels(changes.get("metadata"), changes.get("tags"))
    if "boot" in changes:
        edit.boot(validated["boot"])
    if "interfaces" in changes:
        edit.interfaces(changes["interfaces"], validated["interfaces"])
    volumes = {}
    if "disks" in changes:
        volumes = create_volumes(conn, name, "%s-%s" % (
            edit.current["uuid"][:8], uuidlib.uuid4().hex[:6]), added, found)
        edit.disks(changes["disks"], validated["disks"], volumes)
    try:
        conn.defineXML(edit.finish())
    except Exception:
        delete_volumes(conn, volumes.values(), best_effort=True)
        raise
    if dom.isActive():
        done = []
        try:
            _apply_live(dom, edit, vcpus, memory_mb, done)
        except Exception as exc:
            err = _undone(provider, conn, dom, before, volumes, done, exc)
            if err is None:
                raise
            raise err from exc
    for volume in edit.kept:
        provider.warnings.append(
            "disk %s was removed from VM %r; its volume %s in pool %s is kept (delete it "
            "with: virsh vol-delete --pool %s %s)"
            % (volume["target"], name, volume["name"], volume["pool"], volume["pool"],
               volume["name"]))
    if "autostart" in changes and bool(dom.autostart()) != changes["autostart"]:
        dom.setAutostart(int(changes["autostart"]))
    return session.describe(dom)


def _changes_spec(name, vcpus, memory_mb, changes):
    """The changed fields checked as a spec (every bad one named by its path), with the
    defaults a new VM would get."""
    for field, value, low in (("vcpus", vcpus, 1), ("memory_mb", memory_mb, 16)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < low):
            raise field_error(field, "%r: must be an integer >= %d" % (value, low))
    checked = dict((field, value) for field, value in changes.items()
                   if field in ("disks", "interfaces", "boot", "tags", "autostart"))
    if "metadata" in changes:  # None values remove keys
        checked["metadata"] = dict((key, value) for key, value in changes["metadata"].items()
                                   if value is not None)
    return validate_spec(dict(checked, name=name, vcpus=vcpus or 1, memory_mb=memory_mb or 16))


def _apply_live(dom, edit, vcpus, memory_mb, done):
    """Bring the running ``dom`` to the edited definition as far as it can go live; ``done``
    collects how to take back each step made, ``(method, argument)`` each."""
    lv = _libvirt()
    live = parse_domain_xml(dom.XMLDesc(0))
    steps = [(dom.setVcpusFlags, vcpus, live["vcpus"], vcpus, 3),
             (dom.setMemoryFlags, memory_mb, live["memory_mb"],
              None if memory_mb is None else memory_mb * 1024, 2)]
    for setter, wanted, current, argument, field in steps:
        if wanted is not None and wanted != current:
            previous = dom.info()[field]  # vCPUs, memory in KiB, as the domain runs now
            if _live(setter, argument):
                done.append((setter, previous))
    methods = {"attach": dom.attachDeviceFlags, "detach": dom.detachDeviceFlags,
               "update": dom.updateDeviceFlags}
    for operation, xml, (undo, previous) in edit.live:
        if _live(methods[operation], xml):
            done.append((methods[undo], previous))
    if edit.labels_changed:  # the last step: nothing after it to take back
        _live(lambda xml, flags: dom.setMetadata(
            lv.VIR_DOMAIN_METADATA_ELEMENT, xml, "rv", NAMESPACE, flags), edit.vm_element())


def _live(method, argument):
    """One change to the running domain: True when made; False when refused in a way that
    only a restart overcomes (it is left for the restart: the definition has the change)."""
    try:
        method(argument, _libvirt().VIR_DOMAIN_AFFECT_LIVE)
    except Exception as exc:
        if not _is(exc, *_NEEDS_RESTART):
            raise
        return False
    return True


def _undone(provider, conn, dom, before, volumes, done, exc):
    """The error to raise for ``exc``, a step the running ``dom`` refused after its definition
    was written: the steps made (``done``) are taken back in reverse order, the definition
    ``before`` is written again and the ``volumes`` made for the change are deleted unless the
    running domain still holds them. None when ``exc`` is no libvirt error (raise it as it is)."""
    err = provider.classify_error(exc)
    if err is None:
        return None
    lv = _libvirt()
    left = []
    for method, argument in reversed(done):
        try:
            method(argument, lv.VIR_DOMAIN_AFFECT_LIVE)
        except Exception as undo_exc:  # noqa: BLE001 - every other step is still taken back
            if _code(undo_exc) is None:
                raise
            left.append(redact(undo_exc.get_error_message() or undo_exc))
    try:
        conn.defineXML(before)
    except Exception as undo_exc:  # noqa: BLE001 - the refusal is the error to report
        if _code(undo_exc) is None:
            raise
        note = ("and its definition could not be written back (%s): it keeps the change; "
                "run the task again with what it had, or fix what was refused"
                % redact(undo_exc.get_error_message() or undo_exc))
    else:
        note = "its definition is as before"
    held = []
    try:
        held = [d["path"] for d in parse_domain_xml(dom.XMLDesc(0))["disks"]]
    except Exception as undo_exc:  # noqa: BLE001 - unknown: delete none
        if _code(undo_exc) is None:
            raise
        held = [v["path"] for v in volumes.values()]
    delete_volumes(conn, [v for v in volumes.values() if v["path"] not in held], best_effort=True)
    kept = sorted(v["name"] for v in volumes.values() if v["path"] in held)
    message = "%s; the change was taken back from the running VM, %s" % (err.message, note)
    if left:
        message += ("; the running VM could not be brought back entirely (%s), so it reports "
                    "restart_required until it is stopped and started" % "; ".join(left))
    if kept:
        message += "; the running VM still holds the new volume(s) %s, kept" % ", ".join(kept)
    return type(err)(message, cause=exc, details=err.details)
