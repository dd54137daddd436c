"""Periodic check that a reservation still serves every VM allocated to it."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.resources import (
    reservation_size, resource_error, vm_fits)
from ansible_collections.resilient.virt.plugins.module_utils._failover.timestamps import parse_time
from ansible_collections.resilient.virt.plugins.module_utils._failover.traits import (
    host_satisfies, trait_needs)

__all__ = ("is_due", "find_problem", "INVALID_RESOURCES", "HOST_NOT_FOUND", "VM_DOES_NOT_FIT")

INVALID_RESOURCES = "InvalidResources"
HOST_NOT_FOUND = "HostNotFound"
VM_DOES_NOT_FIT = "VMDoesNotFit"


def is_due(res, now, interval):
    """True when never acknowledged, changed since, or acknowledged ``interval`` seconds ago."""
    if res.acknowledged_at is None:
        return True
    acked = parse_time(res.acknowledged_at, "reservation %s acknowledged_at" % res.name)
    if res.last_changed is not None and \
            parse_time(res.last_changed, "reservation %s last_changed" % res.name) > acked:
        return True
    return now - acked >= interval


def find_problem(res, hypervisor, vms_by_uuid, ledger):
    """(reason, message) when ``res`` is invalid, else None.

    Invalid: a resource key other than cpu/memory_mb; an unknown host; or an allocated VM that
    now runs on that host, outgrew the reservation, left its zone, needs other traits, or would
    not fit on the host with this reservation's own room given back (others stay blocked).
    VMs missing from ``vms_by_uuid`` are not judged.
    """
    error = resource_error(res.resources)
    if error:
        return INVALID_RESOURCES, error
    if hypervisor is None:
        return HOST_NOT_FOUND, "host %s is not among the hypervisors" % res.host
    free_cpu, free_mem = ledger.free(res.host)
    held_cpu, held_mem = reservation_size(res.resources)
    for uuid in sorted(res.allocations):
        vm = vms_by_uuid.get(uuid)
        if vm is None:
            continue
        if vm.host == res.host:
            why = "now runs on the reservation's host"
        elif not vm_fits(vm, res.resources):
            why = "needs %s vcpus and %s MiB, more than the reservation holds" % (
                vm.vcpus, vm.memory_mb)
        elif vm.az and vm.az != hypervisor.az:
            why = "is in zone %s, the host in %s" % (vm.az, hypervisor.az)
        elif not host_satisfies(hypervisor.traits, trait_needs(vm.extra_specs)):
            why = "needs traits the host does not match"
        elif (vm.vcpus or 0) > free_cpu + held_cpu or (vm.memory_mb or 0) > free_mem + held_mem:
            why = "would not fit on host %s any more" % res.host
        else:
            continue
        return VM_DOES_NOT_FIT, "VM %s %s" % (uuid, why)
    return None
