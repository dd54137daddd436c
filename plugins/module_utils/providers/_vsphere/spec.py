"""vSphere VM spec: JSON Schema validation and the ConfigSpec that CreateVM_Task takes.

The spec is the ``create`` argument of the vsphere provider::

    name: web1                 # 1-80 characters, no '/' and no control characters
    vcpus: 2                   # >= 1
    memory_mb: 1024            # >= 4, a multiple of 4 (a vSphere rule)
    guest_id: otherGuest64     # vSphere guest OS identifier (default otherGuest64)
    hypervisor: esx-01         # host to place the VM on (optional)
    az: cluster-a              # cluster to place it in (optional; least loaded host)
    datastore: ds1             # default: the host's datastore with most free space
    disks:                     # new thin (default) or thick disks on a paravirtual SCSI bus
      - {size_gb: 10, thin: true}
    interfaces:                # port group (standard or distributed) by name
      - {network: VM Network, model: vmxnet3, mac: "00:50:56:00:00:01"}
    metadata: {owner: team-a}  # stored as custom attributes (values become strings)

``tags`` and ``boot`` are known fields of the shared spec that this provider cannot honour:
a non-empty value raises NotSupported. Unknown keys are errors and every bad field is reported
by its path. Keys whose value is None count as unset.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, NotSupported
from ansible_collections.resilient.virt.plugins.module_utils.providers._vm_schema import (
    MAC_PATTERN, NAME_PATTERN, STRING, check_spec, spec_schema as vm_schema)

__all__ = ("spec_schema", "validate_spec", "config_spec", "NIC_MODELS", "DEFAULT_GUEST_ID",
           "MAX_NAME_LENGTH")

DEFAULT_GUEST_ID = "otherGuest64"
NIC_MODELS = ("vmxnet3", "e1000", "e1000e")
MAX_DISKS = 15  # one SCSI controller: units 0-15 without 7
MAX_NAME_LENGTH = 80  # vSphere refuses longer VM names
_MESSAGES = {
    ("mac", "pattern"): "must be a MAC address such as 00:50:56:00:00:01",
    ("memory_mb", "multipleOf"): "must be a multiple of 4 (vSphere allocates memory in 4 MB steps)",
    ("guest_id", "pattern"): "must be a vSphere guest OS identifier such as otherGuest64",
}
_UNSUPPORTED = {
    "tags": "vSphere tags live in the vAPI (REST) endpoint, which this provider does not use; "
            "use metadata (custom attributes) instead",
    "boot": "the boot order cannot be set by this provider; remove boot",
}


def spec_schema():
    """The JSON Schema (draft 7) of a vsphere VM spec."""
    disk = {"type": "object", "additionalProperties": False, "required": ["size_gb"],
            "properties": {"size_gb": {"type": "integer", "minimum": 1},
                           "thin": {"type": "boolean"}}}
    nic = {"type": "object", "additionalProperties": False, "required": ["network"],
           "properties": {"network": STRING, "model": {"enum": list(NIC_MODELS)},
                          "mac": {"type": "string", "pattern": MAC_PATTERN}}}
    return vm_schema({
        "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH,
                 "pattern": NAME_PATTERN},
        "memory_mb": {"type": "integer", "minimum": 4, "multipleOf": 4},
        "guest_id": {"type": "string", "pattern": r"^[A-Za-z0-9_]+$"},
        "hypervisor": STRING, "az": STRING, "datastore": STRING,
        "disks": {"type": "array", "items": disk, "maxItems": MAX_DISKS},
        "interfaces": {"type": "array", "items": nic},
        "tags": {"type": "array"},
        "boot": {},
    })


def validate_spec(spec):
    """Return the spec without unset keys and with defaults; InvalidSpec lists every bad field."""
    if not isinstance(spec, dict):
        raise InvalidSpec("the VM spec must be a dict, not %s" % type(spec).__name__)
    spec = dict((k, v) for k, v in spec.items() if v is not None)
    check_spec(spec_schema(), spec, _MESSAGES)
    for key, why in sorted(_UNSUPPORTED.items()):
        if spec.get(key):
            raise NotSupported("vsphere provider does not support %s: %s" % (key, why))
    spec.setdefault("guest_id", DEFAULT_GUEST_ID)
    spec["metadata"] = dict((k, str(v).lower() if isinstance(v, bool) else str(v))
                            for k, v in (spec.get("metadata") or {}).items())
    return spec


def _disk_specs(disks, vim):
    controller = vim.vm.device.ParaVirtualSCSIController(key=-100, busNumber=0,
                                                         sharedBus="noSharing")
    out = [vim.vm.device.VirtualDeviceSpec(operation="add", device=controller)]
    for index, disk in enumerate(disks):
        backing = vim.vm.device.VirtualDisk.FlatVer2BackingInfo(
            diskMode="persistent", thinProvisioned=disk.get("thin", True), fileName="")
        device = vim.vm.device.VirtualDisk(
            key=-101 - index, controllerKey=-100, unitNumber=index if index < 7 else index + 1,
            capacityInKB=disk["size_gb"] * 1024 * 1024, backing=backing)
        out.append(vim.vm.device.VirtualDeviceSpec(operation="add", fileOperation="create",
                                                   device=device))
    return out


def _nic_specs(interfaces, backing_for, vim):
    classes = {"vmxnet3": vim.vm.device.VirtualVmxnet3, "e1000": vim.vm.device.VirtualE1000,
               "e1000e": vim.vm.device.VirtualE1000e}
    out = []
    for index, nic in enumerate(interfaces):
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
        changes += _disk_specs(spec["disks"], vim)
    if spec.get("interfaces"):
        changes += _nic_specs(spec["interfaces"], backing_for, vim)
    return vim.vm.ConfigSpec(
        name=spec["name"], numCPUs=spec["vcpus"], memoryMB=spec["memory_mb"],
        guestId=spec["guest_id"], files=vim.vm.FileInfo(vmPathName="[%s]" % datastore),
        deviceChange=changes)
