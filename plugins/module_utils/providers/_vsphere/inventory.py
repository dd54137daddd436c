"""Read the vSphere inventory in few round trips, and turn it into the contract's dicts.

One PropertyCollector call fetches chosen properties of every object in a container view
(or of given objects), instead of one SOAP call per attribute as attribute access does.
pyVmomi is imported inside the functions that need it.
"""
__all__ = ("VM_PATHS", "HOST_PATHS", "COMPUTE_PATHS", "retrieve", "retrieve_view", "vm_fields",
           "datastore_of",
           "host_fields", "host_state", "power_state", "custom_values", "guest_addresses",
           "guest_info")

VM_PATHS = ("name", "config.instanceUuid", "config.hardware.numCPU", "config.hardware.memoryMB",
            "config.hardware.device", "runtime.powerState", "runtime.host", "customValue",
            "guest.ipAddress", "guest.net", "guest.toolsRunningStatus", "guest.guestFullName",
            "guest.hostName", "parent", "resourcePool", "config.files.vmPathName")
TOOLS_RUNNING = "guestToolsRunning"
HOST_PATHS = ("name", "parent", "summary.hardware.numCpuCores", "summary.hardware.memorySize",
              "summary.hardware.cpuMhz", "summary.quickStats.overallCpuUsage",
              "summary.quickStats.overallMemoryUsage", "runtime.connectionState",
              "runtime.inMaintenanceMode", "customValue", "datastore", "network", "vm")
COMPUTE_PATHS = ("name", "resourcePool")

_POWER = {"poweredOn": "running", "poweredOff": "stopped", "suspended": "suspended"}
_NIC_MODELS = {"VirtualVmxnet3": "vmxnet3", "VirtualE1000": "e1000", "VirtualE1000e": "e1000e",
               "VirtualVmxnet2": "vmxnet2", "VirtualPCNet32": "pcnet32", "VirtualSriovEthernetCard":
               "sriov"}
_MIB = 1024 * 1024


def _results(collector, result):
    """Every object of a RetrievePropertiesEx result, following continuation pages."""
    out = []
    while result is not None:
        for obj in result.objects:
            out.append((obj.obj, dict((prop.name, prop.val) for prop in obj.propSet or [])))
        token = result.token
        result = collector.ContinueRetrievePropertiesEx(token) if token else None
    return out


def _prop_specs(pc, paths_by_type):
    return [pc.PropertySpec(type=kind, pathSet=list(paths))
            for kind, paths in paths_by_type.items()]


def retrieve(content, objects, paths_by_type):
    """[(moref, {path: value})] for ``objects`` (managed objects), in one query.

    ``paths_by_type`` maps a pyVmomi managed type to the property paths wanted; unset
    properties are missing from the dict.
    """
    from pyVmomi import vmodl

    pc = vmodl.query.PropertyCollector
    objects = list(objects)
    if not objects:
        return []
    spec = pc.FilterSpec(
        objectSet=[pc.ObjectSpec(obj=obj, skip=False) for obj in objects],
        propSet=_prop_specs(pc, paths_by_type))
    collector = content.propertyCollector
    return _results(collector, collector.RetrievePropertiesEx([spec], pc.RetrieveOptions()))


def retrieve_view(content, view, paths_by_type, ancestors=False):
    """Like :func:`retrieve`, for every object of a ContainerView. With ``ancestors``, the same
    query also returns the ancestors (by ``parent``, up to the root folder) of those objects and
    of the ``resourcePool`` of VMs among them, with the paths ``paths_by_type`` gives their
    types."""
    from pyVmomi import vim, vmodl

    pc = vmodl.query.PropertyCollector
    select = []
    if ancestors:
        up = [pc.SelectionSpec(name="up")]
        select = [pc.TraversalSpec(name="up", path="parent", skip=False, type=vim.ManagedEntity,
                                   selectSet=up),
                  pc.TraversalSpec(path="resourcePool", skip=False, type=vim.VirtualMachine,
                                   selectSet=up)]
    traverse = pc.TraversalSpec(name="view", path="view", skip=False, type=vim.view.ContainerView,
                                selectSet=select)
    spec = pc.FilterSpec(
        objectSet=[pc.ObjectSpec(obj=view, skip=True, selectSet=[traverse])],
        propSet=_prop_specs(pc, paths_by_type))
    collector = content.propertyCollector
    return _results(collector, collector.RetrievePropertiesEx([spec], pc.RetrieveOptions()))


def power_state(value):
    """Contract state of a vSphere power state."""
    return _POWER.get(str(value), "unknown")


def custom_values(props, field_names):
    """{attribute name: value} of an entity's custom attributes; an empty value is no value
    (clearing an attribute sets it empty)."""
    out = {}
    for item in props.get("customValue") or []:
        name = field_names.get(item.key)
        if name is not None:
            out[name] = getattr(item, "value", "")
    return dict((name, value) for name, value in out.items() if value)


