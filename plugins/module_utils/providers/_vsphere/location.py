"""The location of vSphere VMs: where a VM is (the ``placement`` of its VM dict) and where a
spec's ``placement`` puts one (the host, resource pool, folder and datastore chosen).

``placement`` has six keys: ``datacenter``, ``cluster`` and ``host`` (names), ``resource_pool``
and ``folder`` (inventory paths such as ``/DC0/host/C0/Resources/web`` and ``/DC0/vm/team-a``,
as VM dicts show them), and ``datastore`` (the name of the datastore of the VM's configuration
file). A spec may also give a resource pool by name (unique where the VM goes) and a folder by
its path under the datacenter's VM folder (``team-a``).

The tree of datacenters, folders, compute resources and resource pools is read in one
PropertyCollector call (``session.Session.tree``); a VM listing reads only the part above its
VMs, in the same call as the VMs (``inventory.retrieve_view`` with ``ancestors``). pyVmomi is
imported inside the functions that need it.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotSupported, QuotaExceeded, field_error, field_errors)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    datastore_of, host_fields, host_state)

__all__ = ("KEYS", "TREE_PATHS", "Tree", "Placer", "vm_placement")

KEYS = ("datacenter", "cluster", "host", "resource_pool", "folder", "datastore")
# property paths of the tree's objects, by pyVmomi type name
TREE_PATHS = {"Folder": ("name", "parent", "childType"),
              "Datacenter": ("name", "parent", "vmFolder"),
              "ComputeResource": ("name", "parent", "resourcePool"),
              "ResourcePool": ("name", "parent")}
_LISTED = 12  # known values shown in an error message


def _known(values):
    values = sorted(set(v for v in values if v))
    shown = ", ".join(values[:_LISTED]) or "none"
    return shown + (", ..." if len(values) > _LISTED else "")


class Tree:
    """The inventory's datacenters, folders, compute resources and resource pools by moId."""

    def __init__(self, found):
        from pyVmomi import vim

        self.nodes = {}
        for ref, props in found:
            kind = next(k for k in ("Datacenter", "Folder", "ComputeResource", "ResourcePool")
                        if isinstance(ref, getattr(vim, k)))
            self.nodes[ref._moId] = (ref, props, kind)

    def knows(self, refs):
        return all(ref is None or ref._moId in self.nodes for ref in refs)

    def _chain(self, ref):
        """``ref`` and its ancestors below the root folder, nearest first."""
        out = []
        while ref is not None and ref._moId in self.nodes:
            out.append(self.nodes[ref._moId])
            ref = out[-1][1].get("parent")
        return out

    def path(self, ref):
        """Inventory path of ``ref`` (``/DC0/vm/team-a``); None for None."""
        chain = self._chain(ref)
        return "/" + "/".join(props.get("name") or "" for _r, props, _k in reversed(chain)) \
            if chain else None

    def up(self, ref, kind):
        """The nearest ``kind`` (Datacenter, ComputeResource) of ``ref`` and its ancestors."""
        return next((node for node in self._chain(ref) if node[2] == kind), (None, {}, None))

    def of_kind(self, kind):
        return [node for node in self.nodes.values() if node[2] == kind]


def vm_placement(props, tree, hosts):
    """The ``placement`` of a VM from its properties (``parent``, ``resourcePool``,
    ``runtime.host``, ``config.files.vmPathName``); ``hosts`` maps host moIds to
    (name, az, cluster or None)."""
    host = props.get("runtime.host")
    name, _az, cluster = hosts.get(host._moId, (None, None, None)) if host else (None,) * 3
    folder, pool = props.get("parent"), props.get("resourcePool")
    datacenter = tree.up(folder or pool, "Datacenter")[1].get("name")
    return {"datacenter": datacenter, "cluster": cluster, "host": name,
            "resource_pool": tree.path(pool), "folder": tree.path(folder),
            "datastore": datastore_of(props.get("config.files.vmPathName"))}


