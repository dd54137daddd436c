"""``recover``: the VM of a host vCenter does not reach (failed, and fenced by the caller) started
on another host of the same vCenter, the way an administrator does it without vSphere HA: the
stale VM object is removed from the inventory (UnregisterVM), its ``.vmx`` registered on the
target host (Folder.RegisterVM_Task: the host's cluster root resource pool, the VM's own
folder), and the VM powered on.

Everything the move needs is checked before anything changes: the VM's host does not answer,
the target host is connected and out of maintenance mode, and it sees every datastore the VM's
files are on. A run that stopped between the steps is finished by the next one: with no VM of
that name in the inventory, its ``.vmx`` is found by the name on the datastores the target host
sees (the datastore browser), as vCenter names a VM's folder and configuration file after the
VM; a copy is registered only when no VM of that name is. Why this way: docs/ha.md.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    datastore_of, host_state, retrieve)

__all__ = ("recover",)

VM_PATHS = ("runtime.host", "config.files.vmPathName", "datastore", "parent")
HOST_PATHS = ("name", "runtime.connectionState")


def recover(provider, name, hypervisor):
    """Start VM ``name`` of a failed host on host ``hypervisor``; its VM dict, ``changed`` False
    when it already ran there."""
    session = provider.session()
    target = _target(session, provider.key, hypervisor)
    if name.startswith("/"):  # an inventory path
        try:
            refs = [session.find_vm(name)]
        except NotFound:
            refs = []
        name = name.rsplit("/", 1)[-1]
    else:
        refs = session.vm_refs(name)
    if len(refs) > 1:
        raise Conflict("%d VMs are named %r on %s; recover one by hand, or rename the others"
                       % (len(refs), name, provider.key))
    if not refs:
        ref = _register(session, target, name, _unregistered_vmx(session, target, name), None)
        return _started(session, ref, name, True)
    props = _props(session, refs[0], name)
    host = _host_of(session, props)
    if host.get("name") == hypervisor and str(host.get("runtime.connectionState")) == "connected":
        return _started(session, refs[0], name, False)  # registered there by an earlier run
    if str(host.get("runtime.connectionState")) == "connected":
        raise Conflict("VM %r of %s is on host %s, which vCenter reaches: recover is for the VMs of "
                       "a failed host; move it with migrate (resilient.virt.vm_migrate) instead"
                       % (name, provider.key, host.get("name")))
    path = props.get("config.files.vmPathName")
    _check_datastores(session, target, name, props, path)
    folder = props.get("parent")
    _unregister(session, refs[0], name, host.get("name"))
    ref = _register(session, target, name, path, folder)
    return _started(session, ref, name, True)


def _target(session, key, hypervisor):
    """The host record of ``hypervisor``: connected and out of maintenance mode."""
    found = [record for record in session.host_records() if record[1].get("name") == hypervisor]
    if not found:
        raise field_error("hypervisor", "no host named %r on %s" % (hypervisor, key))
    state = host_state(found[0][1])
    if state != "connected":
        raise Conflict("host %s on %s is %s, so no VM can be recovered onto it; choose a connected "
                       "host outside maintenance mode" % (hypervisor, key, state))
    return found[0]


def _props(session, ref, name):
    from pyVmomi import vim

    found = retrieve(session.content, [ref], {vim.VirtualMachine: VM_PATHS})
    if not found:
        raise NotFound("VM %r not found on %s" % (name, session.provider.key))
    return found[0][1]


def _host_of(session, props):
    from pyVmomi import vim

    ref = props.get("runtime.host")
    found = retrieve(session.content, [ref], {vim.HostSystem: HOST_PATHS}) if ref else []
    return found[0][1] if found else {}


def _datastores(session, host_props):
    """{name: Datastore ref} of the datastores host ``host_props`` has accessible."""
    from pyVmomi import vim

    found = retrieve(session.content, host_props.get("datastore") or [],
                     {vim.Datastore: ["summary.name", "summary.accessible"]})
    return dict((props.get("summary.name"), ref) for ref, props in found
                if props.get("summary.accessible"))


def _check_datastores(session, target, name, props, path):
    """Conflict naming the first datastore of the VM's files the target host does not see."""
    from pyVmomi import vim

    if not path:
        raise Conflict("vCenter knows no configuration file of VM %r on %s, so it cannot be "
                       "registered again; register its .vmx by hand" % (name, session.provider.key))
    names = [datastore_of(path)]
    names += [p.get("name") for _r, p in retrieve(session.content, props.get("datastore") or [],
                                                  {vim.Datastore: ["name"]})]
    seen = _datastores(session, target[1])
    for wanted in names:
        if wanted and wanted not in seen:
            raise Conflict("host %s does not see datastore %s, where files of VM %r are (%s); "
                           "recover it onto a host that mounts %s" % (
                               target[1]["name"], wanted, name, path, wanted))


