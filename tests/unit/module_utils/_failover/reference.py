"""The reference system's failover functions that the conformance cases name (Cortex's
``IsVMEligibleForReservation``, ``FindEligibleReservations``, ``CheckVMsStillEligible``,
``DoesVMFitInReservation`` and the dependency graph's maps), written over the collection's own
planner pieces: the DependencyGraph, ``vm_fits`` and ``remove_ineligible``. The collection
itself never calls these; the cases check the rules through them."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    DependencyGraph, remove_ineligible)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import vm_fits


def does_vm_fit(vm, reservation):
    return vm_fits(vm, reservation.resources)


def would_be_eligible(graph, uuid, name):
    """Exact check on a graph that knows VM ``uuid``: after it joins ``name``, does every member
    meet constraints 1-5? The graph is left as it was."""
    if uuid in graph.members(name):
        return False
    graph.link(uuid, name)
    try:
        return all(graph.vm_ok(member) for member in graph.members(name))
    finally:
        graph.unlink(uuid, name)


def _would_be_eligible(reservations, uuid, host, name):
    graph = DependencyGraph.from_reservations(reservations)
    graph.add_vm(uuid, host)
    return would_be_eligible(graph, uuid, name)


def is_vm_eligible_for_reservation(vm, reservation, all_reservations):
    """Constraints 1-5 hold for ``vm`` and every member after ``vm`` joins ``reservation``.

    False when the VM already uses it. A reservation missing from ``all_reservations`` is added.
    """
    if vm.uuid in reservation.allocations:
        return False
    reservations = list(all_reservations)
    if not any(r.name == reservation.name for r in reservations):
        reservations.append(reservation)
    return _would_be_eligible(reservations, vm.uuid, vm.host, reservation.name)


def find_eligible_reservations(vm, reservations):
    """The reservations, in input order, that ``vm`` fits in, does not use yet and may join."""
    return [res for res in reservations
            if vm_fits(vm, res.resources) and vm.uuid not in res.allocations
            and _would_be_eligible(reservations, vm.uuid, vm.host, res.name)]


def check_vms_still_eligible(vm_hosts, reservations):
    """{reservation name: [uuids to remove]} for the listed VMs that break the constraints."""
    graph = DependencyGraph.from_reservations(reservations)
    result = {}
    for removal in remove_ineligible(graph, [r.name for r in reservations], vm_hosts):
        result.setdefault(removal.reservation, []).append(removal.vm)
    return result


def graph_maps(reservations):
    """The dependency graph of ``reservations`` as the reference exposes it: VM -> sorted
    reservation names, reservation -> sorted members, VM -> current host (VMs with a known
    host that hold a reservation)."""
    graph = DependencyGraph.from_reservations(reservations)
    vms = sorted(set(uuid for res in reservations for uuid in res.allocations))
    vm_res = {uuid: sorted(graph.reservations_of(uuid)) for uuid in vms
              if graph.reservations_of(uuid)}
    res_vms = {res.name: sorted(graph.members(res.name)) for res in reservations}
    hosts = {uuid: graph.host_of(uuid) for uuid in vm_res if graph.host_of(uuid) is not None}
    return vm_res, res_vms, hosts
