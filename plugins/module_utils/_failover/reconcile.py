# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One reconcile cycle of failover reservations, as a pure function of its inputs.

Steps, in order:
  1. drop allocations whose VM is gone or has moved (a VM missing from the VM list is kept
     while a hypervisor reports it running on the recorded host);
  2. drop VMs that no longer meet constraints 1-5 (reservations by name, VMs by uuid);
  3. revalidate reservations that are due; invalid ones are deleted with a Ready=False
     condition saying why, valid ones get ``acknowledged_at`` = now;
  4. delete reservations left without allocations;
  5. for each VM short of the slots its flavor requires (largest memory first, at most
     ``max_vms_to_process`` per cycle in a rotating window): join the most shared eligible
     reservation in its zone, else create one on the hypervisor with the most free room, at
     most one new reservation per hypervisor per cycle unless that limit is off; a VM's missing
     slots are chosen together (see placement.search_slots) so an early choice does not strand a later one.
     When they cannot all be found and the VM holds slots already, the slots it requires are
     searched for again as if it held none, its own reservations offered first; a full set
     found so is applied (the VM leaves the reservations the set does not keep, removal reason
     ``REPLACED``, and one left empty is deleted as ``Empty``), else the VM keeps what it holds
     plus what the first search found. No VM loses coverage, and a covered fleet is left as is.
