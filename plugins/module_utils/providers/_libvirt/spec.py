"""libvirt VM spec: JSON Schema validation, and the domain XML written from it.

The spec is the ``create`` argument of the libvirt provider::

    name: web1                       # see domain.name_problem, and no control characters
    vcpus: 2                         # >= 1
    memory_mb: 1024                  # >= 16
    disks:                           # each: size_gb (new volume), base_image or path
      - {size_gb: 10, bus: virtio, format: qcow2, pool: fast}
      - {base_image: /var/lib/libvirt/images/debian-12.qcow2, clone: overlay, size_gb: 20}
      - {path: /isos/install.iso, device: cdrom}
    interfaces:                      # each: network or bridge
      - {network: default, model: virtio, mac: "52:54:00:12:34:56"}
    boot: [hd, network]
    metadata: {owner: team-a}        # values stored as strings
    tags: [web]
    autostart: true                  # started with the host (default false)
    libvirt:                         # what only libvirt domains have (all optional)
      cpu_mode: host-model           # host-model, host-passthrough, maximum or default
      console: true                  # a serial console (virsh console)
      guest_agent: true              # the qemu-guest-agent channel
      graphics: none                 # none, vnc or spice (listening on localhost)
      xml:                           # elements the spec does not cover, each validated
        - <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>
    cloud_init:                      # a NoCloud seed ISO attached as a cdrom (images.py)
      user_data: {packages: [nginx]} # a string as it is, a dict as #cloud-config YAML
      meta_data: {}                  # instance-id and local-hostname by default
      network_config: {version: 2}   # optional

Unknown keys are errors (typos are caught) and every bad field is reported by its path, for
example ``disks[0].size_gb: -1 is less than the minimum of 1``. Keys whose value is None count
as unset. The XML is built with ElementTree, so names and values are escaped, never injected:
a name such as ``a&b<c>"`` is stored verbatim. Imported on the paths that write a domain
(create, reconfigure) only; ``edit.py`` changes an existing domain with the same elements.

``libvirt.xml`` is the escape hatch: each item is one XML element, parsed here (malformed XML is
refused by its index) and placed by its tag - a device (``rng``, ``watchdog``, ``tpm``...) is
added to ``<devices>``, another domain element (``clock``, ``features``, ``cputune``...)
replaces the element of that tag; what the spec sets itself (name, memory, vcpu, os, metadata,
devices) is refused. A domain with such items is validated against libvirt's schema when defined.
"""
import json
import re
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils.errors import NotSupported
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.domain import (
    name_problem, qualified)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.platform import CPU_MODES
from ansible_collections.resilient.virt.plugins.module_utils.providers._vm_schema import (
    MAC_PATTERN, STRING, check_spec, field_path, spec_schema as vm_schema)

__all__ = ("spec_schema", "validate_spec", "build_domain_xml", "free_target",
           "disk_element", "interface_element", "vm_element", "volumes_element")

DISK_BUSES = ("virtio", "sata", "scsi", "ide")
DISK_FORMATS = ("qcow2", "raw")
DISK_DEVICES = ("disk", "cdrom")
CLONES = ("overlay", "copy")
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
_MESSAGES = {("mac", "pattern"): "must be a MAC address such as 52:54:00:12:34:56",
             # never the value: user data may hold passwords and keys
             ("user_data", "type"): "must be a string (written as it is) or a dict (written "
                                    "as #cloud-config YAML)",
             ("meta_data", "type"): "must be a dict (written as YAML)",
             ("network_config", "type"): "must be a dict (written as YAML) or a string"}


