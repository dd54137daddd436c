"""vSphere VM spec: JSON Schema validation, the ConfigSpec that CreateVM_Task takes and the
device changes that ReconfigVM_Task takes.

The spec is the ``create`` argument of the vsphere provider::

    name: web1                 # 1-80 characters, no '/' and no control characters
    vcpus: 2                   # >= 1
    memory_mb: 1024            # >= 4, a multiple of 4 (a vSphere rule)
    guest_id: otherGuest64     # vSphere guest OS identifier (default otherGuest64)
    placement:                 # where the VM goes (location.py); each key optional
      {datacenter: DC0, cluster: C0, host: esx-01, resource_pool: web,
       folder: /DC0/vm/team-a, datastore: ds1}
    template: /DC0/vm/tpl/deb12  # clone this VM or template (name or inventory path)
    customization: {hostname: web1, domain: example.com}  # LinuxPrep, clones only
    disks:                     # new thin (default) or thick disks on a paravirtual SCSI bus
      - {size_gb: 10, thin: true}
    interfaces:                # port group (standard or distributed) by name
      - {network: VM Network, model: vmxnet3, mac: "00:50:56:00:00:01"}
    metadata: {owner: team-a}  # stored as custom attributes (values become strings, not empty)
    tags: [web]                # vSphere tags of the provider's tag_category (vCenter only)

The older keys ``hypervisor``, ``az`` and ``datastore`` still place a VM: ``hypervisor`` and
``datastore`` are ``placement.host`` and ``placement.datastore``, ``az`` keeps hosts of that
availability zone (a cluster's name). ``vcpus`` and ``memory_mb`` are required without
``template``; a clone takes what it leaves out from its template.

``boot`` is a known field of the shared spec that this provider cannot honour: a non-empty
value raises NotSupported. Unknown keys are errors and every bad field is reported by its
path. Keys whose value is None (in placement too) count as unset.
"""
import re

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, NotSupported, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    metadata_value)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.location import (
    KEYS as PLACEMENT_KEYS)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vm_schema import (
    MAC_PATTERN, NAME_PATTERN, STRING, check_spec, spec_schema as vm_schema)

__all__ = ("spec_schema", "validate_spec", "validate_changes", "placement_request", "config_spec",
           "device_changes", "customization_spec", "NIC_MODELS", "DEFAULT_GUEST_ID",
           "MAX_NAME_LENGTH")

DEFAULT_GUEST_ID = "otherGuest64"
NIC_MODELS = ("vmxnet3", "e1000", "e1000e")
MAX_DISKS = 15  # one SCSI controller: units 0-15 without 7
MAX_NAME_LENGTH = 80  # vSphere refuses longer VM names
_MESSAGES = {
    ("mac", "pattern"): "must be a MAC address such as 00:50:56:00:00:01",
    ("memory_mb", "multipleOf"): "must be a multiple of 4 (vSphere allocates memory in 4 MB steps)",
    ("guest_id", "pattern"): "must be a vSphere guest OS identifier such as otherGuest64",
    ("hostname", "pattern"): "must be a host name: letters, digits and '-', at most 63, "
                             "neither starting nor ending with '-'",
}
HOSTNAME = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$"
DEFAULT_DOMAIN = "localdomain"
_UNSUPPORTED = {
    "boot": "the boot order cannot be set by this provider; remove boot",
    "clone": "a vSphere clone is always a full copy of its template's disks; remove clone",
}
_DISK = {"type": "object", "additionalProperties": False, "required": ["size_gb"],
         "properties": {"size_gb": {"type": "integer", "minimum": 1},
                        "thin": {"type": "boolean"}}}
_NIC = {"type": "object", "additionalProperties": False, "required": ["network"],
        "properties": {"network": STRING, "model": {"enum": list(NIC_MODELS)},
                       "mac": {"type": "string", "pattern": MAC_PATTERN}}}
_TAGS = {"type": "array", "items": STRING}
_PLACEMENT = {"type": "object", "additionalProperties": False,
              "properties": dict((key, STRING) for key in PLACEMENT_KEYS)}
_CUSTOMIZATION = {"type": "object", "additionalProperties": False,
                  "properties": {"hostname": {"type": "string", "pattern": HOSTNAME},
                                 "domain": STRING}}


def _metadata_schema(removable):
    value = {"type": ["string", "number", "boolean"] + (["null"] if removable else [])}
    return {"type": "object", "propertyNames": {"minLength": 1}, "additionalProperties": value}


def _empty_values(metadata):
    """(path, message) of every empty metadata value: vSphere keeps none."""
    if not isinstance(metadata, dict):
        return []
    return [("metadata.%s" % key, "must not be empty (vSphere stores an empty custom attribute "
             "as no value); give a value, or null to remove the key")
            for key, value in sorted(metadata.items()) if value == ""]


