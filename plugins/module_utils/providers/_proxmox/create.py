"""Creating a Proxmox VE VM: a new one (``POST /nodes/<node>/qemu``) on the node ``placement``
names or the online node with the most free memory, or a clone of ``template`` (``POST
.../<vmid>/clone``) given the hardware, cloud-init and labels the spec asks for.

``clone`` chooses what a clone is: ``overlay``, linked (its disks are copy-on-write children of
the template's; PVE links templates only), or ``copy``, full (its own copy of every disk, on
``placement.datastore`` when given). Without it, a clone of a template is linked unless
``placement.datastore`` names a storage to copy it to, and a clone of a VM is full. Every
mistake that can be seen before is refused before anything is created; a new VM whose later
steps fail is deleted again.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, Unavailable, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.faults import (
    classify_exception)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.spec import (
    cloud_init_parameters, create_parameters, hardware_parameters, labels, placement_request,
    validate_spec)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.tasks import wait
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.vm_dict import (
    config_of, disks_of, interfaces_of)

__all__ = ("create", "choose_node")

VMID_TRIES = 5  # another client took the VM id PVE proposed: ask for the next one


def choose_node(session, wanted, records=None):
    """The node a new VM goes to: ``wanted`` (checked: it exists and is online), else the online
    node with the most free memory."""
    nodes = [r for r in (records or session.resources("node")) if r.get("type") == "node"]
    online = [n for n in nodes if n.get("status") == "online"]
    if wanted is not None:
        known = dict((n.get("node"), n) for n in nodes)
        if wanted not in known:
            raise field_error("placement.host", "no node named %r in the cluster of %s (nodes: "
                              "%s)" % (wanted, session.provider.key, ", ".join(sorted(known))))
        if known[wanted].get("status") != "online":
            raise Unavailable("node %r of %s is %s; choose another node (placement.host)"
                              % (wanted, session.provider.key, known[wanted].get("status")))
        return wanted
    if not online:
        raise Unavailable("no node of %s is online" % session.provider.key)
    return max(online, key=lambda n: ((n.get("maxmem") or 0) - (n.get("mem") or 0),
                                      n.get("node")))["node"]


def create(provider, spec):
    """Create the VM (stopped), or clone ``template``; its VM dict."""
    spec = validate_spec(spec)
    session = provider.session()
    records = session.resources()
    vms = [r for r in records if r.get("type") == "qemu"]
    if any(r.get("name") == spec["name"] for r in vms):
        raise Conflict("VM %r already exists on %s" % (spec["name"], provider.key))
    node, storage, pool = placement_request(spec)
    if "template" in spec:
        return _clone(session, spec, vms, records, node, storage, pool)
    node = choose_node(session, node, records)
    storage = storage or provider.config["storage"]
    return _with_free_vmid(session, spec["name"], lambda vmid: session.post(
        "nodes", node, "qemu",
        **create_parameters(spec, vmid, storage, provider.config["bridge"], pool)),
        "creating VM %r" % spec["name"])


def _with_free_vmid(session, name, start, what):
    """Start the task ``start(vmid)`` with the VM id PVE proposes, asking again when another
    client took it meanwhile; wait for the task and return the new VM's dict."""
    for attempt in range(VMID_TRIES):
        vmid = int(session.get("cluster", "nextid"))
        try:
            upid = start(vmid)
        except Exception as exc:  # noqa: BLE001 - only a taken VM id is tried again
            err = classify_exception(exc)
            if not (isinstance(err, Conflict) and ("%d already exists" % vmid) in err.message
                    and attempt + 1 < VMID_TRIES):
                raise
            continue
        wait(session, upid, what)
        return session.describe(session.find_vm(name))
    raise Conflict("%s: every VM id PVE proposed was taken meanwhile" % what)


def _source(session, template, vms):
    try:
        return session.find_vm(template, vms)
    except NotFound:
        raise field_error("template", "no VM or template named %r on %s; give the name (or "
                          "/<node>/<vmid>) of an existing one" % (template, session.provider.key)) from None
    except Conflict as err:
        raise field_error("template", err.message) from None


def _full(spec, source, storage):
    """True for a full clone of ``source``, False for a linked one (see the module docstring)."""
    if spec.get("clone") == "overlay":
        if not source.get("template"):
            raise field_error("clone", "%r is a VM, not a template, and Proxmox makes linked "
                              "clones (overlay) of templates only: convert it to a template, "
                              "or use clone: copy" % spec["template"])
        return False
    return spec.get("clone") == "copy" or bool(storage) or not source.get("template")


def _clone(session, spec, vms, records, node, storage, pool):
    """Clone the template, then give the clone what the spec asks."""
    source = _source(session, spec["template"], vms)
    target = choose_node(session, node, records) if node else source["node"]
    full = _full(spec, source, storage)
    config = config_of(session.get("nodes", source["node"], "qemu", source["vmid"], "pending"))[0]
    nics = len(spec["interfaces"]) if "interfaces" in spec else len(interfaces_of(config))
    if "cloud_init" in spec:
        cloud_init_parameters(spec["cloud_init"], nics)  # its errors before anything is made
    if "interfaces" in spec and len(spec["interfaces"]) < len(interfaces_of(config)):
        raise field_error("interfaces", "the template has %d NICs and the spec %d; a clone keeps "
                          "the template's NICs (give them all)"
                          % (len(interfaces_of(config)), len(spec["interfaces"])))
    params = dict(name=spec["name"], full=1 if full else 0)
    if storage:
        params["storage"] = storage
    if target != source["node"]:
        params["target"] = target
    if pool:
        params["pool"] = pool
    vm = _with_free_vmid(session, spec["name"], lambda vmid: session.post(
        "nodes", source["node"], "qemu", source["vmid"], "clone", newid=vmid, **params),
        "cloning %r into VM %r" % (spec["template"], spec["name"]))
    return _finish(session, spec, vm, config)


def _finish(session, spec, vm, template_config):
    """Give the clone ``vm`` the spec's hardware, cloud-init and labels (one configuration
    change); delete it again when that fails."""
    provider = session.provider
    storage = spec.get("placement", {}).get("datastore") or provider.config["storage"]
    taken = dict((d["bus"], int(d["slot"][len(d["bus"]):]) + 1) for d in disks_of(template_config))
    wanted = dict(spec, disks=spec.get("disks", [])[len(vm["disks"]):])
    params = hardware_parameters(wanted, storage, provider.config["bridge"], taken)
    params.update(labels(spec, template_config.get("description", "")))
    if "cloud_init" in spec:
        params.update(cloud_init_parameters(spec["cloud_init"], len(vm["interfaces"])))
        if not any(str(v).endswith("cloudinit") or "-cloudinit" in str(v)
                   for k, v in template_config.items()):
            params["ide2"] = "%s:cloudinit" % storage
    if not params:
        return vm
    node, vmid = vm["hypervisor"], _vmid(session, vm)
    try:
        session.put("nodes", node, "qemu", vmid, "config", **params)
        return session.describe(session.find_vm(spec["name"]))
    except Exception:
        try:
            wait(session, session.delete("nodes", node, "qemu", vmid, purge=1,
                                         **{"destroy-unreferenced-disks": 1}),
                 "deleting the half-made VM %r" % spec["name"])
        except Exception as exc:  # noqa: BLE001 - the step's error is the one to raise
            provider.warnings.append(
                "VM %r was cloned, then a step failed, and deleting it failed too (%s); delete "
                "it by hand" % (spec["name"], provider.scrub(str(exc))))
        raise


def _vmid(session, vm):
    return session.find_vm(vm["name"])["vmid"]
