"""Deleting a Proxmox VE VM: out of HA first, stopped, then destroyed with its disks.

A VM that is an HA resource (its ``/cluster/resources`` entry has a ``hastate``) is removed from
HA before anything else (``DELETE /cluster/ha/resources/vm:<vmid>``): while HA manages it, a stop
is only a request to the HA manager, whose task ends before the VM stops, and PVE refuses to
destroy an HA resource unless asked to purge it (community.proxmox#60). A running VM is then
stopped, and the delete waits until PVE reports it stopped; the destroy (``purge``) also drops
the VM from backup and replication jobs and whatever HA configuration is left.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound, Timeout
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.faults import (
    classify_exception)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.tasks import wait

__all__ = ("delete",)

STOP_POLL = 0.2  # seconds between two reads of a stopping VM's status


def delete(provider, name):
    """Delete the VM ``name`` (see the module docstring)."""
    session = provider.session()
    record = session.find_vm(name)
    node, vmid = record["node"], record["vmid"]
    if record.get("hastate"):
        _leave_ha(session, vmid)
    if record.get("status") == "running":
        wait(session, session.post("nodes", node, "qemu", vmid, "status", "stop"),
             "stopping VM %r" % name)
        _until_stopped(session, node, vmid, name)
    wait(session, session.delete("nodes", node, "qemu", vmid, purge=1,
                                 **{"destroy-unreferenced-disks": 1}),
         "deleting VM %r" % name)


def _leave_ha(session, vmid):
    """Remove ``vm:<vmid>`` from the HA resources; one already gone is no error."""
    try:
        session.delete("cluster", "ha", "resources", "vm:%s" % vmid)
    except Exception as exc:  # noqa: BLE001 - only an HA resource already gone is let through
        if not isinstance(classify_exception(exc), NotFound):
            raise


def _until_stopped(session, node, vmid, name):
    limit = session.provider.config["task_timeout"]
    end = time.monotonic() + limit
    while session.get("nodes", node, "qemu", vmid, "status", "current").get("status") != "stopped":
        if time.monotonic() >= end:
            raise Timeout("VM %r on %s was asked to stop but still runs after %gs"
                          % (name, session.provider.key, limit), details={"timeout": limit})
        time.sleep(STOP_POLL)