The same inputs give the same result; ``now`` and ``cycle`` are inputs for that reason.
"""
from dataclasses import replace

from ansible_collections.resilient.virt.plugins.module_utils._conditions import READY, make_condition, set_condition
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    DependencyGraph, host_satisfies, remove_ineligible, required_count, trait_needs)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    CycleResult, Deletion, NameAllocator, Removal, Reservation, VMStatus, reservation_size,
    resource_error, vm_fits)
from ansible_collections.resilient.virt.plugins.module_utils._failover.placement import (
    BRANCH_LIMIT, CapacityLedger, HostPicker, Need, ShareQueue, search_slots, select_window)
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time, parse_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error

__all__ = ("stale_allocations", "empty_reservations", "is_due", "find_problem",
           "INVALID_RESOURCES", "HOST_NOT_FOUND", "VM_DOES_NOT_FIT", "run_cycle", "ACTIVE_REASON",
           "EMPTY", "REPLACED")


# -- Allocations whose VM is gone or has moved, and reservations left empty.

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


# -- Periodic check that a reservation still serves every VM allocated to it.

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


ACTIVE_REASON = "ReservationActive"
ACTIVE_MESSAGE = "Failover reservation is active and ready"
EMPTY = "Empty"
EMPTY_MESSAGE = "no VM uses this reservation any more"
REPLACED = "Replaced: the VM could not get all its required slots while holding this one"


def _unique(items, key, what):
    seen = {}
    for index, item in enumerate(items):
        name = getattr(item, key)
        if name in seen:
            raise field_error("%s[%d].%s" % (what, index, key), "%r is used twice (also at index %d); "
                              "every %s must be unique" % (name, seen[name], key))
        seen[name] = index
    return {getattr(item, key): item for item in items}


def run_cycle(hypervisors, vms, reservations, settings, now, cycle=0, running=None):
    """Run one cycle and return a :class:`CycleResult`; the inputs are not modified.

    hypervisors: [Hypervisor]; vms: [VM]; reservations: [Reservation]; settings:
    FailoverSettings; now: epoch seconds; cycle: counter that moves the processing window;
    running: {vm uuid: host} that hypervisors report running (keeps allocations of VMs the
    VM list lacks).
    """
    return _Cycle(hypervisors, vms, reservations, settings, now, cycle, running or {}).run()


class _Cycle:
    def __init__(self, hypervisors, vms, reservations, settings, now, cycle, running):
        self.hv = _unique(hypervisors, "name", "hypervisors")
        self.vms = _unique(vms, "uuid", "vms")
        originals = _unique(reservations, "name", "reservations")
        self.work = {name: replace(res, allocations=dict(res.allocations),
                                   resources=dict(res.resources),
                                   conditions=[dict(c) for c in res.conditions])
                     for name, res in sorted(originals.items())}
        self.settings = settings
        self.now = now
        self.stamp = format_time(now)
        self.cycle = cycle
        self.hosts = dict(running)
        self.hosts.update((uuid, vm.host) for uuid, vm in self.vms.items())
        self.result = CycleResult(reservations=[])
        self.changed = set()
        self.names = NameAllocator(originals)
        self.graph = None
        self.ledger = None

    def run(self):
        self._drop_stale()
        self.graph = DependencyGraph.from_reservations(list(self.work.values()), self.hosts)
        self.ledger = CapacityLedger(self.hv.values(), self.vms.values(), self.work.values())
        self._drop_ineligible()
        self._revalidate()
        self._drop_empty()
        self._assign()
        created = set(self.result.created)
        self.result.changed = sorted(n for n in self.changed if n in self.work and n not in created)
        self.result.reservations = [self.work[n] for n in sorted(self.work)]
        return self.result

    def _touch(self, res):
        res.last_changed = self.stamp
        res.acknowledged_at = None
        self.changed.add(res.name)

    def _apply_removals(self, removals):
        for removal in removals:
            res = self.work[removal.reservation]
            res.allocations.pop(removal.vm, None)
            self._touch(res)
        self.result.removals.extend(removals)

    def _drop_stale(self):
        listed = {uuid: vm.host for uuid, vm in self.vms.items()}
        self._apply_removals(stale_allocations(self.work.values(), listed, self.hosts))

    def _drop_ineligible(self):
        self._apply_removals(remove_ineligible(self.graph, list(self.work), self.hosts))

    def _delete(self, name, reason, message):
        res = self.work.pop(name)
        self.graph.remove_reservation(name)
        self.ledger.give_back(res.host, *reservation_size(res.resources))
        self.result.deleted.append(Deletion(res, reason, message))

    def _revalidate(self):
        interval = self.settings.revalidation_interval
        for name in list(self.work):
            res = self.work[name]
            if not res.allocations or not is_due(res, self.now, interval):
                continue
            problem = find_problem(res, self.hv.get(res.host), self.vms, self.ledger)
            if problem is None:
                res.acknowledged_at = self.stamp
                res.conditions = set_condition(res.conditions, make_condition(
                    READY, "True", ACTIVE_REASON, ACTIVE_MESSAGE, now=self.now))
                self.result.acknowledged += 1
                continue
            res.last_changed = self.stamp
            res.conditions = set_condition(res.conditions, make_condition(
                READY, "False", problem[0], problem[1], now=self.now))
            self._delete(name, *problem)

    def _drop_empty(self):
        for name in empty_reservations(list(self.work.values())):
            self._delete(name, EMPTY, EMPTY_MESSAGE)

    def _zone(self, vm):
        if vm.az:
            return vm.az
        hv = self.hv.get(vm.host)
        return hv.az if hv is not None else ""

    def _assign(self):
        requirements = self.settings.requirements
        needs, status = [], {}
        for uuid in sorted(self.vms):
            vm = self.vms[uuid]
            required = required_count(vm.flavor, requirements)
            held = len(self.graph.reservations_of(uuid))
            if required or held:
                status[uuid] = VMStatus(uuid, vm.host, self._zone(vm), vm.flavor, required, held)
            if required > held:
                needs.append(Need(vm, required, held))
        selected, deferred = select_window(needs, self.settings.max_vms_to_process, self.cycle)
        for need in deferred:
            status[need.vm.uuid].why = ("waiting for a later cycle (max_vms_to_process=%d)"
                                        % self.settings.max_vms_to_process)
        queues = self._share_queues()
        picker = HostPicker(self.hv.values(), self.ledger, self.graph,
                            self.settings.limit_one_new_per_hypervisor)
        for need in selected:
            vm_status = status[need.vm.uuid]
            vm_status.why = self._cover(need, vm_status.az, queues, picker)
            vm_status.held = len(self.graph.reservations_of(need.vm.uuid))
        self.result.processed = len(selected)
        self.result.deferred = len(deferred)
        self.result.vm_status = [status[u] for u in sorted(status)]

    def _share_queues(self):
        queues = {}
        for name, res in self.work.items():
            hv = self.hv.get(res.host)
            if hv is not None:
                queues.setdefault(hv.az, ShareQueue()).add(name, len(res.allocations))
        return queues

    def _cover(self, need, az, queues, picker):
        """Give ``need.vm`` its missing slots; returns why it stays short, or None."""
        vm = need.vm
        if vm.vcpus is None or vm.memory_mb is None:
            return "the VM's vcpus or memory_mb is unknown"
        if not az:
            return "the VM's availability zone is unknown"
        self.graph.add_vm(vm.uuid, vm.host)
        needs = trait_needs(vm.extra_specs)
        queue = queues.setdefault(az, ShareQueue())
        missing = need.required - need.held
        path = self._search(vm, missing, (), az, needs, queue, picker)
        complete = len(path) == missing
        former = sorted(self.graph.reservations_of(vm.uuid))
        if not complete and former:
            fresh = self._search_afresh(vm, need.required, former, az, needs, queue, picker)
            if len(fresh) == need.required:
                kept = [("share", name) for name in former if ("share", name) in fresh]
                self._leave(vm, [name for name in former if ("share", name) not in kept], queue)
                path, complete = [option for option in fresh if option not in kept], True
        for kind, target in path:
            if kind == "share":
                res = self.work[target]
                res.allocations[vm.uuid] = vm.host
                self.graph.link(vm.uuid, target)
                queue.resize(target, len(res.allocations))
                self._touch(res)
                self.result.reused += 1
            else:
                queue.add(self._create(vm, az, target), 1)
                picker.used(target)
        return None if complete else picker.explain(vm, az, needs)

    def _search(self, vm, missing, former, az, needs, queue, picker):
        """Best sequence of at most ``missing`` slot options for ``vm`` (see slot_search)."""
        return search_slots(missing, lambda: self._options(vm, az, needs, queue, picker, former),
                            lambda option: self._try(vm, option, picker),
                            lambda option: self._untry(vm, option, picker))

    def _search_afresh(self, vm, required, former, az, needs, queue, picker):
        """Like :meth:`_search` for ``required`` slots with ``vm`` out of ``former`` meanwhile."""
        for name in former:
            self.graph.unlink(vm.uuid, name)
        path = self._search(vm, required, former, az, needs, queue, picker)
        for name in former:
            self.graph.link(vm.uuid, name)
        return path

    def _leave(self, vm, names, queue):
        """Take ``vm`` out of reservations ``names``, deleting those left empty."""
        for name in names:
            res = self.work[name]
            self.graph.unlink(vm.uuid, name)
            self._apply_removals([Removal(name, vm.uuid, res.allocations[vm.uuid], REPLACED)])
            if res.allocations:
                queue.resize(name, len(res.allocations))
            else:
                queue.remove(name)
                self._delete(name, EMPTY, EMPTY_MESSAGE)

    def _options(self, vm, az, needs, queue, picker, former):
        """Choices for the VM's next slot: ``former`` reservations (in order), shared reservations
        (most shared first), then new."""
        free_of_traits = not needs.required and not needs.forbidden
        for name in former:
            if self._may_join(vm, name, needs, free_of_traits):
                yield "share", name
        offered = 0
        for name in queue:
            if name not in former and self._may_join(vm, name, needs, free_of_traits):
                yield "share", name
                offered += 1
                if offered == BRANCH_LIMIT:
                    break
        host = picker.pick(vm, az, needs)
        if host is not None:
            yield "new", host

    def _may_join(self, vm, name, needs, free_of_traits):
        """True when ``vm`` fits in ``name``, its host has the traits, and 1-5 keep holding."""
        res = self.work[name]
        return vm_fits(vm, res.resources) and (
            free_of_traits or host_satisfies(self.hv[res.host].traits, needs)) \
            and self.graph.can_join(vm.uuid, name)

    def _try(self, vm, option, picker):
        kind, target = option
        if kind == "share":
            self.graph.link(vm.uuid, target)
            return
        self.graph.add_reservation(option, target)
        self.graph.link(vm.uuid, option)
        self.ledger.take(target, vm.vcpus, vm.memory_mb)
        picker.used(target)

    def _untry(self, vm, option, picker):
        kind, target = option
        if kind == "share":
            self.graph.unlink(vm.uuid, target)
            return
        self.graph.remove_reservation(option)
        self.ledger.give_back(target, vm.vcpus, vm.memory_mb)
        picker.unused(target)

    def _create(self, vm, az, host):
        name = self.names.new_name(az, "%s/%s" % (vm.uuid, host))
        res = Reservation(
            name=name, host=host, az=az, resources={"cpu": vm.vcpus, "memory_mb": vm.memory_mb},
            allocations={vm.uuid: vm.host}, creator=self.settings.creator,
            last_changed=self.stamp, acknowledged_at=None,
            conditions=[make_condition(READY, "True", ACTIVE_REASON, ACTIVE_MESSAGE, now=self.now)])
        self.work[name] = res
        self.graph.add_reservation(name, host)
        self.graph.link(vm.uuid, name)
        self.ledger.take(host, vm.vcpus, vm.memory_mb)
        self.result.created.append(name)
        return name
