"""A Proxmox VE VM as the contract's VM dict, from what PVE says about it: its entry of
``/cluster/resources``, its configuration with the pending changes (``/pending``) and, for a
running VM, ``status/current`` (paused or not) and the guest agent (``guest.py``).

Pure functions of PVE's answers, so they are unit-tested without a server. The VM's
``metadata`` lives in its description, on a line of its own that starts with
:data:`METADATA_PREFIX` and holds a JSON object; the rest of the description is the user's.
"""
import json
import re

__all__ = ("METADATA_PREFIX", "DRIVE_BUSES", "config_of", "disks_of", "interfaces_of", "tags_of",
           "metadata_of", "with_metadata", "state_of", "vcpus_of", "uuid_of", "split_props",
           "agent_enabled", "join_tags")

METADATA_PREFIX = "resilient.virt metadata: "
DRIVE_BUSES = ("scsi", "virtio", "sata", "ide")
_DRIVE = re.compile(r"^(scsi|virtio|sata|ide)(\d+)$")
_NIC = re.compile(r"^net(\d+)$")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGT]?)$")
_UNITS = {"": 1.0 / 1024 ** 3, "K": 1.0 / 1024 ** 2, "M": 1.0 / 1024, "G": 1.0, "T": 1024.0}
NIC_MODELS = ("virtio", "e1000", "e1000e", "rtl8139", "vmxnet3")


def split_props(value):
    """``virtio=BC:24:11:00:00:01,bridge=vmbr0`` -> (first bare or model item, {key: value})."""
    first, props = None, {}
    for index, part in enumerate(str(value).split(",")):
        key, sep, val = part.partition("=")
        if not sep and index == 0:
            first = key
        elif sep:
            props[key] = val
    return first, props


def config_of(pending):
    """(config, pending changes exist) from ``/pending``'s items ({key, value, pending,
    delete})."""
    config, waiting = {}, False
    for item in pending or []:
        if "value" in item:
            config[item["key"]] = item["value"]
        if "pending" in item or item.get("delete"):
            waiting = True
    return config, waiting


def _size_gb(text):
    found = _SIZE.match(text or "")
    if not found:
        return None
    gib = float(found.group(1)) * _UNITS[found.group(2)]
    return int(gib) if gib == int(gib) else round(gib, 3)


def _natural(key):
    found = re.match(r"^(\D+)(\d+)$", key)
    return (found.group(1), int(found.group(2))) if found else (key, 0)


def disks_of(config):
    """The VM's disks in device order (cdroms and the cloud-init drive left out): bus, slot
    (``scsi0``), storage, volume and size_gb."""
    disks = []
    for key in sorted(config, key=_natural):
        found = _DRIVE.match(key)
        if not found:
            continue
        first, props = split_props(config[key])
        volume = first or props.get("file") or ""
        if props.get("media") == "cdrom" or volume in ("none", "cdrom") or \
                volume.endswith("cloudinit") or "-cloudinit" in volume:
            continue
        storage = volume.split(":", 1)[0] if ":" in volume else None
        disks.append({"bus": found.group(1), "slot": key, "storage": storage, "volume": volume,
                      "size_gb": _size_gb(props.get("size"))})
    return disks


def interfaces_of(config):
    """The VM's NICs in order: slot (``net0``), model, mac, bridge, vlan (None untagged)."""
    nics = []
    for key in sorted((k for k in config if _NIC.match(k)), key=_natural):
        props = split_props("x," + str(config[key]))[1]
        model = next((m for m in props if m in NIC_MODELS), props.get("model"))
        mac = props.get(model) if model in props else props.get("macaddr")
        tag = props.get("tag")
        nics.append({"slot": key, "model": model, "mac": mac.lower() if mac else None,
                     "bridge": props.get("bridge"),
                     "vlan": int(tag) if tag and tag.isdigit() else None})
    return nics


def tags_of(text):
    """PVE's tags (``a;b``, also with commas or spaces) as a sorted list."""
    return sorted(set(t for t in re.split(r"[;, ]+", str(text or "")) if t))


def join_tags(tags):
    """The ``tags`` value of a list of tags."""
    return ";".join(sorted(set(tags)))


def metadata_of(description):
    """The metadata dict kept in a VM's description ({} when none)."""
    for line in str(description or "").splitlines():
        if line.startswith(METADATA_PREFIX):
            try:
                found = json.loads(line[len(METADATA_PREFIX):])
            except ValueError:
                return {}
            return found if isinstance(found, dict) else {}
    return {}


def with_metadata(description, metadata):
    """``description`` with its metadata line replaced by ``metadata`` (removed when empty);
    the user's lines are kept."""
    lines = [line for line in str(description or "").splitlines()
             if not line.startswith(METADATA_PREFIX)]
    if metadata:
        lines.append(METADATA_PREFIX + json.dumps(metadata, sort_keys=True, separators=(",", ":")))
    return "\n".join(lines)


def state_of(resource, current=None, lock=None):
    """running, paused, suspended (hibernated: stopped with the lock ``suspended``), stopped, or
    unknown (its node is offline)."""
    status = (current or resource).get("status")
    if status == "running":
        return "paused" if (current or {}).get("qmpstatus") in ("paused", "prelaunch") else "running"
    if status == "stopped":
        return "suspended" if lock == "suspended" else "stopped"
    return "unknown"


def vcpus_of(config):
    """The VM's vCPUs: ``vcpus`` when set, else cores x sockets."""
    if config.get("vcpus"):
        return int(config["vcpus"])
    return int(config.get("cores") or 1) * int(config.get("sockets") or 1)


def uuid_of(config):
    """The SMBIOS UUID of the VM (``smbios1: uuid=...``), None without one."""
    return split_props("x," + str(config.get("smbios1") or ""))[1].get("uuid")


def agent_enabled(config):
    """True when the VM's configuration enables the QEMU guest agent (``agent: 1`` or
    ``enabled=1,...``)."""
    first, props = split_props(config.get("agent") or "0")
    return (props.get("enabled") or first) in ("1", "true", "yes", "on")
