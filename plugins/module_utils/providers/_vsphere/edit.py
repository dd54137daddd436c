"""Changes to an existing vSphere VM: the hardware in one ReconfigVM_Task, custom attributes,
tags, then where it is (RelocateVM_Task, MoveIntoFolder_Task); ``migrate`` is such a move to
another host. The rules of what may change are ``providers/_reconfigure.py``'s; the device
specs are ``spec.py``'s. ``create.py`` gives a clone its hardware and labels with these too.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, NotSupported, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    differences, list_changes)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    VM_PATHS, datastore_of, retrieve)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.location import (
    KEYS as PLACEMENT_KEYS)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
    device_changes, validate_changes)

__all__ = ("HARDWARE", "backing_resolver", "change", "device_specs", "labels", "migrate",
           "reconfigure", "relocate")

HOT_PLUG_PATHS = ("config.cpuHotAddEnabled", "config.cpuHotRemoveEnabled",
                  "config.memoryHotAddEnabled")
HARDWARE = ("vcpus", "memory_mb", "disks", "interfaces")  # changed by ReconfigVM_Task


def reconfigure(provider, name, vcpus=None, memory_mb=None, metadata=None, tags=None,
                disks=None, interfaces=None, autostart=None, placement=None):
    """Change what differs (``_reconfigure`` rules): the hardware in one ReconfigVM_Task,
    then custom attributes, then tags, then where the VM is (``relocate``). vSphere keeps
    no configuration for the next start, so a running VM is refused what it cannot take
    live (vCPUs or memory without hot plug): Conflict, and nothing is changed. A removed
    disk's file is kept, with a warning. ``changed`` is False when nothing had to change
    (placement given in another form than VM dicts show, naming where the VM already is)."""
    if autostart is not None:
        raise NotSupported("vsphere provider cannot change autostart (a host setting of "
                           "ESXi that vSphere HA clusters ignore); remove autostart")
    wanted = validate_changes(dict(vcpus=vcpus, memory_mb=memory_mb, metadata=metadata,
                                   tags=tags, disks=disks, interfaces=interfaces,
                                   placement=placement))
    session = provider.session()
    return change(session, session.find_vm(name), name, wanted)


def change(session, ref, name, wanted):
    """Give VM ``ref`` the ``wanted`` fields (checked) where they differ; its VM dict."""
    from pyVmomi import vim

    found = retrieve(session.content, [ref], {vim.VirtualMachine: VM_PATHS + HOT_PLUG_PATHS})
    if not found:
        raise NotFound("VM %r not found on %s" % (name, session.provider.key))
    props = found[0][1]
    current = session.vm_dicts(found)[0]
    plan = differences(current, wanted)
    if not plan:
        return dict(current, changed=False)
    tagger = session.require_tags() if "tags" in plan else None
    hardware = [field for field in HARDWARE if field in plan]
    if hardware:
        _check_power_for(name, props, current, plan, hardware)
        changes, kept = device_specs(session, props["runtime.host"], props, current, plan)
        config = vim.vm.ConfigSpec(deviceChange=changes, numCPUs=plan.get("vcpus"),
                                   memoryMB=plan.get("memory_mb"))
        session.wait(ref.ReconfigVM_Task(spec=config), "reconfiguring VM %r" % name)
        for label, file_name in kept:
            session.provider.warnings.append(
                "%s was removed from VM %r; its file %s is kept (delete it with the datastore "
                "browser once it is no longer needed)" % (label, name, file_name))
    labels(session, ref, current["metadata"], plan.get("metadata"),
           plan.get("tags") if tagger else None)
    moved = "placement" in plan and relocate(
        session, ref, name, props, plan["placement"],
        dict((key, "placement." + key) for key in PLACEMENT_KEYS))
    vm = session.describe(ref, name)
    if set(plan) == {"placement"} and not moved:
        vm["changed"] = False
    return vm


def labels(session, ref, have, metadata, tags):
    """Store the ``metadata`` values that differ from ``have``, then exactly ``tags`` (None:
    leave the tags)."""
    if metadata:
        _set_metadata(session, ref, dict(
            (key, value) for key, value in metadata.items() if have.get(key) != value))
    if tags is not None:
        session.require_tags().set_tags(ref._moId, tags)


def device_specs(session, host, props, current, plan):
    """(device specs, kept disk files) doing the disks and interfaces of ``plan`` on the
    devices of ``props``, networks looked up on ``host``; InvalidSpec names a bad field."""
    from pyVmomi import vim

    changes, kept, backing_for = [], [], None
    for field in ("disks", "interfaces"):
        if field not in plan:
            continue
        steps = list_changes(field, current[field], plan[field])
        if field == "interfaces" and (steps["add"] or steps["update"]):
            host_props = retrieve(session.content, [host],
                                  {vim.HostSystem: ["name", "network"]})[0][1]
            backing_for = backing_resolver(session, host_props)
        specs, files = device_changes(field, steps, props["config.hardware.device"],
                                      backing_for)
        changes += specs
        kept += files
    return changes, kept


def relocate(session, ref, name, props, wanted, paths):
    """Move VM ``ref`` where ``wanted`` (placement keys) says: RelocateVM_Task for its host,
    resource pool and datastore (vMotion, storage vMotion), MoveIntoFolder_Task for its
    folder; only what differs. True when it moved."""
    from pyVmomi import vim

    current = {"host": props.get("runtime.host"), "pool": props.get("resourcePool"),
               "folder": props.get("parent"),
               "datastore": datastore_of(props.get("config.files.vmPathName"))}
    target = session.placer().resolve(wanted, paths, current)
    spec = vim.vm.RelocateSpec()
    if target["host"][0] != current["host"]:
        spec.host = target["host"][0]
    if target["pool"] != current["pool"]:
        spec.pool = target["pool"]
    if target["datastore"][0] != current["datastore"]:
        spec.datastore = target["datastore"][1]
    moved = bool(spec.host or spec.pool or spec.datastore)
    if moved:
        session.wait(ref.RelocateVM_Task(spec=spec), "moving VM %r to host %r" % (
            name, target["host"][1]["name"]))
    if target["folder"] != current["folder"]:
        session.wait(target["folder"].MoveIntoFolder_Task([ref]),
                     "moving VM %r into another folder" % name)
        moved = True
    return moved


def _check_power_for(name, props, current, plan, hardware):
    """Conflict unless the VM can take the hardware changes of ``plan`` in its power state:
    anything when off; when running, devices, and vCPUs and memory only as far as hot plug
    allows (vCenter refuses the rest); nothing when suspended."""
    state = str(props.get("runtime.powerState"))
    if state == "poweredOff":
        return
    if state == "suspended":
        raise Conflict("VM %r is suspended and vSphere changes no hardware of a suspended VM "
                       "(%s); power it off first" % (name, ", ".join(hardware)))
    refused = []
    if "vcpus" in plan:
        more = plan["vcpus"] > current["vcpus"]
        if not props.get("config.cpuHotAddEnabled" if more else "config.cpuHotRemoveEnabled"):
            refused.append("vcpus (CPU hot %s is off)" % ("add" if more else "remove"))
    if "memory_mb" in plan:
        if plan["memory_mb"] < current["memory_mb"]:
            refused.append("memory_mb (memory cannot shrink while the VM runs)")
        elif not props.get("config.memoryHotAddEnabled"):
            refused.append("memory_mb (memory hot add is off)")
    if refused:
        raise Conflict("VM %r is running and vSphere cannot change %s while it runs; power "
                       "it off first (vSphere keeps no changes for the next start), or enable "
                       "hot plug on the VM" % (name, " or ".join(refused)))


def migrate(provider, name, hypervisor, resource_pool=None, datastore=None):
    """Move VM ``name`` to host ``hypervisor`` (vMotion when running), into ``resource_pool``
    and onto ``datastore`` (storage vMotion) when given, else keeping its storage, and its
    resource pool when the host is in the same cluster; ``changed`` False when it was there."""
    from pyVmomi import vim

    session = provider.session()
    ref = session.find_vm(name)
    found = retrieve(session.content, [ref], {vim.VirtualMachine: VM_PATHS})
    if not found:
        raise NotFound("VM %r not found on %s" % (name, provider.key))
    _refuse_lost_host(session, provider.key, name, found[0][1].get("runtime.host"), hypervisor)
    paths = dict((key, "placement." + key) for key in PLACEMENT_KEYS)
    wanted = {"host": hypervisor, "resource_pool": resource_pool, "datastore": datastore}
    moved = relocate(session, ref, name, found[0][1], wanted,
                     dict(paths, host="hypervisor", resource_pool="resource_pool",
                          datastore="datastore"))
    return dict(session.describe(ref, name), changed=moved)


def _refuse_lost_host(session, key, name, host_ref, target):
    """NotSupported when VM ``name`` is on a host vCenter does not reach (a move off it is
    refused by vCenter; ``recover`` registers it again on another host)."""
    from pyVmomi import vim

    if host_ref is None:
        return
    [(_ref, host)] = retrieve(session.content, [host_ref],
                              {vim.HostSystem: ["name", "runtime.connectionState"]})
    state = str(host.get("runtime.connectionState"))
    if state != "connected" and host.get("name") != target:
        raise NotSupported("VM %r of %s is on host %s, which vCenter reports %s: vCenter moves no "
                           "VM off a host it does not reach; such a VM is recovered by registering "
                           "it again from its datastore on another host: fence the host, then "
                           "evacuate it (resilient.virt.failover_reservation state=evacuated), "
                           "which does that" % (name, key, host.get("name"), state))


def backing_resolver(session, props):
    """backing_for(network name, path) over the port groups the host can reach."""
    from pyVmomi import vim

    found = retrieve(session.content, props.get("network") or [], {vim.Network: ["name"]})
    networks = dict((p.get("name"), ref) for ref, p in found)
    host = props["name"]

    def backing_for(name, path):
        ref = networks.get(name)
        if ref is None:
            raise field_error(path, "no network named %r on host %r (networks: %s)"
                              % (name, host, ", ".join(sorted(networks))))
        nic = vim.vm.device.VirtualEthernetCard
        if isinstance(ref, vim.dvs.DistributedVirtualPortgroup):
            port = vim.dvs.PortConnection(portgroupKey=ref.key,
                                          switchUuid=ref.config.distributedVirtualSwitch.uuid)
            return nic.DistributedVirtualPortBackingInfo(port=port)
        if isinstance(ref, vim.OpaqueNetwork):
            return nic.OpaqueNetworkBackingInfo(opaqueNetworkId=ref.summary.opaqueNetworkId,
                                                opaqueNetworkType=ref.summary.opaqueNetworkType)
        return nic.NetworkBackingInfo(deviceName=name, network=ref)
    return backing_for


def _set_metadata(session, ref, metadata):
    """Store metadata as custom attributes, defining the missing ones for VMs; a None value
    clears the attribute on this VM (vSphere then shows it empty: no value)."""
    from pyVmomi import vim

    manager = session.content.customFieldsManager
    keys = dict((f.name, f.key) for f in manager.field or []
                if f.managedObjectType in (None, vim.VirtualMachine))
    for name, value in sorted(metadata.items()):
        if value is None and name not in keys:
            continue
        if name not in keys:
            keys[name] = _define_field(manager, name)
        manager.SetField(entity=ref, key=keys[name], value=value or "")
    session.forget_field_names()


def _define_field(manager, name):
    """Key of a new custom attribute ``name`` for VMs; one that another task defined since the
    fields were read (vSphere answers DuplicateName) is looked up instead."""
    from pyVmomi import vim

    try:
        return manager.AddCustomFieldDef(name=name, moType=vim.VirtualMachine).key
    except vim.fault.DuplicateName:
        for field in manager.field or []:
            if field.name == name and field.managedObjectType in (None, vim.VirtualMachine):
                return field.key
        raise
