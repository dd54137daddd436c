"""libvirt domain XML as read back: the VM fields of a domain, its disks, the volumes this
collection created for it, and what libvirt refuses or mishandles in a domain name.

Tags, metadata and the volumes created for a VM live in the domain's ``<metadata>`` under the
namespace :data:`NAMESPACE`; ``spec.py`` writes them. A volume made from a base image records
``base_image`` and ``clone``; the cloud-init seed has the role :data:`SEED_ROLE`, and its cdrom
is not one of the VM's disks.
"""
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.guest import agent_state

__all__ = ("NAMESPACE", "DOMAIN_TYPES", "MAX_NAME_BYTES", "SEED_ROLE", "name_problem",
           "parse_domain_xml", "domain_disks", "disk_nodes", "managed_volumes", "qualified", "mib")

NAMESPACE = "https://resilient.virt/xmlns/vm/1"
ET.register_namespace("rv", NAMESPACE)

DOMAIN_TYPES = ("qemu", "kvm")
SEED_ROLE = "cloud-init"
# libvirt writes /etc/libvirt/qemu/<name>.xml.new, and file names have at most 255 bytes
MAX_NAME_BYTES = 255 - len(".xml.new")
_UNITS = {"b": 1, "bytes": 1, "kb": 1000, "k": 1024, "kib": 1024, "mb": 1000 ** 2,
          "m": 1024 ** 2, "mib": 1024 ** 2, "gb": 1000 ** 3, "g": 1024 ** 3, "gib": 1024 ** 3,
          "tb": 1000 ** 4, "t": 1024 ** 4, "tib": 1024 ** 4}


def qualified(tag):
    return "{%s}%s" % (NAMESPACE, tag)


def name_problem(name):
    """What libvirt refuses or mishandles in the domain name ``name`` (a string), or None."""
    if "/" in name:
        return "must not contain '/' (libvirt refuses it)"
    if name in (".", ".."):
        return ("must not be '.' or '..': libvirt uses the name as a path component, and these "
                "would make it remove directories of the hypervisor")
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        return ("is %d bytes long in UTF-8; libvirt names files after the VM, so at most %d"
                % (size, MAX_NAME_BYTES))
    return None


def mib(node):
    if node is None or not (node.text or "").strip():
        return None
    factor = _UNITS.get((node.get("unit") or "KiB").lower(), 1024)
    return int(node.text.strip()) * factor // (1024 ** 2)


def _rv(root):
    return root.find("metadata/" + qualified("vm"))


def parse_domain_xml(xml):
    """VM fields from domain XML: name, uuid, vcpus, memory_mb, disks, interfaces, boot,
    metadata, tags, domain_type (current values for a running domain's live XML)."""
    root = ET.fromstring(xml)
    vcpu = root.find("vcpu")
    owned = dict((v["path"], v) for v in _volumes(root))
    disks = []
    for node in disk_nodes(root):
        target, driver = node.find("target"), node.find("driver")
        path = _source(node)
        disk = {"device": node.get("device", "disk"), "path": path,
                "bus": None if target is None else target.get("bus"),
                "target": None if target is None else target.get("dev"),
                "format": None if driver is None else driver.get("type")}
        disk.update((key, value) for key, value in owned.get(path, {}).items()
                    if key in ("size_gb", "pool", "base_image", "clone"))
        disks.append(disk)
    interfaces = []
    for node in root.findall("devices/interface"):
        source, model, mac = node.find("source"), node.find("model"), node.find("mac")
        nic = {"model": None if model is None else model.get("type"),
               "mac": None if mac is None else mac.get("address")}
        if source is not None and source.get("network"):
            nic["network"] = source.get("network")
        elif source is not None and source.get("bridge"):
            nic["bridge"] = source.get("bridge")
        interfaces.append(nic)
    rv = _rv(root)
    return {
        "name": root.findtext("name"),
        "agent": agent_state(root),
        "uuid": root.findtext("uuid"),
        "domain_type": root.get("type"),
        "vcpus": None if vcpu is None else int(vcpu.get("current") or vcpu.text),
        "memory_mb": mib(root.find("currentMemory")) or mib(root.find("memory")),
        "disks": disks,
        "interfaces": interfaces,
        "boot": [b.get("dev") for b in root.findall("os/boot")],
        "metadata": {} if rv is None else dict(
            (i.get("key"), i.text or "") for i in rv.findall(qualified("metadata") + "/" + qualified("item"))),
        "tags": [] if rv is None else [
            t.text or "" for t in rv.findall(qualified("tags") + "/" + qualified("tag"))],
    }


def domain_disks(xml):
    """Every disk of domain XML: [{target, device, type, format, path}]."""
    found = []
    for node in ET.fromstring(xml).findall("devices/disk"):
        target, driver = node.find("target"), node.find("driver")
        found.append({"target": None if target is None else target.get("dev"),
                      "device": node.get("device", "disk"), "type": node.get("type"),
                      "format": None if driver is None else driver.get("type"),
                      "path": _source(node)})
    return found


def _source(node):
    source = node.find("source")
    return None if source is None else source.get("file") or source.get("dev")


def disk_nodes(root):
    """The ``<disk>`` elements of the domain ``root`` that are the VM's disks: all but the
    cloud-init seed this collection attached."""
    seeds = set(v["path"] for v in _volumes(root) if v.get("role") == SEED_ROLE)
    return [node for node in root.findall("devices/disk") if _source(node) not in seeds]


def _volumes(root):
    rv = _rv(root)
    if rv is None:
        return []
    return [dict(v.attrib, size_gb=int(v.get("size_gb", 0)))
            for v in rv.findall(qualified("volumes") + "/" + qualified("volume"))]


def managed_volumes(xml):
    """Volumes this collection created for the domain: [dict(pool, name, path, size_gb, and
    base_image, clone or role when recorded)]."""
    return _volumes(ET.fromstring(xml))
