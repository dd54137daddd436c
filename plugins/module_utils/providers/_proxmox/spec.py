"""Proxmox VE VM spec: JSON Schema validation and the parameters of PVE's create request
(``POST /nodes/<node>/qemu``), Proxmox's own cloud-init included.

The spec is the ``create`` argument of the proxmox provider::

    name: web1                   # a DNS name (PVE's rule): letters, digits, '-' and '.'
    vcpus: 2                     # cores (one socket)
    memory_mb: 1024
    placement: {host: pve2, datastore: local-lvm, resource_pool: web}   # node, storage, pool
    template: debian12           # clone this template (or VM): name, or /<node>/<vmid>
    clone: overlay               # with template: overlay (a linked clone) or copy (a full clone)
    disks:                       # new volumes on placement.datastore (else provider.storage)
      - {size_gb: 10, bus: scsi}             # scsi (default), virtio, sata or ide
    interfaces:                  # virtio (default), e1000, e1000e, rtl8139, vmxnet3
      - {bridge: vmbr0, vlan: 10, model: virtio, mac: "bc:24:11:00:00:01"}
    cloud_init:                  # Proxmox's own cloud-init (a cloud-init drive, ide2)
      user_data: {users: [{name: deploy, ssh_authorized_keys: [...], plain_text_passwd: ...}]}
      network_config: {version: 2, ethernets: {eth0: {dhcp4: true}}}
    metadata: {owner: team-a}    # kept in the VM's description (vm_dict.py)
    tags: [web]                  # PVE tags: lower case letters, digits and _ + - .
    autostart: true              # onboot

Without ``clone``, a clone of a template is linked unless ``placement.datastore`` names a storage
to copy it to, and a clone of a VM is full (PVE links templates only). The older keys
``hypervisor`` and ``datastore`` are ``placement.host`` and
``placement.datastore``. ``vcpus`` and ``memory_mb`` are required without ``template``. Unknown
keys are errors and every bad field is reported by its path; keys whose value is None count as
unset.
"""
from urllib.parse import quote

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, NotSupported, field_error, field_errors)
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    metadata_value)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vm_schema import (
    MAC_PATTERN, STRING, check_spec, spec_schema as vm_schema)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.vm_dict import (
    DRIVE_BUSES, NIC_MODELS, join_tags, with_metadata)

__all__ = ("spec_schema", "validate_spec", "placement_request", "create_parameters",
           "hardware_parameters", "cloud_init_parameters", "NAME_PATTERN", "TAG_PATTERN",
           "CLONES")

# PVE's VM names are DNS names (its pve-configid format "dns-name")
NAME_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$"
TAG_PATTERN = r"^[a-z0-9_][a-z0-9_+.-]*$"
MAX_NAME_LENGTH = 63
PLACEMENT_KEYS = ("host", "datastore", "resource_pool")
# what a clone's disks are, in the words of the libvirt provider's disks[].clone: overlay (a
# linked clone, copy-on-write children of the template's disks) or copy (a full clone)
CLONES = ("overlay", "copy")
_BUS_LIMITS = {"scsi": 31, "virtio": 16, "sata": 6, "ide": 4}
_MESSAGES = {
    ("name", "pattern"): "must be a DNS name (letters, digits, '-' and '.'; Proxmox's rule)",
    ("mac", "pattern"): "must be a MAC address such as bc:24:11:00:00:01",
}
_DISK = {"type": "object", "additionalProperties": False, "required": ["size_gb"],
         "properties": {"size_gb": {"type": "integer", "minimum": 1},
                        "bus": {"enum": list(DRIVE_BUSES)}, "storage": STRING}}
_NIC = {"type": "object", "additionalProperties": False,
        "properties": {"bridge": STRING, "model": {"enum": list(NIC_MODELS)},
                       "mac": {"type": "string", "pattern": MAC_PATTERN},
                       "vlan": {"type": "integer", "minimum": 1, "maximum": 4094}}}