class Placer:
    """Resolves a spec's placement into vSphere objects, on a fresh tree and host records.

    ``records`` are (host ref, props, az) with ``props["compute"] = (ref, props)``;
    ``datastores(host props)`` lists a host's accessible datastores as (name, ref, free bytes).
    """

    def __init__(self, provider, tree, records, datastores):
        self.key = provider.key
        self.scope = provider.config.get("datacenter")
        self.tree = tree
        self.records = records
        self.datastores = datastores

    def resolve(self, wanted, paths, current=None, az=None):
        """The target of ``wanted`` (KEYS -> str or None): a dict ``host`` (ref, props),
        ``pool``, ``folder`` (refs) and ``datastore`` (name, ref). ``paths`` names the field of
        each key in errors; ``current`` (the VM's ``host``, ``pool``, ``folder`` refs and
        ``datastore`` name) fills what is not given, so only what is asked moves; ``az`` keeps
        hosts of that availability zone only (the spec's older ``az``)."""
        dc = self._datacenter(wanted, paths, current)
        self._check_names(wanted, paths, dc)
        folder = None
        if (wanted.get("folder") or "").startswith("/"):
            folder = self._folder(wanted["folder"], paths["folder"], dc)
            dc = self.tree.up(folder, "Datacenter")[0]
        host, compute = self._host(wanted, paths, dc, current, az)
        pool = None
        if wanted.get("resource_pool"):
            pool = self._pool(wanted["resource_pool"], paths["resource_pool"], dc, compute)
            compute = compute or self.tree.up(pool, "ComputeResource")[0]
        if host is None:
            host = self._best_host(compute, dc, current, az)
            compute = host[1]["compute"][0]
        if pool is None:  # the VM's pool when it stays in its cluster (a template has none)
            keep = current and (current["pool"] is None or self.tree.up(
                current["pool"], "ComputeResource")[0] == compute)
            pool = current["pool"] if keep else host[1]["compute"][1]["resourcePool"]
        dc = self.tree.up(compute, "Datacenter")[0]
        if wanted.get("folder") and folder is None:
            folder = self._folder(wanted["folder"], paths["folder"], dc)
        elif folder is None:
            folder = current["folder"] if current else self.tree.nodes[dc._moId][1]["vmFolder"]
        datastore = self._datastore(wanted.get("datastore"), paths["datastore"], host, current)
        return {"host": host, "pool": pool, "folder": folder, "datastore": datastore}

    # -- each key ---------------------------------------------------------------------------
    def _datacenter(self, wanted, paths, current):
        """The datacenter asked (or the VM's), or None for any of the provider's."""
        here = self.tree.up(current["folder"] or current["pool"], "Datacenter")[0] \
            if current else None
        name = wanted.get("datacenter")
        if not name:
            return here
        found = [ref for ref, props, _k in self._datacenters() if props.get("name") == name]
        if not found:
            limit = " (provider.datacenter limits this provider to %r)" % self.scope \
                if self.scope else ""
            raise field_error(paths["datacenter"], "no datacenter named %r on %s%s "
                              "(datacenters: %s)" % (name, self.key, limit, _known(
                                  p.get("name") for _r, p, _k in self._datacenters())))
        if here is not None and found[0] != here:
            raise NotSupported(
                "the vsphere provider does not move a VM to another datacenter (%s %r; the VM "
                "is in %r): create a new VM there with template set to this one instead"
                % (paths["datacenter"], name, self.tree.nodes[here._moId][1].get("name")))
        return found[0]

    def _check_names(self, wanted, paths, dc):
        """One InvalidSpec naming every cluster, host, resource pool and folder path asked that
        does not exist (or is ambiguous) where the VM may go; how they fit together is checked
        after."""
        checks = {"cluster": lambda name: self._cluster(name, paths["cluster"], dc),
                  "host": lambda name: self._host({"host": name}, paths, dc, None, None),
                  "resource_pool": lambda name: self._pool(name, paths["resource_pool"], dc,
                                                           None, unique=False),
                  "folder": lambda name: (name.startswith("/") or home is not None) and
                  self._folder(name, paths["folder"], dc if name.startswith("/") else home)}
        datacenters = self._datacenters()
        home = dc if dc is not None or len(datacenters) != 1 else datacenters[0][0]
        errors = []
        for key, check in checks.items():
            try:
                if wanted.get(key):
                    check(wanted[key])
            except InvalidSpec as err:
                errors += err.details["errors"]
        if errors:
            raise field_errors(errors, "placement names what does not exist")

    def _datacenters(self):
        return [node for node in self.tree.of_kind("Datacenter")
                if self.scope is None or node[1].get("name") == self.scope]

    def _in(self, ref, dc):
        """True when ``ref`` lies in datacenter ``dc`` (None: any of the provider's)."""
        mine = self.tree.up(ref, "Datacenter")[0]
        if dc is not None:
            return mine == dc
        return any(mine == node[0] for node in self._datacenters())

    def _where(self, dc):
        return "datacenter %s" % self.tree.nodes[dc._moId][1].get("name") if dc is not None \
            else self.key

    def _cluster(self, name, path, dc):
        from pyVmomi import vim

        clusters = [ref for ref, _p, _k in self.tree.of_kind("ComputeResource")
                    if isinstance(ref, vim.ClusterComputeResource) and self._in(ref, dc)]
        found = [ref for ref in clusters if self.tree.nodes[ref._moId][1].get("name") == name]
        if not found:
            raise field_error(path, "no cluster named %r in %s (clusters: %s)" % (
                name, self._where(dc), _known(self.tree.nodes[r._moId][1].get("name")
                                              for r in clusters)))
        if len(found) > 1:
            raise field_error(path, "clusters named %r are in several datacenters (%s); give "
                              "the datacenter too" % (name, _known(
                                  self.tree.up(r, "Datacenter")[1].get("name") for r in found)))
        return found[0]

    def _host(self, wanted, paths, dc, current, az):
        """(host record or None, compute resource or None) from the host and cluster asked."""
        cluster = self._cluster(wanted["cluster"], paths["cluster"], dc) \
            if wanted.get("cluster") else None
        name = wanted.get("host")
        if not name:
            return None, cluster
        scoped = [r for r in self.records if self._in(r[1]["compute"][0], dc)]
        found = [r for r in scoped if r[1].get("name") == name]
        if not found:
            raise field_error(paths["host"], "no host named %r in %s (hosts: %s)" % (
                name, self._where(dc), _known(r[1].get("name") for r in scoped)))
        ref, props, host_az = found[0]
        compute = props["compute"][0]
        if cluster is not None and compute != cluster:
            raise field_error(paths["host"], "host %r is not in cluster %r (%s); give a host of "
                              "that cluster, or leave one of them out" % (
                                  name, wanted["cluster"], "it is in cluster %r"
                                  % props["compute"][1].get("name")
                                  if self._is_cluster(compute) else "it is a standalone host"))
        if az is not None and host_az != az:
            raise field_error("az", "host %r is in az %r, not %r" % (name, host_az, az))
        state = host_state(props)
        if state != "connected":
            raise Conflict("host %r on %s is %s; choose another %s" % (name, self.key, state,
                                                                       paths["host"]))
        return found[0], compute

    @staticmethod
    def _is_cluster(ref):
        from pyVmomi import vim

        return isinstance(ref, vim.ClusterComputeResource)

    def _best_host(self, compute, dc, current, az):
        """The VM's host when it may stay, else the connected host with the most free memory."""
        candidates = [r for r in self.records
                      if (r[1]["compute"][0] == compute if compute is not None
                          else self._in(r[1]["compute"][0], dc))]
        for record in candidates:
            if current and record[0] == current["host"]:
                return record
        if az is not None:
            zones = _known(r[2] for r in candidates)
            candidates = [r for r in candidates if r[2] == az]
            if not candidates:
                raise field_error("az", "no cluster named %r on %s (azs: %s)"
                                  % (az, self.key, zones))
        usable = [r for r in candidates if host_state(r[1]) == "connected"]
        if not usable:
            where = self.tree.nodes[compute._moId][1].get("name") if compute is not None \
                else self._where(dc)
            raise QuotaExceeded("no connected host outside maintenance mode in %s on %s"
                                % (where, self.key))

        def free_mb(record):
            facts = host_fields(record[1], None, [])
            return facts["memory_mb"] - (facts["used_memory_mb"] or 0)
        return max(usable, key=free_mb)

    def _pool(self, value, path, dc, compute, unique=True):
        pools = [ref for ref, _p, _k in self.tree.of_kind("ResourcePool")
                 if self._in(ref, dc) and (compute is None or
                                           self.tree.up(ref, "ComputeResource")[0] == compute)]
        if value.startswith("/"):
            found = [ref for ref in pools if self.tree.path(ref) == value.rstrip("/")]
        else:
            found = [ref for ref in pools if self.tree.nodes[ref._moId][1].get("name") == value]
        where = self.tree.nodes[compute._moId][1].get("name") if compute is not None \
            else self._where(dc)
        if not found:
            raise field_error(path, "no resource pool %r in %s; give its name or its path "
                              "(pools: %s)" % (value, where, _known(
                                  self.tree.path(ref) for ref in pools)))
        if len(found) > 1 and unique:
            raise field_error(path, "%d resource pools are named %r in %s; give the path of "
                              "one: %s" % (len(found), value, where,
                                           _known(self.tree.path(ref) for ref in found)))
        return found[0]

    def _folder(self, value, path, dc):
        folders = [ref for ref, props, _k in self.tree.of_kind("Folder")
                   if "VirtualMachine" in (props.get("childType") or []) and self._in(ref, dc)]
        full = value.rstrip("/")
        if not value.startswith("/"):
            base = self.tree.nodes[dc._moId][1]["vmFolder"]
            full = "%s/%s" % (self.tree.path(base), value.strip("/"))
        for ref in folders:
            if self.tree.path(ref) == full:
                return ref
        raise field_error(path, "no VM folder %s in %s; give an inventory path such as "
                          "/<datacenter>/vm/<folder>, or a path under the datacenter's VM "
                          "folder (VM folders: %s)" % (full, self._where(dc), _known(
                              self.tree.path(ref) for ref in folders)))

    def _datastore(self, name, path, host, current):
        stores = self.datastores(host[1])
        names = _known(n for n, _r, _f in stores)
        if name or (current and current["datastore"]):
            wanted = name or current["datastore"]
            for found in stores:
                if found[0] == wanted:
                    return found[0], found[1]
            if name:
                raise field_error(path, "%r is not an accessible datastore of host %r "
                                  "(datastores: %s)" % (name, host[1]["name"], names))
            raise field_error(path, "host %r does not reach datastore %r, where the VM's files "
                              "are; give the datastore to move them to (datastores: %s)"
                              % (host[1]["name"], wanted, names))
        if not stores:
            raise QuotaExceeded("host %r on %s has no accessible datastore"
                                % (host[1]["name"], self.key))
        best = max(stores, key=lambda s: s[2])
        return best[0], best[1]