def _unregister(session, ref, name, host):
    from pyVmomi import vim

    try:
        ref.UnregisterVM()
    except vim.fault.InvalidState as err:
        raise Conflict("vCenter refused to remove VM %r of host %s from its inventory (%s); "
                       "remove host %s from the vCenter inventory (its VMs' files stay on their "
                       "datastores) and run again: the next run registers the VM from its .vmx"
                       % (name, host, type(err).__name__, host), cause=err) from err


def _unregistered_vmx(session, target, name):
    """The one ``<name>.vmx`` on the datastores the target host sees that no VM is registered
    from: a run that stopped after unregistering left it."""
    from pyVmomi import vim

    found = []
    for store, ref in sorted(_datastores(session, target[1]).items()):
        spec = vim.host.DatastoreBrowser.SearchSpec(matchPattern=[name + ".vmx"])
        task = ref.browser.SearchDatastoreSubFolders_Task(datastorePath="[%s]" % store,
                                                          searchSpec=spec)
        for result in session.wait(task, "searching datastore %s for %s.vmx" % (store, name)) or []:
            found += [_datastore_path(result.folderPath, item.path) for item in result.file or []]
    datacenter = session.tree(fresh=True).up(target[1]["compute"][0], "Datacenter")[0]
    free = [path for path in found if session.content.searchIndex.FindByDatastorePath(
        datacenter=datacenter, path=path) is None]
    if not free:
        raise NotFound("no VM named %r on %s, and no %s.vmx that no VM is registered from on the "
                       "datastores host %s sees; if its files have another name (a VM renamed "
                       "after it was made), register its .vmx by hand"
                       % (name, session.provider.key, name, target[1]["name"]))
    if len(free) > 1:
        raise Conflict("several unregistered configuration files are named %s.vmx (%s); register "
                       "the one of VM %r by hand" % (name, ", ".join(free), name))
    return free[0]


def _datastore_path(folder, file_name):
    """``[ds] dir/name.vmx`` from a search result's folder (``[ds] dir/``, or ``[ds]/dir`` as
    the simulator writes it) and file name."""
    store, rest = folder.split("]", 1)
    rest = rest.strip(" /")
    return "%s] %s" % (store, "%s/%s" % (rest, file_name) if rest else file_name)


def _register(session, target, name, path, folder):
    """Register ``path`` as VM ``name`` on the target host, in ``folder`` (None: its datacenter's
    VM folder, with a warning)."""
    host_ref, props = target[0], target[1]
    compute = props["compute"]
    if folder is None:
        tree = session.tree(fresh=True)
        datacenter = tree.up(compute[0], "Datacenter")
        folder = datacenter[1]["vmFolder"]
        session.provider.warnings.append(
            "VM %r was registered from %s in the VM folder of datacenter %s: the run that removed "
            "it from the inventory stopped before registering it, and its folder was not kept; "
            "move it with placement.folder" % (name, path, datacenter[1].get("name")))
    task = folder.RegisterVM_Task(path=path, name=name, asTemplate=False,
                                  pool=compute[1]["resourcePool"], host=host_ref)
    return session.wait(task, "registering VM %r on host %s" % (name, props["name"]))


def _started(session, ref, name, changed):
    if session.power_state(ref) != "poweredOn":
        session.wait(ref.PowerOnVM_Task(), "powering on VM %r" % name)
        changed = True
    return dict(session.describe(ref, name), changed=changed)