def spec_schema(cloning=False):
    """The JSON Schema (draft 7) of a vsphere VM spec (of a clone: only ``name`` required)."""
    schema = vm_schema({
        "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH,
                 "pattern": NAME_PATTERN},
        "memory_mb": {"type": "integer", "minimum": 4, "multipleOf": 4},
        "guest_id": {"type": "string", "pattern": r"^[A-Za-z0-9_]+$"},
        "hypervisor": STRING, "az": STRING, "datastore": STRING,
        "metadata": _metadata_schema(False),
        "disks": {"type": "array", "items": _DISK, "maxItems": MAX_DISKS},
        "interfaces": {"type": "array", "items": _NIC},
        "tags": _TAGS,
        "placement": _PLACEMENT, "template": STRING, "customization": _CUSTOMIZATION,
        "boot": {}, "clone": {},
    })
    if cloning:
        schema["required"] = ["name"]
    return schema


def _unset(fields):
    """``fields`` without the keys whose value is None, in it and in its placement and
    customization (sub-options a task leaves out arrive as None)."""
    fields = dict((k, v) for k, v in fields.items() if v is not None)
    for key in ("placement", "customization"):
        if isinstance(fields.get(key), dict):
            fields[key] = dict((k, v) for k, v in fields[key].items() if v is not None)
    return fields


def validate_spec(spec):
    """Return the spec without unset keys and with defaults; InvalidSpec lists every bad field."""
    if not isinstance(spec, dict):
        raise InvalidSpec("the VM spec must be a dict, not %s" % type(spec).__name__)
    spec = _unset(spec)
    cloning = "template" in spec
    more = _empty_values(spec.get("metadata"))
    if cloning and "guest_id" in spec:
        more.append(("guest_id", "a clone keeps the guest OS of its template; remove guest_id"))
    custom = spec.get("customization")
    if custom is not None and not cloning:
        more.append(("customization", "customizes clones only: set template, or remove "
                                      "customization"))
    if isinstance(custom, dict) and not custom.get("hostname") and not re.match(
            HOSTNAME, str(spec.get("name"))):
        more.append(("customization.hostname", "is required: the VM's name %r is not a host "
                     "name (letters, digits and '-', at most 63)" % spec.get("name")))
    check_spec(spec_schema(cloning), spec, _MESSAGES, more)
    for key, why in sorted(_UNSUPPORTED.items()):
        if spec.get(key):
            raise NotSupported("vsphere provider does not support %s: %s" % (key, why))
    if not cloning:
        spec["guest_id"] = spec.get("guest_id", DEFAULT_GUEST_ID)
    spec["metadata"] = dict((k, metadata_value(v)) for k, v in (spec.get("metadata") or {}).items())
    spec["tags"] = sorted(set(spec.get("tags") or []))
    return spec


def validate_changes(changes):
    """The given fields of a reconfiguration (None values dropped), checked as the spec's fields
    are, metadata values as stored (None removes a key); InvalidSpec lists every bad field."""
    changes = _unset(changes)
    schema = spec_schema()
    schema["properties"] = dict((key, schema["properties"][key]) for key in (
        "vcpus", "memory_mb", "disks", "interfaces", "tags", "placement"))
    schema["properties"]["metadata"] = _metadata_schema(True)
    schema["required"] = []
    check_spec(schema, changes, _MESSAGES, _empty_values(changes.get("metadata")))
    if "metadata" in changes:
        changes["metadata"] = dict((k, metadata_value(v)) for k, v in changes["metadata"].items())
    return changes


def placement_request(spec):
    """(wanted placement, field path of each key) of a validated spec, its older keys
    ``hypervisor`` and ``datastore`` merged in; InvalidSpec when one contradicts placement."""
    wanted = dict(spec.get("placement") or {})
    paths = dict((key, "placement." + key) for key in PLACEMENT_KEYS)
    for old, key in (("hypervisor", "host"), ("datastore", "datastore")):
        if spec.get(old) is None:
            continue
        if wanted.get(key, spec[old]) != spec[old]:
            raise field_error(paths[key], "%r contradicts %s %r; give one of them (%s is the "
                              "older spelling of %s)" % (wanted[key], old, spec[old], old,
                                                         paths[key]))
        wanted[key], paths[key] = spec[old], old
    return wanted, paths


def customization_spec(spec, nics):
    """The LinuxPrep customization of a clone with ``nics`` NICs (each configured by DHCP):
    host name ``customization.hostname``, else the VM's name."""
    from pyVmomi import vim

    asked = spec["customization"]
    hostname = asked.get("hostname") or spec["name"]
    custom = vim.vm.customization
    return custom.Specification(
        identity=custom.LinuxPrep(hostName=custom.FixedName(name=hostname),
                                  domain=asked.get("domain") or DEFAULT_DOMAIN),
        globalIPSettings=custom.GlobalIPSettings(),
        nicSettingMap=[custom.AdapterMapping(adapter=custom.IPSettings(
            ip=custom.DhcpIpGenerator())) for _index in range(nics)])


