"""Nodes of a Proxmox VE cluster that cannot answer for their VMs, as warnings that name them.

A node the cluster sees offline (a reboot, a power cut, a node shut down for maintenance) is in
``/cluster/resources`` with the status ``offline``, and its VMs with the status ``unknown``:
PVE's proxy answers any request for them with 595. The listings still show those VMs, from
the cluster's entries alone, and say which node they are on.
"""

__all__ = ("offline_nodes", "offline_warning")


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
