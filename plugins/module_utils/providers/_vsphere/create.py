"""Creating a vSphere VM: a new one (CreateVM_Task) where ``placement`` puts it, or a clone of
``template`` (CloneVM_Task) given the hardware the spec asks for and its customization. Every
mistake that can be seen before is refused before anything is created; a new VM whose later
steps fail is deleted again.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict, field_error
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    differences)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.edit import (
    HARDWARE, backing_resolver, change, device_specs, labels)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    VM_PATHS, retrieve)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
    config_spec, customization_spec, placement_request, validate_spec)

__all__ = ("create",)


def create(provider, spec):
    """Create the VM (stopped) where ``placement`` puts it, or clone ``template`` there.

    ``metadata`` and ``tags`` are stored once the VM exists (a clone also takes the
    hardware the spec asks for, then its customization); if that fails the VM is deleted
    again and the error says why. Tags on an endpoint without them, and every mistake in the
    spec that can be seen before, fail before anything is created.
    """
    spec = validate_spec(spec)
    session = provider.session()
    if session.vm_refs(spec["name"]):
        raise Conflict("VM %r already exists on %s" % (spec["name"], provider.key))
    tagger = session.require_tags() if spec["tags"] else None
    source = _source(session, spec["template"]) if "template" in spec else None
    wanted, paths = placement_request(spec)
    target = session.placer().resolve(wanted, paths, az=spec.get("az"))
    if source is not None:
        return _clone(session, spec, source, target)
    config = config_spec(spec, target["datastore"][0],
                         backing_resolver(session, target["host"][1]))
    task = target["folder"].CreateVM_Task(config=config, pool=target["pool"],
                                          host=target["host"][0])
    ref = session.wait(task, "creating VM %r" % spec["name"])

    def finish():
        labels(session, ref, {}, spec["metadata"], spec["tags"] if tagger else None)
        return session.describe(ref, spec["name"])

    return _finish(session, ref, spec["name"], finish)


def _source(session, template):
    """(ref, props, VM dict) of the VM or template ``template`` names: a name, or an
    inventory path (``/DC0/vm/templates/debian``)."""
    from pyVmomi import vim

    folder, _sep, name = template.rpartition("/")
    refs = session.vm_refs(name)
    found = retrieve(session.content, refs, {vim.VirtualMachine: VM_PATHS})
    tree = session.tree([props.get("parent") for ref, props in found])
    if folder:
        found = [(ref, props) for ref, props in found
                 if tree.path(props.get("parent")) == folder]
    if len(found) != 1:
        where = " in folder %s" % folder if folder else ""
        raise field_error("template", (
            "no VM or template named %r%s on %s; give the name or the inventory path "
            "(/<datacenter>/vm/<folder>/<name>) of an existing one"
            % (name, where, session.provider.key))
            if not found else "%d VMs or templates are named %r on %s; give the inventory "
            "path of one: %s" % (len(found), name, session.provider.key, ", ".join(sorted(
                "%s/%s" % (tree.path(props.get("parent")), name) for ref, props in found))))
    return found[0] + (session.vm_dicts(found)[0],)


def _clone(session, spec, source, target):
    """Clone ``source`` (ref, props, VM dict) to ``target``, then give the clone what the
    spec asks (``edit.change``) and its customization; a mistake that the source shows is
    refused before cloning."""
    from pyVmomi import vim

    ref, props, vm = source
    name = spec["name"]
    wanted = dict((field, spec[field]) for field in HARDWARE if field in spec)
    device_specs(session, target["host"][0], props, vm, differences(vm, wanted))
    location = vim.vm.RelocateSpec(host=target["host"][0], pool=target["pool"],
                                   datastore=target["datastore"][1])
    task = ref.CloneVM_Task(folder=target["folder"], name=name, spec=vim.vm.CloneSpec(
        location=location, powerOn=False, template=False))
    clone = session.wait(task, "cloning %r into VM %r" % (spec["template"], name))
    wanted.update(metadata=spec["metadata"], tags=spec["tags"])

    def finish():
        made = change(session, clone, name, wanted)
        if "customization" in spec:  # once the clone has its final NICs
            custom = customization_spec(spec, len(made["interfaces"]))
            session.wait(clone.CustomizeVM_Task(spec=custom), "customizing VM %r" % name)
        return made

    return _finish(session, clone, name, finish)


def _finish(session, ref, name, work):
    """``work()`` on the new VM ``ref``: its VM dict. When it fails, the VM is deleted again
    and its error raised (a warning says when the VM could not be deleted), also in an
    attempt abandoned by its time limit: the retry waits for it, then looks."""
    try:
        return work()
    except Exception:
        try:
            session.wait(ref.Destroy_Task(), "deleting the half-made VM %r" % name)
        except Exception as exc:  # noqa: BLE001 - the step's error is the one to raise
            session.provider.warnings.append(
                "VM %r was created, then a step failed, and deleting it failed too (%s); delete "
                "it by hand" % (name, session.provider.scrub(str(exc))))
        raise