_UNSUPPORTED = {
    "boot": "the boot order is PVE's default (the first disk, then the first NIC); remove boot",
    "customization": "Proxmox customizes a guest with cloud-init; use cloud_init instead",
    "guest_id": "Proxmox has no guest OS identifier to set here; remove guest_id",
    "libvirt": "these are the libvirt provider's settings; remove libvirt",
}


def spec_schema(cloning=False):
    """The JSON Schema (draft 7) of a proxmox VM spec (of a clone: only ``name`` required)."""
    schema = vm_schema({
        "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH,
                 "pattern": NAME_PATTERN},
        "hypervisor": STRING, "datastore": STRING,
        "disks": {"type": "array", "items": _DISK},
        "interfaces": {"type": "array", "items": _NIC, "maxItems": 32},
        "tags": {"type": "array", "items": {"type": "string", "pattern": TAG_PATTERN}},
        "autostart": {"type": "boolean"},
        "placement": {"type": "object", "additionalProperties": False,
                      "properties": dict((key, STRING) for key in PLACEMENT_KEYS)},
        "template": STRING, "clone": {"enum": list(CLONES)},
        "cloud_init": {"type": "object", "additionalProperties": False,
                       "properties": {"user_data": {"type": ["object", "string"]},
                                      "meta_data": {"type": "object"},
                                      "network_config": {"type": ["object", "string"]}}},
        "boot": {}, "customization": {}, "guest_id": {}, "libvirt": {},
    })
    schema["properties"]["tags"]["items"]["pattern"] = TAG_PATTERN
    if cloning:
        schema["required"] = ["name"]
    return schema


def _unset(fields):
    fields = dict((k, v) for k, v in fields.items() if v is not None)
    for key in ("placement", "cloud_init"):
        if isinstance(fields.get(key), dict):
            fields[key] = dict((k, v) for k, v in fields[key].items() if v is not None)
    return fields


def _bus_counts(disks):
    more = []
    counts = {}
    for disk in disks if isinstance(disks, list) else []:
        if isinstance(disk, dict):
            bus = disk.get("bus", "scsi")
            counts[bus] = counts.get(bus, 0) + 1
    for bus, count in sorted(counts.items()):
        if count > _BUS_LIMITS.get(bus, count):
            more.append(("disks", "%d disks on the %s bus; Proxmox has %d slots there"
                         % (count, bus, _BUS_LIMITS[bus])))
    return more


def _clone_errors(spec):
    if "clone" in spec and "template" not in spec:
        return [("clone", "says what a clone of template is made of; set template, or remove "
                 "clone")]
    if spec.get("clone") == "overlay" and (spec.get("datastore") or
                                           (spec.get("placement") or {}).get("datastore")):
        return [("clone", "a linked clone (overlay) keeps its disks on the template's storage, "
                 "so placement.datastore cannot move them: use clone: copy, or remove "
                 "placement.datastore (disks[].storage places added disks)")]
    return []


def validate_spec(spec):
    """Return the spec without unset keys and with defaults; InvalidSpec lists every bad field,
    NotSupported names a field this provider cannot honour."""
    if not isinstance(spec, dict):
        raise InvalidSpec("the VM spec must be a dict, not %s" % type(spec).__name__)
    spec = _unset(spec)
    check_spec(spec_schema("template" in spec), spec, _MESSAGES,
               _bus_counts(spec.get("disks")) + _clone_errors(spec))
    for key, why in sorted(_UNSUPPORTED.items()):
        if spec.get(key):
            raise NotSupported("proxmox provider does not support %s: %s" % (key, why))
    if "cloud_init" in spec:
        cloud_init_parameters(spec["cloud_init"], len(spec.get("interfaces") or []) or 1)
    spec["metadata"] = dict((k, metadata_value(v)) for k, v in (spec.get("metadata") or {}).items())
    spec["tags"] = sorted(set(spec.get("tags") or []))
    return spec