def spec_schema():
    """The JSON Schema (draft 7) of a libvirt VM spec."""
    disk = {"type": "object", "additionalProperties": False, "properties": {
        "size_gb": {"type": "integer", "minimum": 1},
        "path": {"type": "string", "pattern": "^/"},
        "bus": {"enum": list(DISK_BUSES)},
        "format": {"enum": list(DISK_FORMATS)},
        "device": {"enum": list(DISK_DEVICES)},
        "base_image": STRING,
        "clone": {"enum": list(CLONES)},
        "pool": STRING,
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
        "autostart": {"type": "boolean"},
        "libvirt": {"type": "object", "additionalProperties": False, "properties": {
            "cpu_mode": {"enum": list(CPU_MODES)},
            "console": {"type": "boolean"},
            "guest_agent": {"type": "boolean"},
            "graphics": {"enum": list(GRAPHICS)},
            "xml": {"type": "array", "items": STRING},
        }},
        "cloud_init": {"type": "object", "additionalProperties": False, "properties": {
            "user_data": {"type": ["string", "object"]},
            "meta_data": {"type": "object"},
            "network_config": {"type": ["string", "object"]},
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
    # cloud-init data goes into the seed ISO, not into the XML
    for parts, text in _strings(dict((k, v) for k, v in spec.items() if k != "cloud_init"), []):
        if _XML_BAD.search(text):
            yield field_path(parts), "contains a control character that cannot be stored"
    for index, disk in enumerate(spec.get("disks") or []):
        if not isinstance(disk, dict):
            continue
        where = "disks[%d]" % index
        if disk.get("device", "disk") == "cdrom":
            if "size_gb" in disk:
                yield where + ".size_gb", "a cdrom has no size; give path (an ISO image) or nothing"
            if "base_image" in disk:
                yield where + ".base_image", ("a cdrom uses its image as it is; give path (an "
                                              "ISO image) instead")
            if disk.get("bus") == "virtio":
                yield where + ".bus", "a cdrom cannot use virtio; use sata, scsi or ide"
        elif ("path" in disk) + ("base_image" in disk) + (
                "size_gb" in disk and "base_image" not in disk) != 1:
            yield where, ("give exactly one of size_gb (a new empty volume), base_image (a new "
                          "volume made from an image; size_gb may make it larger) or path (an "
                          "existing image)")
        yield from _image_errors(where, disk)
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


def _image_errors(where, disk):
    """What is wrong with the clone, pool and format of the disk ``disk`` (at ``where``)."""
    made = "size_gb" in disk or "base_image" in disk
    if "clone" in disk and "base_image" not in disk:
        yield where + ".clone", "applies to a disk made from base_image only; remove it"
    if "pool" in disk and not made:
        yield where + ".pool", ("is where the volume made for a disk (size_gb, base_image) goes, "
                                "and this disk uses an existing image; remove pool")
    if "base_image" in disk and disk.get("clone", "overlay") == "overlay" and \
            disk.get("format") == "raw":
        yield where + ".format", ("an overlay is a qcow2 volume on its base image; remove "
                                  "format, or use clone: copy for a raw copy")


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
    """Return the spec with defaults filled in, or raise InvalidSpec listing every bad field
    (NotSupported for ``placement``, ``template``, ``clone``, ``customization`` and ``guest_id``,
    which are other providers')."""
    spec = _drop_none(spec)
    for key, fix in (("placement", "a libvirt provider is one hypervisor, so choose the provider; "
                                   "a disk's storage pool is disks[].pool"),
                     ("template", "make a disk from an image with disks[].base_image"),
                     ("clone", "a disk made from an image says overlay or copy in "
                               "disks[].clone"),
                     ("customization", "give the guest its settings with cloud_init"),
                     ("guest_id", "the domain's guest OS is what it boots")):
        if isinstance(spec, dict) and key in spec:
            raise NotSupported("the libvirt provider has no %s: %s; remove %s" % (key, fix, key))
    check_spec(spec_schema(), spec, _MESSAGES, _semantic_errors(spec) if isinstance(spec, dict) else ())
    return _with_defaults(spec)


def _with_defaults(spec):
    disks = []
    for disk in spec.get("disks") or []:
        device = disk.get("device", "disk")
        guessed = "qcow2" if disk.get("size_gb") or disk.get("base_image") or \
            disk.get("path", "").endswith(".qcow2") else "raw"
        if "base_image" in disk:
            disk = dict(disk, clone=disk.get("clone", "overlay"))
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


def free_target(bus, used):
    """The first target device name of ``bus`` (vda, sdb...) not in ``used``."""
    index = 0
    while _target(_TARGET_PREFIX[bus], index) in used:
        index += 1
    return _target(_TARGET_PREFIX[bus], index)


def disk_element(disk, path, target):
    """The ``<disk>`` of a validated spec disk, its image at ``path`` (None: an empty cdrom)."""
    node = ET.Element("disk", type="file", device=disk["device"])
    _sub(node, "driver", name="qemu", type=disk["format"])
    if path:
        _sub(node, "source", file=path)
    _sub(node, "target", dev=target, bus=disk["bus"])
    if disk["device"] == "cdrom":
        _sub(node, "readonly")
    return node


def interface_element(nic):
    """The ``<interface>`` of a validated spec interface."""
    kind = "network" if "network" in nic else "bridge"
    node = ET.Element("interface", type=kind)
    if nic.get("mac"):
        _sub(node, "mac", address=nic["mac"].lower())
    _sub(node, "source", **{kind: nic[kind]})
    _sub(node, "model", type=nic["model"])
    return node


def vm_element(tags, metadata, volumes):
    """This collection's ``<metadata>`` child: tags, metadata items and the volumes created for
    the VM (dicts pool, name, path, size_gb, and base_image, clone or role when they have one)."""
    rv = ET.Element(qualified("vm"))
    holder = ET.SubElement(rv, qualified("tags"))
    for tag in tags:
        ET.SubElement(holder, qualified("tag")).text = tag
    items = ET.SubElement(rv, qualified("metadata"))
    for key, value in sorted(metadata.items()):
        ET.SubElement(items, qualified("item"), key=key).text = value
    volumes_element(rv, volumes)
    return rv


def volumes_element(parent, volumes):
    """The record of the volumes created for a VM (dicts pool, name, path, size_gb, and
    base_image, clone or role when they have one), added to ``parent``."""
    owned = ET.SubElement(parent, qualified("volumes"))
    for vol in volumes:
        node = ET.SubElement(owned, qualified("volume"), pool=vol["pool"], name=vol["name"],
                             path=vol["path"], size_gb=str(vol["size_gb"]))
        for key in ("base_image", "clone", "role"):
            if vol.get(key):
                node.set(key, vol[key])
    return owned


def _sub(parent, tag, text=None, **attrs):
    node = ET.SubElement(parent, tag, dict((k, str(v)) for k, v in attrs.items()))
    if text is not None:
        node.text = str(text)
    return node


def build_domain_xml(spec, domain_type="qemu", uuid=None, volumes=None, cpu_mode=None, seed=None):
    """Domain XML for a validated ``spec`` (see :func:`validate_spec`).

    ``volumes`` maps a disk index to the volume created for it (dict pool, name, path,
    size_gb); those disks use the volume's path and are recorded in the metadata. ``cpu_mode``
    is the CPU mode chosen for the hypervisor (``platform.choose_cpu_mode``), None for its
    default. ``seed``, the cloud-init seed volume, is attached as a SATA cdrom after the disks
    and recorded too.
    """
    volumes = volumes or {}
    root = ET.Element("domain", type=domain_type)
    _sub(root, "name", spec["name"])
    if uuid:
        _sub(root, "uuid", uuid)
    _sub(root, "metadata").append(vm_element(spec["tags"], spec["metadata"],
                                             [volumes[index] for index in sorted(volumes)]
                                             + ([seed] if seed else [])))
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
    targets = []
    for index, disk in enumerate(spec["disks"]):
        path = volumes[index]["path"] if index in volumes else disk.get("path")
        targets.append(free_target(disk["bus"], targets))
        devices.append(disk_element(disk, path, targets[-1]))
    if seed:
        targets.append(free_target("sata", targets))
        devices.append(disk_element({"device": "cdrom", "bus": "sata", "format": "raw"},
                                    seed["path"], targets[-1]))
    for nic in spec["interfaces"]:
        devices.append(interface_element(nic))
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
