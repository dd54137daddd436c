"""libvirt VM spec: JSON Schema validation, and the domain XML written from it.

The spec is the ``create`` argument of the libvirt provider::

    name: web1                       # see domain.name_problem, and no control characters
    vcpus: 2                         # >= 1
    memory_mb: 1024                  # >= 16
    disks:                           # each: size_gb (new volume) or path (existing image)
      - {size_gb: 10, bus: virtio, format: qcow2}
      - {path: /isos/install.iso, device: cdrom}
    interfaces:                      # each: network or bridge
      - {network: default, model: virtio, mac: "52:54:00:12:34:56"}
    boot: [hd, network]
    metadata: {owner: team-a}        # values stored as strings
    tags: [web]
    libvirt:                         # what only libvirt domains have (all optional)
      cpu_mode: host-model           # host-model, host-passthrough, maximum or default
      console: true                  # a serial console (virsh console)
      guest_agent: true              # the qemu-guest-agent channel
      graphics: none                 # none, vnc or spice (listening on localhost)
      xml:                           # elements the spec does not cover, each validated
        - <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>

Unknown keys are errors (typos are caught) and every bad field is reported by its path, for
example ``disks[0].size_gb: -1 is less than the minimum of 1``. Keys whose value is None count
as unset. The XML is built with ElementTree, so names and values are escaped, never injected:
a name such as ``a&b<c>"`` is stored verbatim. Imported on the paths that write a domain
(create, reconfigure) only.

``libvirt.xml`` is the escape hatch: each item is one XML element, parsed here (malformed XML is
refused by its index) and placed by its tag - a device (``rng``, ``watchdog``, ``tpm``...) is
added to ``<devices>``, another domain element (``clock``, ``features``, ``cputune``...)
replaces the element of that tag; what the spec sets itself (name, memory, vcpu, os, metadata,
devices) is refused. A domain with such items is validated against libvirt's schema when defined.
"""
import json
import re
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.domain import (
    mib, name_problem, qualified)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.platform import CPU_MODES
from ansible_collections.resilient.virt.plugins.module_utils.providers._vm_schema import (
    MAC_PATTERN, STRING, check_spec, field_path, spec_schema as vm_schema)

__all__ = ("spec_schema", "validate_spec", "build_domain_xml", "volume_xml",
           "set_domain_resources")

DISK_BUSES = ("virtio", "sata", "scsi", "ide")
DISK_FORMATS = ("qcow2", "raw")
DISK_DEVICES = ("disk", "cdrom")
NIC_MODELS = ("virtio", "e1000", "e1000e", "rtl8139")
GRAPHICS = ("none", "vnc", "spice")
DEVICE_TAGS = frozenset(("emulator", "disk", "filesystem", "controller", "lease", "hostdev",
                         "redirdev", "smartcard", "interface", "input", "hub", "graphics",
                         "video", "parallel", "serial", "console", "channel", "sound", "audio",
                         "watchdog", "memballoon", "rng", "tpm", "nvram", "panic", "shmem",
                         "memory", "iommu", "vsock", "crypto", "pstore"))
SPEC_TAGS = frozenset(("name", "uuid", "metadata", "memory", "currentMemory", "vcpu", "os",
                       "devices"))  # set by the spec itself
BOOT_DEVICES = ("hd", "cdrom", "network")
_TARGET_PREFIX = {"virtio": "vd", "sata": "sd", "scsi": "sd", "ide": "hd"}
# characters XML 1.0 cannot carry at all
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_MESSAGES = {("mac", "pattern"): "must be a MAC address such as 52:54:00:12:34:56"}


def spec_schema():
    """The JSON Schema (draft 7) of a libvirt VM spec."""
    disk = {"type": "object", "additionalProperties": False, "properties": {
        "size_gb": {"type": "integer", "minimum": 1},
        "path": {"type": "string", "pattern": "^/"},
        "bus": {"enum": list(DISK_BUSES)},
        "format": {"enum": list(DISK_FORMATS)},
        "device": {"enum": list(DISK_DEVICES)},
    }}
    nic = {"type": "object", "additionalProperties": False, "properties": {
        "network": STRING, "bridge": STRING,
        "model": {"enum": list(NIC_MODELS)},
        "mac": {"type": "string", "pattern": MAC_PATTERN},
    }}
    return vm_schema({
        "memory_mb": {"type": "integer", "minimum": 16},
        "disks": {"type": "array", "items": disk},
        "interfaces": {"type": "array", "items": nic},
        "boot": {"type": "array", "items": {"enum": list(BOOT_DEVICES)}, "uniqueItems": True},
        "tags": {"type": "array", "items": STRING, "uniqueItems": True},
        "libvirt": {"type": "object", "additionalProperties": False, "properties": {
            "cpu_mode": {"enum": list(CPU_MODES)},
            "console": {"type": "boolean"},
            "guest_agent": {"type": "boolean"},
            "graphics": {"enum": list(GRAPHICS)},
            "xml": {"type": "array", "items": STRING},
        }},
    })


