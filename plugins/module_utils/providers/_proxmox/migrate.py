"""Moving a Proxmox VE VM to another node of its cluster: PVE's own migration (``POST
/nodes/<node>/qemu/<vmid>/migrate``), followed by its UPID. A running or paused VM moves online
(its memory copied while it runs) with its disks on local storage copied by PVE
(``with-local-disks``), those on shared storage left where they are; a stopped VM moves offline.
``datastore`` names the storage the local disks go to (PVE's ``targetstorage``).
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.tasks import wait

__all__ = ("migrate",)


def migrate(provider, name, hypervisor, resource_pool=None, datastore=None):
    """The VM dict after moving VM ``name`` to the node ``hypervisor``."""
    if resource_pool is not None:
        raise field_error("resource_pool", "a Proxmox VE VM moves between nodes, not into a "
                          "resource pool; remove resource_pool")
    session = provider.session()
    record = session.find_vm(name)
    if record["node"] != hypervisor:
        params = {"target": hypervisor}
        if session.describe(record, name, guest=False)["state"] in ("running", "paused"):
            params.update({"online": 1, "with-local-disks": 1})
        if datastore is not None:
            params["targetstorage"] = datastore
        upid = session.post("nodes", record["node"], "qemu", record["vmid"], "migrate", **params)
        wait(session, upid, "migration of VM %r to node %s" % (name, hypervisor))
    return session.describe(session.find_vm(name), name)