def placement_request(spec):
    """(node or None, storage or None, pool or None) of a validated spec, its older keys
    ``hypervisor`` and ``datastore`` merged in; InvalidSpec when one contradicts placement."""
    wanted = dict(spec.get("placement") or {})
    for old, key in (("hypervisor", "host"), ("datastore", "datastore")):
        if spec.get(old) is None:
            continue
        if wanted.get(key, spec[old]) != spec[old]:
            raise field_error("placement." + key, "%r contradicts %s %r; give one of them"
                              % (wanted[key], old, spec[old]))
        wanted[key] = spec[old]
    return wanted.get("host"), wanted.get("datastore"), wanted.get("resource_pool")


def _disk_value(disk, storage):
    return "%s:%d" % (disk.get("storage") or storage, disk["size_gb"])


def _nic_value(nic, bridge):
    value = "%s%s,bridge=%s" % (nic.get("model", "virtio"),
                                "=" + nic["mac"].upper() if nic.get("mac") else "",
                                nic.get("bridge") or bridge)
    if nic.get("vlan"):
        value += ",tag=%d" % nic["vlan"]
    return value


def hardware_parameters(spec, storage, bridge, first_slots=None):
    """PVE parameters of the spec's vcpus, memory, disks and NICs. Disks take the next free
    slot of their bus after ``first_slots`` ({bus: next index}, for a clone's added disks)."""
    params = {}
    if "vcpus" in spec:
        params.update(cores=spec["vcpus"], sockets=1)
    if "memory_mb" in spec:
        params["memory"] = spec["memory_mb"]
    slots = dict(first_slots or {})
    for disk in spec.get("disks") or []:
        bus = disk.get("bus", "scsi")
        index = slots.get(bus, 0)
        params["%s%d" % (bus, index)] = _disk_value(disk, storage)
        slots[bus] = index + 1
    for index, nic in enumerate(spec.get("interfaces") or []):
        params["net%d" % index] = _nic_value(nic, bridge)
    return params


def create_parameters(spec, vmid, storage, bridge, pool=None):
    """The parameters of PVE's create request for a validated spec (not a clone)."""
    params = dict(vmid=vmid, name=spec["name"], ostype="l26", scsihw="virtio-scsi-single",
                  agent="1", **hardware_parameters(spec, storage, bridge))
    params.update(labels(spec))
    if pool:
        params["pool"] = pool
    if "cloud_init" in spec:
        params.update(cloud_init_parameters(spec["cloud_init"], len(spec.get("interfaces") or [])))
        params["ide2"] = "%s:cloudinit" % storage
    return params


def labels(spec, description=""):
    """PVE parameters of the spec's tags, metadata and autostart."""
    params = {}
    if spec.get("tags"):
        params["tags"] = join_tags(spec["tags"])
    if spec.get("metadata"):
        params["description"] = with_metadata(description, spec["metadata"])
    if "autostart" in spec:
        params["onboot"] = 1 if spec["autostart"] else 0
    return params


# -- Proxmox's own cloud-init -----------------------------------------------------------------
_USER_KEYS = ("name", "ssh_authorized_keys", "plain_text_passwd", "lock_passwd", "sudo", "shell",
              "groups")


def _yaml(text, path):
    import yaml  # only a cloud_init given as text needs it

    try:
        found = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise field_error(path, "is not valid YAML (%s)"
                          % getattr(exc, "problem", "syntax")) from None
    if not isinstance(found, dict):
        raise field_error(path, "must be a cloud-config document (a mapping)")
    return found


def _user_parameters(data):
    params, errors, keys = {}, [], []
    users = data.get("users")
    user = None
    if isinstance(users, list) and users:
        if len(users) > 1:
            errors.append(("cloud_init.user_data.users", "Proxmox's cloud-init makes one user; "
                           "give one"))
        user = users[0] if isinstance(users[0], dict) else {"name": users[0]}
    elif users is not None:
        errors.append(("cloud_init.user_data.users", "must be a list of one user"))
    user = user or {}
    for key in sorted(set(user) - set(_USER_KEYS)):
        errors.append(("cloud_init.user_data.users[0].%s" % key, "Proxmox's own cloud-init "
                       "cannot set it; remove it"))
    if user.get("name"):
        params["ciuser"] = str(user["name"])
    keys.extend(user.get("ssh_authorized_keys") or [])
    keys.extend(data.get("ssh_authorized_keys") or [])
    if keys:
        params["sshkeys"] = quote("\n".join(map(str, keys)) + "\n", safe="")
    password = user.get("plain_text_passwd") or data.get("password")
    if password:
        params["cipassword"] = str(password)
    return params, errors