def _nic_specs(interfaces, backing_for, vim):
    """Specs adding ``interfaces``: (index in the wanted list, item) pairs."""
    classes = {"vmxnet3": vim.vm.device.VirtualVmxnet3, "e1000": vim.vm.device.VirtualE1000,
               "e1000e": vim.vm.device.VirtualE1000e}
    out = []
    for index, nic in interfaces:
        device = classes[nic.get("model", "vmxnet3")](
            key=-200 - index, backing=backing_for(nic["network"], "interfaces[%d].network" % index),
            connectable=vim.vm.device.VirtualDevice.ConnectInfo(
                startConnected=True, allowGuestControl=True, connected=False))
        if nic.get("mac"):
            device.addressType, device.macAddress = "manual", nic["mac"]
        else:
            device.addressType = "generated"
        out.append(vim.vm.device.VirtualDeviceSpec(operation="add", device=device))
    return out


def config_spec(spec, datastore, backing_for):
    """The vim.vm.ConfigSpec creating ``spec`` (validated) with its files on ``datastore``.

    ``backing_for(network_name, path)`` returns the device backing of a port group, or raises
    InvalidSpec naming ``path``.
    """
    from pyVmomi import vim

    changes = []
    if spec.get("disks"):
        changes += _added_disks(enumerate(spec["disks"]), [], vim)
    if spec.get("interfaces"):
        changes += _nic_specs(enumerate(spec["interfaces"]), backing_for, vim)
    return vim.vm.ConfigSpec(
        name=spec["name"], numCPUs=spec["vcpus"], memoryMB=spec["memory_mb"],
        guestId=spec["guest_id"], files=vim.vm.FileInfo(vmPathName="[%s]" % datastore),
        deviceChange=changes)


def _added_disks(added, devices, vim):
    """Specs adding the disks ``added`` ((index, item) pairs) on the VM's first SCSI controller
    (a new paravirtual one when it has none), each on a free unit."""
    controllers = [d for d in devices if isinstance(d, vim.vm.device.VirtualSCSIController)]
    out = []
    if controllers:
        key = controllers[0].key
        used = set(d.unitNumber for d in devices if d.controllerKey == key)
    else:
        key, used = -100, set()
        out.append(vim.vm.device.VirtualDeviceSpec(
            operation="add", device=vim.vm.device.ParaVirtualSCSIController(
                key=key, busNumber=0, sharedBus="noSharing")))
    free = [unit for unit in range(16) if unit != 7 and unit not in used]
    for index, disk in added:
        if not free:
            raise field_error("disks[%d]" % index, "the VM's SCSI controller has no free unit "
                              "left (15 disks); remove a disk first")
        backing = vim.vm.device.VirtualDisk.FlatVer2BackingInfo(
            diskMode="persistent", thinProvisioned=disk.get("thin", True), fileName="")
        device = vim.vm.device.VirtualDisk(
            key=-101 - index, controllerKey=key, unitNumber=free.pop(0),
            capacityInKB=disk["size_gb"] * 1024 * 1024, backing=backing)
        out.append(vim.vm.device.VirtualDeviceSpec(operation="add", fileOperation="create",
                                                   device=device))
    return out


def device_changes(field, changes, devices, backing_for):
    """The device specs doing ``changes`` (``_reconfigure.list_changes`` of ``field``, disks or
    interfaces) on ``devices``, the VM's devices; and the files of removed disks, which are kept.

    Disks are only added or removed (removed without destroying their file); interfaces are
    also updated, by a new backing for their network.
    """
    from pyVmomi import vim

    kind = vim.vm.device.VirtualDisk if field == "disks" else vim.vm.device.VirtualEthernetCard
    mine = [d for d in devices if isinstance(d, kind)]
    specs, kept = [], []
    for index, item in changes["update"]:
        device = mine[index]
        device.backing = backing_for(item["network"], "interfaces[%d].network" % index)
        specs.append(vim.vm.device.VirtualDeviceSpec(operation="edit", device=device))
    for index, _item in changes["remove"]:
        specs.append(vim.vm.device.VirtualDeviceSpec(operation="remove", device=mine[index]))
        if field == "disks":
            kept.append((mine[index].deviceInfo.label, getattr(mine[index].backing, "fileName",
                                                               None)))
    if changes["add"]:
        specs += _added_disks(changes["add"], devices, vim) if field == "disks" else \
            _nic_specs(changes["add"], backing_for, vim)
    return specs, kept
