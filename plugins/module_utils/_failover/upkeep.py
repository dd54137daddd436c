# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Steps 1-4 of a cycle: allocations whose VM is gone or moved, VMs that broke the rules,
reservations due for revalidation, and reservations left empty."""

from ansible_collections.resilient.virt.plugins.module_utils._conditions import (
    READY, make_condition, set_condition)
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    host_satisfies, remove_ineligible, trait_needs)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    Removal, reservation_size, resource_error, vm_fits)
from ansible_collections.resilient.virt.plugins.module_utils._failover.cycle_state import (
    ACTIVE_MESSAGE, ACTIVE_REASON, EMPTY, EMPTY_MESSAGE)
from ansible_collections.resilient.virt.plugins.module_utils._time import parse_time


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


def drop_stale(state):
    listed = {uuid: vm.host for uuid, vm in state.vms.items()}
    state.apply_removals(stale_allocations(state.work.values(), listed, state.hosts))


def drop_ineligible(state):
    state.apply_removals(remove_ineligible(state.graph, list(state.work), state.hosts))


def revalidate(state):
    interval = state.settings.revalidation_interval
    for name in list(state.work):
        res = state.work[name]
        if not res.allocations or not is_due(res, state.now, interval):
            continue
        problem = find_problem(res, state.hv.get(res.host), state.vms, state.ledger)
        if problem is None:
            res.acknowledged_at = state.stamp
            res.conditions = set_condition(res.conditions, make_condition(
                READY, True, ACTIVE_REASON, ACTIVE_MESSAGE, now=state.now))
            state.result.acknowledged += 1
            continue
        res.last_changed = state.stamp
        res.conditions = set_condition(res.conditions, make_condition(
            READY, False, problem[0], problem[1], now=state.now))
        state.delete(name, *problem)


def drop_empty(state):
    for name in empty_reservations(list(state.work.values())):
        state.delete(name, EMPTY, EMPTY_MESSAGE)
