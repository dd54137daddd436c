"""Nodes of a Proxmox VE cluster that cannot answer for their VMs, or are in maintenance, as
warnings that name them.

A node the cluster sees offline (a reboot, a power cut, a node shut down for maintenance) is in
``/cluster/resources`` with the status ``offline``, and its VMs with the status ``unknown``:
PVE's proxy answers any request for them with 595. The listings still show those VMs, from
the cluster's entries alone, and say which node they are on.

A node in maintenance (``ha-manager crm-command node-maintenance enable``) is a state of PVE's HA
manager, which moves the node's HA resources away and places none there until it ends: its
status (``/cluster/ha/status/manager_status``) lists the node as ``maintenance``. The node keeps
answering, so its VMs are listed as usual; the hypervisor's state is ``maintenance``. The HA
manager is asked only when the cluster has HA resources (a VM with a ``hastate`` in
``/cluster/resources``): a cluster without them stays one request, and a node put in
maintenance there is not reported.
"""

__all__ = ("ha_maintenance", "maintenance_nodes", "maintenance_warning", "offline_nodes",
           "offline_warning")


def offline_nodes(records):
    """Sorted names of the nodes that ``/cluster/resources`` entries (``records``) show offline:
    a node entry not ``online``, or the node of a VM whose status is ``unknown``."""
    names = set()
    for record in records:
        kind, status = record.get("type"), record.get("status")
        if (kind == "node" and status != "online") or (kind == "qemu" and status == "unknown"):
            names.add(record.get("node"))
    return sorted(name for name in names if name)


def offline_warning(key, node):
    """The warning about one offline ``node`` of the provider ``key``."""
    return ("node %s of %s is offline: its VMs are listed from the cluster's last knowledge "
            "of them, with state unknown, until it is back" % (node, key))


def maintenance_nodes(session, records):
    """Sorted names of the nodes PVE's HA manager has in maintenance, asked through ``session``
    when a VM among ``records`` is an HA resource; [] otherwise."""
    if not any(r.get("hastate") for r in records if r.get("type") == "qemu"):
        return []
    try:
        return ha_maintenance(session)
    except Exception:  # noqa: BLE001 - only a warning rests on it: a user without Sys.Audit on /
        return []      # (or an HA manager that does not answer) lists the VMs all the same


def ha_maintenance(session):
    """Sorted names of the nodes PVE's HA manager has in maintenance, from its status."""
    answer = session.get("cluster", "ha", "status", "manager_status") or {}
    status = (answer.get("manager_status") or {}).get("node_status") or {}
    return sorted(node for node, state in status.items() if state == "maintenance")


def maintenance_warning(key, node):
    """The warning about one ``node`` of the provider ``key`` in maintenance."""
    return ("node %s of %s is in maintenance: its VMs are listed as it reports them, and PVE's "
            "HA manager moves its HA resources to other nodes until the maintenance ends"
            % (node, key))
