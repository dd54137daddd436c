"""One login to a vSphere endpoint and what every operation of the backend reads through it.

``VSphereProvider`` makes a :class:`Session` per login (its ``session()``), reused by every
call of the provider object until the login is dropped; the files of the backend get it
instead of the provider's private members. Lookups it makes once (container views, the
datacenter, custom field names, port groups, the hosts, the inventory tree) are cached for the
login's lifetime. pyVmomi is imported inside the methods that need it.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, Timeout, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import new_vm
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    COMPUTE_PATHS, HOST_PATHS, VM_PATHS, retrieve, retrieve_view, vm_fields)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.location import (
    TREE_PATHS, Placer, Tree, vm_placement)

__all__ = ("Session",)

MAX_POLL_INTERVAL = 1.0


class Session:
    """One login: ``si`` (the service instance), ``content``, ``provider`` (its ``key``,
    ``config``, ``warnings``, ``started``, ``scrub``), the lookups below, and the REST session
    for tags (``tag_client()``, ``require_tags()``) through the functions the provider gives."""

    def __init__(self, si, provider, tag_client, require_tags):
        self.si = si
        self.content = si.RetrieveContent()
        self.provider = provider
        self._tag_client = tag_client
        self._require_tags = require_tags
        self._views = {}
        self._root = None
        self._field_names = None
        self._portgroups = None
        self._hosts = {}
        self._tree = None

    def tag_client(self):
        """The REST session for tags, or None when the endpoint has no tags."""
        return self._tag_client(self)

    def require_tags(self):
        """The REST session for tags; NotSupported saying why the endpoint has none."""
        return self._require_tags(self)

    def forget_field_names(self):
        """Custom fields were defined: read their names again when next needed."""
        self._field_names = None

    def view(self, kinds):
        """A ContainerView of ``kinds`` under the datacenter (or root), made once per session."""
        names = tuple(sorted(k.__name__ for k in kinds))
        if names not in self._views:
            self._views[names] = self.content.viewManager.CreateContainerView(
                self.root(), list(kinds), True)
        return self._views[names]

    def root(self):
        """The datacenter of ``provider.datacenter``, else the root folder: where views start."""
        if self._root is not None:
            return self._root
        content = self.content
        wanted = self.provider.config.get("datacenter")
        if wanted is None:
            self._root = content.rootFolder
            return self._root
        from pyVmomi import vim

        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.Datacenter], True)
        found = retrieve_view(content, view, {vim.Datacenter: ["name"]})
        for ref, props in found:
            if props.get("name") == wanted:
                self._root = ref
                return ref
        known = ", ".join(sorted(p.get("name", "?") for ref, p in found)) or "none"
        raise field_error("provider.datacenter", "no datacenter named %r on %s (datacenters: %s)"
                          % (wanted, self.provider.endpoint(), known))

    def field_names(self, props_list):
        """Custom field key -> name; fetched when a key is not known yet."""
        known = self._field_names or {}
        if any(item.key not in known for p in props_list for item in p.get("customValue") or []):
            fields = self.content.customFieldsManager.field or []
            self._field_names = known = dict((f.key, f.name) for f in fields)
        return known

    def portgroups(self, props_list):
        """Distributed port group key -> name; fetched when a VM uses a key not known yet."""
        from pyVmomi import vim

        known = self._portgroups or {}
        backing = vim.vm.device.VirtualEthernetCard.DistributedVirtualPortBackingInfo
        if any(isinstance(getattr(d, "backing", None), backing) and d.backing.port is not None
               and d.backing.port.portgroupKey not in known
               for p in props_list for d in p.get("config.hardware.device") or []):
            view = self.view([vim.dvs.DistributedVirtualPortgroup])
            found = retrieve_view(self.content, view,
                                  {vim.dvs.DistributedVirtualPortgroup: ["key", "name"]})
            self._portgroups = known = dict((p["key"], p["name"]) for ref, p in found
                                            if "key" in p)
        return known

    def host_records(self):
        """Every host: (moref, props, az); also refreshes the host map used by VM dicts."""
        from pyVmomi import vim

        found = retrieve_view(self.content, self.view([vim.HostSystem, vim.ComputeResource]),
                              {vim.HostSystem: HOST_PATHS, vim.ComputeResource: COMPUTE_PATHS})
        computes = dict((ref._moId, (ref, props)) for ref, props in found
                        if isinstance(ref, vim.ComputeResource))
        records = []
        for ref, props in found:
            if not isinstance(ref, vim.HostSystem):
                continue
            parent = props.get("parent")
            compute = computes.get(parent._moId) if parent is not None else None
            if compute is not None and isinstance(compute[0], vim.ClusterComputeResource):
                az = compute[1].get("name")
            else:
                az = self.provider.config["az"]
            props["compute"] = compute
            records.append((ref, props, az))
        self._hosts = dict((ref._moId, (props.get("name"), az, az if props["compute"] and isinstance(
            props["compute"][0], vim.ClusterComputeResource) else None)) for ref, props, az in records)
        return records

    def tree(self, refs=(), fresh=False):
        """The inventory tree (``location.Tree``), read again when ``fresh`` or when it lacks
        one of ``refs``; its view starts at the root folder, for whole paths."""
        from pyVmomi import vim

        if fresh or self._tree is None or not self._tree.knows(refs):
            content = self.content
            if "tree" not in self._views:
                self._views["tree"] = content.viewManager.CreateContainerView(
                    content.rootFolder, [getattr(vim, kind) for kind in TREE_PATHS], True)
            self._tree = Tree(retrieve_view(content, self._views["tree"], dict(
                (getattr(vim, kind), paths) for kind, paths in TREE_PATHS.items())))
        return self._tree

    def placer(self):
        """A Placer on a fresh read of the inventory."""
        from pyVmomi import vim

        def datastores(host_props):
            found = retrieve(self.content, host_props.get("datastore") or [],
                             {vim.Datastore: ["summary.name", "summary.freeSpace",
                                              "summary.accessible"]})
            return [(p.get("summary.name"), ref, p.get("summary.freeSpace") or 0)
                    for ref, p in found if p.get("summary.accessible")]
        return Placer(self.provider, self.tree(fresh=True), self.host_records(), datastores)

    def vm_refs(self, name):
        """Every VM named ``name``."""
        from pyVmomi import vim

        view = self.view([vim.VirtualMachine])
        return [ref for ref, props in retrieve_view(self.content, view,
                                                    {vim.VirtualMachine: ["name"]})
                if props.get("name") == name]

    def find_vm(self, name):
        """The VM named ``name``, or at the inventory path ``name`` when it starts with /."""
        from pyVmomi import vim

        if name.startswith("/"):
            ref = self.content.searchIndex.FindByInventoryPath(name[1:])
            if not isinstance(ref, vim.VirtualMachine):
                raise NotFound("no VM at the inventory path %r on %s" % (name, self.provider.key))
            return ref
        refs = self.vm_refs(name)
        if not refs:
            raise NotFound("VM %r not found on %s" % (name, self.provider.key))
        if len(refs) > 1:
            raise Conflict("%d VMs are named %r on %s; address the one you mean by its uuid, "
                           "or by its inventory path as name (/<datacenter>/vm/<folder>/%s)"
                           % (len(refs), name, self.provider.key, name))
        return refs[0]

    def tags_of(self, moids):
        """{moid: tag names} of the VMs ``moids`` ({} on an endpoint without tags)."""
        client = self.tag_client()
        return client.tags_of(moids) if client else {}

    def tags_of_soon(self):
        """``tags_of`` for the VMs of a query the caller makes next: the REST session is opened
        and the category looked up now, in a thread, so that those round trips overlap the
        query; their errors are raised by the function returned."""
        from concurrent.futures import ThreadPoolExecutor

        def prepare():
            client = self.tag_client()
            if client is not None:
                client.category(create=False)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="resilient-virt-tags")
        ready = pool.submit(prepare)
        pool.shutdown(wait=False)

        def tags_of(moids):
            ready.result()
            return self.tags_of(moids)
        return tags_of

    def vm_dicts(self, found, tree=None, tags_of=None):
        """The VM dicts of ``found`` (VM_PATHS properties). ``tree`` holds their folders' and
        resource pools' ancestors when the caller read them (else the session's tree is used);
        ``tags_of(moids)`` reads their tags (default ``tags_of``)."""
        props_list = [props for ref, props in found]
        if any(p.get("runtime.host") is not None and p["runtime.host"]._moId not in self._hosts
               for p in props_list):
            self.host_records()
        field_names = self.field_names(props_list)
        portgroups = self.portgroups(props_list)
        if tree is None and found:
            tree = self.tree([p.get(key) for p in props_list
                              for key in ("parent", "resourcePool")])
        tags_of = tags_of or self.tags_of
        tags = tags_of([ref._moId for ref, props in found]) if found else {}
        return [new_vm(self.provider, props.get("name"), tags=tags.get(ref._moId, []),
                       placement=vm_placement(props, tree, self._hosts),
                       **vm_fields(props, self._hosts, field_names, portgroups))
                for ref, props in found]

    def describe(self, ref, name):
        """The VM dict of VM ``ref`` (named ``name`` in errors)."""
        from pyVmomi import vim

        found = retrieve(self.content, [ref], {vim.VirtualMachine: VM_PATHS})
        if not found:
            raise NotFound("VM %r not found on %s" % (name, self.provider.key))
        return self.vm_dicts(found)[0]

    def wait(self, task, what, timeout=None):
        """Poll ``task`` until it ends: its result, its fault raised, or Timeout. The task is
        named to the retry first (``started``), and an abandoned attempt polls on, so that its
        work ends as it would have and the retry that waits for it finds it done."""
        self.provider.started(task._moId)
        limit = self.provider.config["task_timeout"] if timeout is None else timeout
        end = time.monotonic() + limit
        delay = 0.02
        while True:
            info = task.info
            if info.state == "success":
                return info.result
            if info.state == "error":
                raise info.error
            left = end - time.monotonic()
            if left <= 0:
                raise Timeout("%s on %s still running after %gs (task %s); see task_status"
                              % (what, self.provider.key, limit, task._moId),
                              details={"task_id": task._moId, "timeout": limit})
            time.sleep(min(delay, left))
            delay = min(delay * 2, MAX_POLL_INTERVAL)

    def power_state(self, ref):
        """The power state of VM ``ref`` (``poweredOn``...), None when it is gone."""
        from pyVmomi import vim

        found = retrieve(self.content, [ref], {vim.VirtualMachine: ["runtime.powerState"]})
        return str(found[0][1].get("runtime.powerState")) if found else None