def datastore_of(file_name):
    """``[ds1] vm/vm.vmdk`` -> ``ds1``."""
    if file_name and file_name.startswith("[") and "]" in file_name:
        return file_name[1:file_name.index("]")]
    return None


def _disk(device):
    backing = device.backing
    file_name = getattr(backing, "fileName", None)
    return {"name": device.deviceInfo.label if device.deviceInfo else None,
            "size_gb": round((device.capacityInKB or 0) / float(_MIB), 3),
            "datastore": datastore_of(file_name), "file": file_name,
            "thin": bool(getattr(backing, "thinProvisioned", False))}


def _nic(device, portgroups, reported):
    backing = device.backing
    network = getattr(backing, "deviceName", None)
    port = getattr(backing, "port", None)
    if network is None and port is not None:
        network = portgroups.get(port.portgroupKey, port.portgroupKey)
    model = type(device).__name__.rsplit(".", 1)[-1]
    connectable = device.connectable
    addresses = reported.get((device.macAddress or "").lower(), [])
    return {"name": device.deviceInfo.label if device.deviceInfo else None,
            "mac": device.macAddress, "network": network, "model": _NIC_MODELS.get(model, model),
            "connected": bool(connectable.connected) if connectable else None,
            "addresses": addresses, "address_source": "tools" if addresses else None}


def _addresses_by_mac(props):
    """{lower-case MAC: [IP addresses]} as VMware Tools report them per NIC."""
    out = {}
    for nic in props.get("guest.net") or []:
        if nic.macAddress:
            out.setdefault(nic.macAddress.lower(), []).extend(
                ip for ip in nic.ipAddress or [] if ip)
    return out


def guest_addresses(props):
    """The guest's IP addresses that VMware Tools report: the primary one first, then those of
    each NIC in order, each once (none without Tools)."""
    found = []
    for address in [props.get("guest.ipAddress")] + [
            ip for nic in props.get("guest.net") or [] for ip in (nic.ipAddress or [])]:
        if address and address not in found:
            found.append(address)
    return found


def guest_info(props):
    """The contract's ``guest`` dict from what VMware Tools report (the Tools are the agent)."""
    state = props.get("guest.toolsRunningStatus") or None
    return {"agent": state == TOOLS_RUNNING, "agent_state": state,
            "os": props.get("guest.guestFullName") or None,
            "hostname": props.get("guest.hostName") or None}


def vm_fields(props, hosts, field_names, portgroups):
    """Contract VM fields from VM_PATHS properties.

    ``hosts`` maps a host moId to (name, az, cluster); ``field_names`` custom field key -> name;
    ``portgroups`` distributed port group key -> name.
    """
    from pyVmomi import vim

    disks, nics, reported = [], [], _addresses_by_mac(props)
    for device in props.get("config.hardware.device") or []:
        if isinstance(device, vim.vm.device.VirtualDisk):
            disks.append(_disk(device))
        elif isinstance(device, vim.vm.device.VirtualEthernetCard):
            nics.append(_nic(device, portgroups, reported))
    host = props.get("runtime.host")
    name, az, _cluster = hosts.get(host._moId, (None,) * 3) if host is not None else (None,) * 3
    fields = {"uuid": props.get("config.instanceUuid"), "hypervisor": name,
              "state": power_state(props.get("runtime.powerState")),
              "vcpus": props.get("config.hardware.numCPU"),
              "memory_mb": props.get("config.hardware.memoryMB"), "disks": disks,
              "interfaces": nics, "addresses": guest_addresses(props),
              "guest": guest_info(props), "metadata": custom_values(props, field_names)}
    if az is not None:
        fields["az"] = az
    return fields


def host_state(props):
    """connected, maintenance or disconnected."""
    if str(props.get("runtime.connectionState")) != "connected":
        return "disconnected"
    return "maintenance" if props.get("runtime.inMaintenanceMode") else "connected"


def host_fields(props, az, traits):
    """Contract hypervisor dict from HOST_PATHS properties.

    ``used_cpu`` is the host's CPU usage (MHz) divided by the clock of one core: the number of
    fully busy cores it amounts to, rounded to 0.01.
    """
    mhz = props.get("summary.hardware.cpuMhz") or 0
    used_mhz = props.get("summary.quickStats.overallCpuUsage") or 0
    return {"name": props.get("name"), "az": az,
            "cpu": props.get("summary.hardware.numCpuCores"),
            "memory_mb": (props.get("summary.hardware.memorySize") or 0) // _MIB,
            "used_cpu": round(used_mhz / float(mhz), 2) if mhz else None,
            "used_memory_mb": props.get("summary.quickStats.overallMemoryUsage"),
            "state": host_state(props), "traits": traits, "vm_count": len(props.get("vm") or [])}