def _strings(value, parts):
    if isinstance(value, str):
        yield parts, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield parts + [key], str(key)
            yield from _strings(item, parts + [key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, parts + [index])


def _semantic_errors(spec):
    name = spec.get("name")
    problem = name_problem(name) if isinstance(name, str) and name else None
    if problem and "/" not in name:  # '/' is the schema's
        yield "name", problem
    for parts, text in _strings(spec, []):
        if _XML_BAD.search(text):
            yield field_path(parts), "contains a control character that cannot be stored"
    for index, disk in enumerate(spec.get("disks") or []):
        if not isinstance(disk, dict):
            continue
        where = "disks[%d]" % index
        if disk.get("device", "disk") == "cdrom":
            if "size_gb" in disk:
                yield where + ".size_gb", "a cdrom has no size; give path (an ISO image) or nothing"
            if disk.get("bus") == "virtio":
                yield where + ".bus", "a cdrom cannot use virtio; use sata, scsi or ide"
        elif ("size_gb" in disk) == ("path" in disk):
            yield where, ("give exactly one of size_gb (a new volume) or path (an existing "
                          "image)")
    for index, nic in enumerate(spec.get("interfaces") or []):
        if isinstance(nic, dict) and ("network" in nic) == ("bridge" in nic):
            yield "interfaces[%d]" % index, "give exactly one of network or bridge"
        mac = nic.get("mac") if isinstance(nic, dict) else None
        if isinstance(mac, str) and re.match(MAC_PATTERN, mac) and int(mac[:2], 16) & 1:
            yield "interfaces[%d].mac" % index, ("%s is a multicast address; give a unicast one "
                                                 "(even first octet), such as 52:54:00:12:34:56" % mac)
    extra = spec.get("libvirt") if isinstance(spec.get("libvirt"), dict) else {}
    fragments = extra.get("xml") if isinstance(extra.get("xml"), list) else []
    for index, text in enumerate(fragments):
        if isinstance(text, str) and text:
            problem = _fragment_problem(text)
            if problem:
                yield "libvirt.xml[%d]" % index, problem


def _fragment_problem(text):
    """What is wrong with the ``libvirt.xml`` item ``text``, or None."""
    try:
        node = ET.fromstring(text)
    except ET.ParseError as exc:
        return "is not well-formed XML (%s); give one element, such as <rng model='virtio'>...</rng>" % exc
    if node.tag in SPEC_TAGS:
        return "<%s> is set by the VM spec itself; use its fields instead" % node.tag
    return None


def _drop_none(value):
    if isinstance(value, dict):
        return dict((k, _drop_none(v)) for k, v in value.items() if v is not None)
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def validate_spec(spec):
    """Return the spec with defaults filled in, or raise InvalidSpec listing every bad field."""
    spec = _drop_none(spec)
    check_spec(spec_schema(), spec, _MESSAGES, _semantic_errors(spec) if isinstance(spec, dict) else ())
    return _with_defaults(spec)


def _with_defaults(spec):
    disks = []
    for disk in spec.get("disks") or []:
        device = disk.get("device", "disk")
        guessed = "qcow2" if disk.get("size_gb") or disk.get("path", "").endswith(".qcow2") \
            else "raw"
        disks.append(dict(disk, device=device,
                          bus=disk.get("bus", "sata" if device == "cdrom" else "virtio"),
                          format=disk.get("format", "raw" if device == "cdrom" else guessed)))
    extra = dict({"console": True, "guest_agent": True, "graphics": "none", "xml": []},
                 **(spec.get("libvirt") or {}))
    return dict(spec, disks=disks, libvirt=extra,
                interfaces=[dict(nic, model=nic.get("model", "virtio"))
                            for nic in spec.get("interfaces") or []],
                boot=spec.get("boot") or ["hd"],
                metadata=dict((k, v if isinstance(v, str) else json.dumps(v))
                              for k, v in (spec.get("metadata") or {}).items()),
                tags=spec.get("tags") or [])


def _target(prefix, index):
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return prefix + letters


def _sub(parent, tag, text=None, **attrs):
    node = ET.SubElement(parent, tag, dict((k, str(v)) for k, v in attrs.items()))
    if text is not None:
        node.text = str(text)
    return node


def volume_xml(name, size_gb, fmt):
    """Storage volume XML for a new disk of ``size_gb`` GiB in format ``fmt``; qcow2 as v3
    (compat 1.1: libvirt makes v2 otherwise), which running backups with checkpoints need."""
    root = ET.Element("volume")
    _sub(root, "name", name)
    _sub(root, "capacity", size_gb, unit="GiB")
    target = _sub(root, "target")
    _sub(target, "format", type=fmt)
    if fmt == "qcow2":
        _sub(target, "compat", "1.1")
    return ET.tostring(root, encoding="unicode")


def build_domain_xml(spec, domain_type="qemu", uuid=None, volumes=None, cpu_mode=None):
    """Domain XML for a validated ``spec`` (see :func:`validate_spec`).

    ``volumes`` maps a disk index to the volume created for it (dict pool, name, path,
    size_gb); those disks use the volume's path and are recorded in the metadata. ``cpu_mode``
    is the CPU mode chosen for the hypervisor (``platform.choose_cpu_mode``), None for its
    default.
    """
    volumes = volumes or {}
    root = ET.Element("domain", type=domain_type)
    _sub(root, "name", spec["name"])
    if uuid:
        _sub(root, "uuid", uuid)
    rv = ET.SubElement(_sub(root, "metadata"), qualified("vm"))
    tags = ET.SubElement(rv, qualified("tags"))
    for tag in spec["tags"]:
        ET.SubElement(tags, qualified("tag")).text = tag
    items = ET.SubElement(rv, qualified("metadata"))
    for key, value in sorted(spec["metadata"].items()):
        ET.SubElement(items, qualified("item"), key=key).text = value
    owned = ET.SubElement(rv, qualified("volumes"))
    for index in sorted(volumes):
        vol = volumes[index]
        ET.SubElement(owned, qualified("volume"), pool=vol["pool"], name=vol["name"], path=vol["path"],
                      size_gb=str(vol["size_gb"]))
    _sub(root, "memory", spec["memory_mb"], unit="MiB")
    _sub(root, "currentMemory", spec["memory_mb"], unit="MiB")
    _sub(root, "vcpu", spec["vcpus"], placement="static")
    os_node = _sub(root, "os")
    _sub(os_node, "type", "hvm")
    for dev in spec["boot"]:
        _sub(os_node, "boot", dev=dev)
    features = _sub(root, "features")
    _sub(features, "acpi")
    _sub(features, "apic")
    if cpu_mode:
        _sub(root, "cpu", mode=cpu_mode)
    devices = _sub(root, "devices")
    used = {}
    for index, disk in enumerate(spec["disks"]):
        path = volumes[index]["path"] if index in volumes else disk.get("path")
        node = _sub(devices, "disk", type="file", device=disk["device"])
        _sub(node, "driver", name="qemu", type=disk["format"])
        if path:
            _sub(node, "source", file=path)
        prefix = _TARGET_PREFIX[disk["bus"]]
        _sub(node, "target", dev=_target(prefix, used.get(prefix, 0)), bus=disk["bus"])
        used[prefix] = used.get(prefix, 0) + 1
        if disk["device"] == "cdrom":
            _sub(node, "readonly")
    for nic in spec["interfaces"]:
        kind = "network" if "network" in nic else "bridge"
        node = _sub(devices, "interface", type=kind)
        if nic.get("mac"):
            _sub(node, "mac", address=nic["mac"].lower())
        _sub(node, "source", **{kind: nic[kind]})
        _sub(node, "model", type=nic["model"])
    _platform_devices(devices, spec["libvirt"])
    for text in spec["libvirt"]["xml"]:
        node = ET.fromstring(text)
        if node.tag in DEVICE_TAGS:
            devices.append(node)
            continue
        old = root.find(node.tag)
        if old is not None:
            root.remove(old)
        root.append(node)
    return ET.tostring(root, encoding="unicode")


def _platform_devices(devices, extra):
    """The serial console, the guest agent's channel and graphics a ``libvirt`` spec asks for."""
    if extra["console"]:
        _sub(_sub(devices, "serial", type="pty"), "target", port=0)
        _sub(_sub(devices, "console", type="pty"), "target", type="serial", port=0)
    if extra["guest_agent"]:
        channel = _sub(devices, "channel", type="unix")
        _sub(channel, "target", type="virtio", name="org.qemu.guest_agent.0")
    if extra["graphics"] != "none":
        graphics = _sub(devices, "graphics", type=extra["graphics"], autoport="yes")
        _sub(graphics, "listen", type="address", address="127.0.0.1")
        _sub(_sub(devices, "video"), "model", type="virtio")


def set_domain_resources(xml, vcpus=None, memory_mb=None):
    """Persistent domain XML with ``vcpus`` and/or ``memory_mb`` changed (others kept)."""
    root = ET.fromstring(xml)
    if vcpus is not None:
        vcpu = root.find("vcpu")
        if vcpu is None:
            vcpu = _sub(root, "vcpu")
        vcpu.attrib.pop("current", None)
        vcpu.text = str(vcpus)
    if memory_mb is not None:
        for tag in ("memory", "currentMemory"):
            node = root.find(tag)
            if node is None:
                node = _sub(root, tag)
            node.set("unit", "MiB")
            node.text = str(memory_mb)
        max_memory = root.find("maxMemory")
        if max_memory is not None and mib(max_memory) < memory_mb:
            raise field_error("memory_mb", "%d is above the domain's maxMemory of %d MiB"
                              % (memory_mb, mib(max_memory)))
    return ET.tostring(root, encoding="unicode")