def _network_parameters(config, nics):
    if isinstance(config, str):
        config = _yaml(config, "cloud_init.network_config")
    if config.get("version") != 2 or not isinstance(config.get("ethernets"), dict):
        raise field_error("cloud_init.network_config", "Proxmox's cloud-init takes a version 2 "
                          "network config with ethernets (one per interface, in order)")
    params, errors = {}, []
    ethernets = list(config["ethernets"].items())
    if len(ethernets) > max(nics, 1):
        errors.append(("cloud_init.network_config.ethernets", "%d entries for %d interfaces"
                       % (len(ethernets), nics)))
    servers = set()
    for index, (name, eth) in enumerate(ethernets):
        path = "cloud_init.network_config.ethernets.%s" % name
        eth = eth or {}
        parts = []
        v4 = [a for a in eth.get("addresses") or [] if ":" not in str(a)]
        v6 = [a for a in eth.get("addresses") or [] if ":" in str(a)]
        if eth.get("dhcp4"):
            parts.append("ip=dhcp")
        elif v4:
            parts.append("ip=%s" % v4[0])
        if eth.get("gateway4"):
            parts.append("gw=%s" % eth["gateway4"])
        if eth.get("dhcp6"):
            parts.append("ip6=dhcp")
        elif v6:
            parts.append("ip6=%s" % v6[0])
        if eth.get("gateway6"):
            parts.append("gw6=%s" % eth["gateway6"])
        if len(v4) > 1 or len(v6) > 1:
            errors.append((path + ".addresses", "Proxmox's cloud-init sets one IPv4 and one "
                           "IPv6 address per interface"))
        known = {"dhcp4", "dhcp6", "addresses", "gateway4", "gateway6", "nameservers", "match",
                 "set-name"}
        for key in sorted(set(eth) - known):
            errors.append(("%s.%s" % (path, key), "Proxmox's own cloud-init cannot set it"))
        servers.update(map(str, (eth.get("nameservers") or {}).get("addresses") or []))
        if parts:
            params["ipconfig%d" % index] = ",".join(parts)
    if servers:
        params["nameserver"] = " ".join(sorted(servers))
    return params, errors


def cloud_init_parameters(cloud_init, nics):
    """PVE's cloud-init parameters (ciuser, cipassword, sshkeys, ipconfigN, nameserver) of the
    spec's ``cloud_init``; InvalidSpec naming each part Proxmox's own cloud-init cannot take."""
    params, errors = {}, []
    data = cloud_init.get("user_data") or {}
    if isinstance(data, str):
        data = _yaml(data, "cloud_init.user_data")
    for key in sorted(set(data) - {"users", "ssh_authorized_keys", "password", "chpasswd"}):
        errors.append(("cloud_init.user_data.%s" % key, "Proxmox's own cloud-init sets only the "
                       "user, its password and its SSH keys; remove %s (or bake it into the "
                       "template)" % key))
    found, more = _user_parameters(data)
    params.update(found)
    errors.extend(more)
    if cloud_init.get("meta_data"):
        errors.append(("cloud_init.meta_data", "Proxmox writes the meta-data itself (the VM's "
                       "name is its host name); remove meta_data"))
    if cloud_init.get("network_config"):
        found, more = _network_parameters(cloud_init["network_config"], nics)
        params.update(found)
        errors.extend(more)
    if errors:
        raise field_errors([{"path": p, "message": m} for p, m in errors], "invalid VM spec")
    return params
