"""May a VM use a reservation? Constraints 1-5 (see graph) and resource fit."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.graph import DependencyGraph
from ansible_collections.resilient.virt.plugins.module_utils._failover.plan import Removal
from ansible_collections.resilient.virt.plugins.module_utils._failover.resources import vm_fits

__all__ = ("does_vm_fit", "is_vm_eligible_for_reservation", "find_eligible_reservations",
           "remove_ineligible", "check_vms_still_eligible")

INELIGIBLE = "VM no longer meets the failover constraints"


def does_vm_fit(vm, reservation):
    return vm_fits(vm, reservation.resources)


def is_vm_eligible_for_reservation(vm, reservation, all_reservations):
    """Constraints 1-5 hold for ``vm`` and every member after ``vm`` joins ``reservation``.

    False when the VM already uses it. A reservation missing from ``all_reservations`` is added.
    """
    if vm.uuid in reservation.allocations:
        return False
    reservations = list(all_reservations)
    if not any(r.name == reservation.name for r in reservations):
        reservations.append(reservation)
    graph = DependencyGraph.from_reservations(reservations)
    return graph.would_be_eligible(vm.uuid, vm.host, reservation.name)


def find_eligible_reservations(vm, reservations):
    """The reservations, in input order, that ``vm`` fits in, does not use yet and may join."""
    graph = DependencyGraph.from_reservations(reservations)
    return [res for res in reservations
            if vm_fits(vm, res.resources) and vm.uuid not in res.allocations
            and graph.would_be_eligible(vm.uuid, vm.host, res.name)]


def remove_ineligible(graph, order, vm_hosts):
    """Unlink VMs that break constraints 1-5, visiting reservations in ``order`` and members by
    uuid; each removal takes effect at once. VMs without a host in ``vm_hosts`` are left alone;
    a VM whose host there differs from the graph's is removed. Returns the removals."""
    passed = set()
    out = []
    for name in order:
        for uuid in sorted(graph.members(name)):
            current = vm_hosts.get(uuid)
            if current is None or uuid in passed:
                continue
            recorded = graph.host_of(uuid)
            if current == recorded and graph.vm_ok(uuid):
                passed.add(uuid)
                continue
            graph.unlink(uuid, name)
            if current == recorded:
                why = INELIGIBLE
            elif recorded is None:
                why = "the VM's allocations disagree on its host"
            else:
                why = "VM runs on %s, not on recorded %s" % (current, recorded)
            out.append(Removal(name, uuid, recorded if recorded is not None else current, why))
    return out


def check_vms_still_eligible(vm_hosts, reservations):
    """{reservation name: [uuids to remove]} for the listed VMs that break the constraints."""
    graph = DependencyGraph.from_reservations(reservations)
    result = {}
    for removal in remove_ineligible(graph, [r.name for r in reservations], vm_hosts):
        result.setdefault(removal.reservation, []).append(removal.vm)
    return result
