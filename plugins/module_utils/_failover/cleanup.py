"""Allocations whose VM is gone or has moved, and reservations left empty."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.plan import Removal

__all__ = ("stale_allocations", "empty_reservations")


def stale_allocations(reservations, vm_hosts, running=None):
    """Removals for allocations whose VM is gone or runs elsewhere than recorded.

    ``vm_hosts`` maps the listed VMs to their host. A VM the list lacks but that a hypervisor
    still reports running (``running``: uuid -> host) is kept while it runs on the recorded host.
    """
    running = running or {}
    out = []
    for res in reservations:
        for uuid in sorted(res.allocations):
            recorded = res.allocations[uuid]
            current = vm_hosts.get(uuid)
            if current is None:
                current = running.get(uuid)
            if current is None:
                out.append(Removal(res.name, uuid, recorded, "VM no longer exists"))
            elif current != recorded:
                out.append(Removal(res.name, uuid, recorded,
                                   "VM moved from %s to %s" % (recorded, current)))
    return out


def empty_reservations(reservations):
    """Names of reservations without allocations, in input order."""
    return [res.name for res in reservations if not res.allocations]
