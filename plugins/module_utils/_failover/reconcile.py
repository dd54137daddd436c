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
     ``max_vms_to_process`` per cycle in a rotating window): join an eligible reservation in its
     zone (or grow one, when packing; see :meth:`_Cycle._options`), else create one on the
     hypervisor with the most free room, at
     most one new reservation per hypervisor per cycle unless that limit is off; a VM's missing
     slots are chosen together (see placement.search_slots) so an early choice does not strand a
     later one; when packing, a VM missing two slots first tries two existing reservations
     together (placement.slot_pairs), and once the limit leaves a VM requiring two or more
     slots short, those after it with its zone and trait needs wait for the next cycle (see
     :meth:`_Cycle._limit_left_short`); a VM requiring two or more slots prefers the choices that
     close the fewest pairs of reservations other VMs could still hold together
     (DependencyGraph.pairs_closed).
     When they cannot all be found and the VM holds slots already, the slots it requires are
     searched for again as if it held none, its own reservations offered first; a full set
     found so is applied (the VM leaves the reservations the set does not keep, removal reason
     ``REPLACED``, and one left empty is deleted as ``Empty``), else the VM keeps what it holds
     plus what the first search found. No VM loses coverage;
  6. when step 5 gave no VM a slot, consolidate: empty the least used reservations into others,
     at most ``max_changes`` moves (removal reason ``CONSOLIDATED``); a VM holding two slots may
     move both (see :meth:`_Cycle._move_both`). A zone whose plan built from nothing holds
     MIGRATION_GAIN less also moves towards that plan (see :meth:`_Cycle._consolidate` and
     migration);
  7. shrink reservations larger than the largest VM they serve.
Each cycle is planned packing, again packing in other orders among VMs of one size when a small
fleet's plan is built from nothing (see ORDERS), and as the plain greedy, and the cheapest plan
kept (see :func:`run_cycle`). The same inputs give the same result; ``now`` and ``cycle`` are
inputs for that reason.
"""
import hashlib
import itertools
import time
from dataclasses import replace
from typing import NamedTuple

from ansible_collections.resilient.virt.plugins.module_utils._conditions import READY, make_condition, set_condition
from ansible_collections.resilient.virt.plugins.module_utils._failover.bounds import lower_bound
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    DependencyGraph, host_satisfies, remove_ineligible, required_count, trait_needs)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    CycleResult, Deletion, NameAllocator, Removal, Reservation, VMStatus, reservation_size,
    resource_error, vm_fits)
from ansible_collections.resilient.virt.plugins.module_utils._failover.migration import progress
from ansible_collections.resilient.virt.plugins.module_utils._failover.placement import (
    BRANCH_LIMIT, PAIR_OPTIONS, CapacityLedger, HostPicker, Need, ZoneIndex, search_slots,
    select_window, slot_pairs)
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time, parse_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import Timeout, field_error

__all__ = ("stale_allocations", "empty_reservations", "is_due", "find_problem",
           "INVALID_RESOURCES", "HOST_NOT_FOUND", "VM_DOES_NOT_FIT", "run_cycle", "ACTIVE_REASON",
           "EMPTY", "REPLACED", "CONSOLIDATED", "WAITING", "PACK", "GREEDY", "PlanningDeadline",
           "plain_greedy", "Target")


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
CONSOLIDATED = "Consolidated: moved to %s"
CONSOLIDATED_MESSAGE = "its VMs moved to other reservations (consolidation)"
WAITING = ("waiting for a later cycle: VM %s, served before it in its zone with the same trait "
           "needs, found the hypervisors it could use already given a new reservation this cycle "
           "(limit_one_new_per_hypervisor)")

PLANNED_WAITING = ("waiting for a later cycle: the hypervisor of a slot planned for it already got "
                   "a new reservation this cycle (limit_one_new_per_hypervisor)")
PACK = "pack"
GREEDY = "greedy"
FOLLOW = "follow"
STRATEGIES = (FOLLOW, PACK, GREEDY)
ORDERS = (4, 40000)
"""A plan built from nothing is packed again in up to 4 other orders among VMs of one size (ties
of ``_Cycle._hardest_first``, broken by a hash of order and uuid instead of the uuid) while all
its packings together ask at most 40,000 join questions: on the benchmark's fleets of 1,000 VMs
some other order often holds less, while from 5,000 VMs on the first order held least on every
seed tried and each packing costs a cycle's time (make bench). A cycle on an existing plan packs
in the first order only, as a reference case expects (conformance: "5 hosts with existing
reservations", at least 4 reservations where another order finds 3)."""

MIGRATION_GAIN = 0.10
"""A zone is moved towards the plan built from nothing only when that plan holds at least 10 %
less memory than the zone holds: moving churns reservations, and the zone holds more on the way.
At 5 %, settled plans this planner built from nothing moved too, on some benchmark seeds, for a
little less memory in the end and far more on the way."""


class _Dominated(Exception):
    """The plain greedy, planning from nothing, already holds in every zone at least the memory
    and reservations, and misses at least the slots, of the figures it was given: it can only
    hold more. ``figures``: its own so far, {zone: [memory_mb, reservations, slots missing]}."""

    def __init__(self, figures):
        super().__init__()
        self.figures = figures


class PlanningDeadline:
    """The time a cycle may plan for: ``seconds`` from its start (``resilience.deadline``).

    :meth:`check` raises Timeout naming the deadline once it has passed; the planning loops
    call it at every join question and every VM, reservation or move they take up, so a
    cycle never runs on past it, and nothing of it is stored."""

    def __init__(self, seconds, clock=time.monotonic):
        self.seconds = float(seconds)
        self.clock = clock
        self.at = clock() + self.seconds

    def check(self):
        if self.clock() >= self.at:
            raise Timeout("planning the failover cycle took longer than resilience.deadline "
                          "(%gs) and stopped; nothing was stored. Give a longer deadline, or "
                          "fewer VMs a cycle with max_vms_to_process" % self.seconds,
                          details={"deadline": self.seconds})


def _unique(items, key, what):
    seen = {}
    for index, item in enumerate(items):
        name = getattr(item, key)
        if name in seen:
            raise field_error("%s[%d].%s" % (what, index, key), "%r is used twice (also at index %d); "
                              "every %s must be unique" % (name, seen[name], key))
        seen[name] = index
    return {getattr(item, key): item for item in items}


def run_cycle(hypervisors, vms, reservations, settings, now, cycle=0, running=None,
              deadline=None):
    """Run one cycle and return a :class:`CycleResult`; the inputs are not modified.

    hypervisors: [Hypervisor]; vms: [VM]; reservations: [Reservation]; settings:
    FailoverSettings; now: epoch seconds; cycle: counter that moves the processing window;
    running: {vm uuid: host} that hypervisors report running (keeps allocations of VMs the
    VM list lacks); deadline: seconds the whole cycle may plan for (every strategy, order and
    the target), None for no limit: past it the cycle raises Timeout (see PlanningDeadline).

    The cycle is planned packing, again packing in other orders as ORDERS says, and as the
    plain greedy; the kept plan holds no more memory and no more reservations, and leaves no
    more slots missing, than the greedy's (see :func:`_cheapest`). When packing gives no VM a
    slot and leaves none short, the others would plan the same and are not run.

    In such a cycle (with ``max_changes`` > 0 and every VM processed each cycle), the plan one
    cycle builds for the fleet from nothing, without the limit per hypervisor, is built as a
    target, and each zone where it holds MIGRATION_GAIN less moves towards it
    (:meth:`_Cycle._consolidate`, :meth:`_Cycle._migrate`).
    """
    clock = None if deadline is None else PlanningDeadline(deadline)

    def plan(strategy, order=0, stop=None, target=None):
        planner = _Cycle(hypervisors, vms, reservations, settings, now, cycle, running or {},
                         strategy, stop, order, target, clock)
        return planner, planner.run()

    target = None
    if not settings.max_vms_to_process:
        built = []

        def target(current):
            if not built:  # the same for every plan of the cycle
                built.append(_new_plan(hypervisors, vms, settings, now, running, clock, current))
            return built[0]
    best = _cheapest(plan, reservations, target)
    zones = {hv.name: hv.az for hv in hypervisors}
    best.lower_bound = lower_bound(vms, settings.requirements,
                                   lambda vm: vm.az or zones.get(vm.host, ""))
    return best


def _cheapest(plan, reservations, target=None):
    """The plan a cycle keeps: of the packings (given ``target``, see :class:`_Cycle`; in other
    orders, see ORDERS) and, planning from nothing, the plain greedy, those no worse than the
    greedy (:func:`_no_worse`), and of those the least :func:`_cost` (the first planned on a
    tie, the greedy last). ``plan(strategy, order=, stop=, target=)`` gives (planner, result).
    When packing gives no VM a slot and leaves none short, its plan is kept alone."""
    packs, greedy = _candidates(plan, reservations, target)
    if greedy is None:
        return min(packs, key=_cost)
    fleet = {"": [sum(figures[i] for figures in greedy.values()) for i in range(3)]}
    return min([result for result in packs if _no_worse(_by_zone(result, ""), fleet)] or packs,
               key=_cost)


def _candidates(plan, reservations, target=None, current=None):
    """([results], the greedy's {zone: figures} (see :func:`_by_zone`)): the packings', then
    the greedy's when it ran to the end. The greedy plans only from nothing (no
    ``reservations``), and stops once it holds, in every zone, at least what the best packing
    holds and what ``current`` ({zone: figures}) does (see :class:`_Dominated`): its figures
    so far are then given. None for the greedy when it did not run."""
    planner, result = plan(PACK, target=target)
    if planner.settled:
        return [result], None
    if planner.follows and not _complete_and_no_worse(result, planner.target_plan.greedy):
        return [plan(FOLLOW, target=target)[1]], None
    packs = [result] + [plan(PACK, order)[1] for order
                        in range(1, 1 + _other_orders(planner, reservations))]
    if GREEDY not in STRATEGIES or reservations:
        return packs, None
    stop = _by_zone(min(packs, key=_cost))
    for zone, figures in (current or {}).items():
        stop[zone] = [max(pair) for pair in zip(stop.get(zone, (0, 0, 0)), figures)]
    try:
        greedy = plan(GREEDY, stop=stop)[1]
    except _Dominated as stopped:
        return packs, stopped.figures
    return packs + [greedy], _by_zone(greedy)


def _complete_and_no_worse(result, greedy):
    """True when ``result`` leaves no VM short and holds, over the fleet, no more memory and
    no more reservations than the plain greedy's figures ``greedy`` ({zone: figures})."""
    summary = result.summary
    return not summary["slots_missing"] and \
        summary["reserved_memory_mb"] <= sum(figures[0] for figures in greedy.values()) and \
        summary["reservations"] <= sum(figures[1] for figures in greedy.values())


def _by_zone(result, only=None):
    """{zone: [memory_mb, reservations, slots missing]} of ``result``; with ``only``, the whole
    fleet under that key."""
    figures = {}
    for res in result.reservations:
        held = figures.setdefault(res.az if only is None else only, [0, 0, 0])
        held[0] += reservation_size(res.resources)[1]
        held[1] += 1
    for status in result.vm_status:
        figures.setdefault(status.az if only is None else only, [0, 0, 0])[2] += status.short_by
    return figures


def _within(figures, than):
    """True when ``figures`` ({zone: [memory, reservations, missing]}) are nowhere above
    ``than``'s, in any zone and any of the three."""
    return all(a <= b for zone, held in figures.items()
               for a, b in zip(held, than.get(zone, (0, 0, 0))))


def _no_worse(figures, greedy):
    """True when, in every zone of ``figures`` ({zone: [memory, reservations, missing]}), the
    plan leaves fewer slots missing than ``greedy``, or as many holding no more memory and no
    more reservations (a plan better in one of those and worse in the other is worse)."""
    for zone, (memory, count, missing) in figures.items():
        most = greedy.get(zone, (0, 0, 0))
        if missing > most[2] or (missing == most[2] and (memory > most[0] or count > most[1])):
            return False
    return True


class Target(NamedTuple):
    """The plan a settled cycle may move towards: ``reservations``, and per zone the slots
    that plan leaves missing and the plain greedy's figures (memory_mb, reservations, slots
    missing; its figures so far when it stopped, see :class:`_Dominated`)."""

    reservations: list
    missing: dict
    greedy: dict
    why: dict = {}


def _new_plan(hypervisors, vms, settings, now, running, clock=None, current=None):
    """The :class:`Target` for the fleet built from nothing, every VM at once and without the
    limit per hypervisor, within the cycle's ``clock`` (a PlanningDeadline or None): in each
    zone the part of the packings' or the greedy's plan of least :func:`_cost` among those no
    worse there than the greedy's. ``current``: {zone: figures} of the plan now."""
    free = replace(settings, limit_one_new_per_hypervisor=False, max_vms_to_process=0)

    def plan(strategy, order=0, stop=None, target=None):
        planner = _Cycle(hypervisors, vms, [], free, now, 0, running or {}, strategy, stop,
                         order, clock=clock)
        return planner, planner.run()

    results, greedy = _candidates(plan, [], current=current)
    figures = [_by_zone(result) for result in results]
    greedy = greedy or figures[0]
    slots = []
    for result in results:
        given = slots.append({}) or slots[-1]
        for status in result.vm_status:
            given[status.az] = given.get(status.az, 0) + min(status.held, status.required)
    reservations, missing, why = [], {}, {}
    for zone in sorted(set().union(*figures)):
        parts = []
        for index, held in enumerate(figures):
            memory, count, short = held.get(zone, [0, 0, 0])
            if _no_worse({zone: [memory, count, short]}, greedy):
                given = slots[index].get(zone, 0)
                parts.append((memory / given if given else 0, short, count, index))
        index = min(parts)[3] if parts else 0
        reservations += [res for res in results[index].reservations if res.az == zone]
        missing[zone] = figures[index].get(zone, [0, 0, 0])[2]
        why.update((status.uuid, status.why) for status in results[index].vm_status
                   if status.az == zone and status.why)
    return Target(reservations, missing, greedy, why)


def _other_orders(planner, reservations):
    """How many other orders to plan packing in after ``planner``'s first (see ORDERS)."""
    if reservations or planner.result.processed < 2:
        return 0
    return max(0, min(ORDERS[0], ORDERS[1] // max(1, planner.checks) - 1))


def _cost(result):
    """Memory held per slot given, then slots missing, then reservations."""
    summary = result.summary
    slots = sum(min(s.held, s.required) for s in result.vm_status)
    return (summary["reserved_memory_mb"] / slots if slots else 0, summary["slots_missing"],
            summary["reservations"])


class _Cycle:
    def __init__(self, hypervisors, vms, reservations, settings, now, cycle, running, strategy,
                 stop=None, order=0, target=None, clock=None):
        self.hv = _unique(hypervisors, "name", "hypervisors")
        self.vms = _unique(vms, "uuid", "vms")
        originals = _unique(reservations, "name", "reservations")
        self.work = {name: replace(res, allocations=dict(res.allocations),
                                   resources=dict(res.resources),
                                   conditions=[dict(c) for c in res.conditions])
                     for name, res in sorted(originals.items())}
        self.settings = settings
        self.strategy = strategy
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
        self.zones = {}
        self.status = {}
        self.required = {uuid: required_count(vm.flavor, settings.requirements)
                         for uuid, vm in self.vms.items()}
        self.multi = {uuid: count > 1 for uuid, count in self.required.items()}
        self.multi_on_host = {}  # hypervisor -> its VMs that require two or more slots
        for uuid, vm in self.vms.items():
            if self.multi[uuid]:
                self.multi_on_host[vm.host] = self.multi_on_host.get(vm.host, 0) + 1
        self.serves_multi = {}
        self.checks = 0  # join questions asked (_may_join, _may_grow)
        self.stop = stop  # {zone: figures} past which the plain greedy stops (see _Dominated)
        self.held = {}  # with stop: {zone: [memory_mb, reservations, slots missing]} so far
        self.order = order
        self.target = target  # (figures now) -> the Target to move towards, built when needed
        self.target_plan = None  # its result, once built
        self.settled = False  # step 5 gave no VM a slot and left none short
        self.protected = set()  # reservations realizing the target: consolidation leaves them
        self.clock = clock  # PlanningDeadline or None
        self.planned = {}  # following the target: {uuid: ([target reservations], realized)}
        self.follows = False  # the plan is part of the target (see _follows_target)
        self.trait_hosts = {}  # (zone, trait needs) -> the hypervisors there with those traits

    def run(self):
        self._drop_stale()
        self.graph = DependencyGraph.from_reservations(list(self.work.values()), self.hosts)
        self.ledger = CapacityLedger(self.hv.values(), self.vms.values(), self.work.values())
        self._drop_ineligible()
        self._revalidate()
        self._drop_empty()
        self.follows = self._follows_target()
        self._assign()
        self.settled = not (self.result.created or self.result.reused) and all(
            len(self.graph.reservations_of(uuid)) >= status.required
            for uuid, status in self.status.items())
        self._consolidate()
        self._fit_sizes()
        for uuid, vm_status in self.status.items():
            vm_status.held = len(self.graph.reservations_of(uuid))
        self.result.vm_status = [self.status[u] for u in sorted(self.status)]
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
        hv = self.hv.get(res.host)
        if hv is not None and hv.az in self.zones:
            self.zones[hv.az].remove(name)
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
                    READY, True, ACTIVE_REASON, ACTIVE_MESSAGE, now=self.now))
                self.result.acknowledged += 1
                continue
            res.last_changed = self.stamp
            res.conditions = set_condition(res.conditions, make_condition(
                READY, False, problem[0], problem[1], now=self.now))
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
        needs, status = [], {}
        for uuid in sorted(self.vms):
            vm = self.vms[uuid]
            required = self.required[uuid]
            held = len(self.graph.reservations_of(uuid))
            if required or held:
                status[uuid] = VMStatus(uuid, vm.host, self._zone(vm), vm.flavor, required, held)
            if required > held:
                needs.append(Need(vm, required, held))
        selected, deferred = select_window(needs, self.settings.max_vms_to_process, self.cycle)
        if self.strategy in (PACK, FOLLOW):
            selected.sort(key=self._hardest_first)
        for need in deferred:
            status[need.vm.uuid].why = ("waiting for a later cycle (max_vms_to_process=%d)"
                                        % self.settings.max_vms_to_process)
            self._held(status[need.vm.uuid].az)[2] += need.required - need.held
        self.zones = self._zone_indexes()
        picker = HostPicker(self.hv.values(), self.ledger, self.graph,
                            self.settings.limit_one_new_per_hypervisor)
        waiting = {}  # (zone, trait needs) -> the VM requiring 2+ slots the limit left short there
        for need in selected:
            self._check_time()
            vm_status = status[need.vm.uuid]
            pool = (vm_status.az, trait_needs(need.vm.extra_specs))
            if pool in waiting and self.multi[need.vm.uuid]:
                vm_status.why = WAITING % waiting[pool]
                continue
            vm_status.why = self._cover(need, vm_status.az, pool[1], picker)
            vm_status.held = len(self.graph.reservations_of(need.vm.uuid))
            if self.stop is not None:
                self._held(vm_status.az)[2] += vm_status.short_by
                if _within(self.stop, self.held):
                    raise _Dominated(self.held)
            if vm_status.why is not None and self._limit_left_short(need.vm, pool, picker):
                waiting[pool] = need.vm.uuid
        self.result.processed = len(selected)
        self.result.deferred = len(deferred)
        self.status = status

    def _held(self, zone):
        return self.held.setdefault(zone, [0, 0, 0])

    def _limit_left_short(self, vm, pool, picker):
        """True, when packing, if ``vm`` requires two or more slots and (just served, still
        short) would have got a new reservation on a hypervisor the one-new-per-hypervisor limit
        closed this cycle. The VMs requiring two or more slots after it with the same zone and
        trait needs (``pool``), none larger, then wait for the next cycle rather than take the
        reservations built for the larger VMs: sharing them, they bar by rule 5 the larger VMs
        that come back for their missing slots, and the plan ends holding more (make bench, the
        fleet with traits). One-slot VMs do not wait: on the benchmark's fleets their waiting
        changed no settled plan and cost coverage in the first cycle."""
        return self.strategy == PACK and self.multi[vm.uuid] and vm.vcpus is not None \
            and vm.memory_mb is not None and bool(pool[0]) \
            and picker.closed_to(vm, pool[0], pool[1])

    def _hardest_first(self, need):
        """Largest first; among VMs of one size, those on the hypervisors running the most VMs
        that require two or more slots (rules 4 and 5 keep those VMs' slots apart, so they
        have the fewest choices left when served late); then by uuid, or for another order by a
        hash of order and uuid."""
        vm = need.vm
        last = vm.uuid if not self.order else hashlib.sha256(
            ("%d %s" % (self.order, vm.uuid)).encode()).digest()
        return -(vm.memory_mb or 0), -self.multi_on_host.get(vm.host, 0), last

    def _zone_indexes(self):
        zones = {}
        for name, res in sorted(self.work.items()):
            self.serves_multi[name] = any(self.multi.get(uuid, False) for uuid in res.allocations)
            hv = self.hv.get(res.host)
            if hv is not None:
                zones.setdefault(hv.az, ZoneIndex()).add(
                    name, reservation_size(res.resources)[1], len(res.allocations))
        return zones

    def _reindex(self, name):
        res = self.work[name]
        index = self.zones.get(self.hv[res.host].az)
        if index is not None:
            index.update(name, reservation_size(res.resources)[1], len(res.allocations))

    def _cover(self, need, az, needs, picker):
        """Give ``need.vm`` (trait needs ``needs``) its missing slots; returns why it stays
        short, or None."""
        vm = need.vm
        if vm.vcpus is None or vm.memory_mb is None:
            return "the VM's vcpus or memory_mb is unknown"
        if not az:
            return "the VM's availability zone is unknown"
        self.graph.add_vm(vm.uuid, vm.host)
        index = self.zones.setdefault(az, ZoneIndex())
        missing = need.required - need.held
        if self.strategy == GREEDY:
            return self._cover_plainly(vm, missing, az, needs, index, picker)
        if self.strategy == FOLLOW:
            why = self._cover_as_planned(vm, az, needs, picker)
            if why is None or why == PLANNED_WAITING:
                return why
            missing = need.required - len(self.graph.reservations_of(vm.uuid))
            need = Need(vm, need.required, need.required - missing)
        path = None
        if missing == 2 and self.strategy in (PACK, FOLLOW):
            path = self._pair(vm, needs, index, picker, az)
        if path is None:
            path = self._search(vm, missing, (), needs, index, picker, az)
        complete = len(path) == missing
        former = sorted(self.graph.reservations_of(vm.uuid))
        if not complete and former:
            fresh = self._search_afresh(vm, need.required, former, needs, index, picker, az)
            if len(fresh) == need.required:
                kept = [("share", name) for name in former if ("share", name) in fresh]
                self._leave(vm, [name for name in former if ("share", name) not in kept])
                path, complete = [option for option in fresh if option not in kept], True
        for kind, target in path:
            if kind == "new":
                self._create(vm, az, target)
                picker.used(target)
                continue
            self._join(vm, target, grow=kind == "grow")
            self.result.reused += 1
        return None if complete else picker.explain(vm, az, needs)

    def _cover_plainly(self, vm, missing, az, needs, index, picker):
        """The plain greedy: each of ``vm``'s ``missing`` slots in the reservation serving the
        most VMs that it may join as it is (the oldest on a tie), else in a new one on the
        least loaded hypervisor it may use (HostPicker.least_loaded); why it stays short, or
        None."""
        free_of_traits = not needs.required and not needs.forbidden
        for _slot in range(missing):
            self._check_time()
            name = next((name for name in index.shared()
                         if self._may_join(vm, name, needs, free_of_traits)), None)
            if name is not None:
                self._join(vm, name, grow=False)
                self.result.reused += 1
                continue
            host = picker.least_loaded(vm, az, needs)
            if host is None:
                return picker.explain(vm, az, needs)
            self._create(vm, az, host)
            picker.used(host)
        return None

    def _current_figures(self):
        """{zone: [memory once fitted, reservations, 0]} of the plan now (the target's greedy
        stops once it holds that much, see :class:`_Dominated`)."""
        current = {}
        for res in self.work.values():
            current.setdefault(self._zone_of(res), []).append(res)
        return {az: [self._fitted_memory(held), len(held), 0] for az, held in current.items()}

    def _follows_target(self):
        """True, when packing in the first order with a target, if the plan (after steps 1-4)
        is part of the target: every reservation realizes one of the target's, and every VM
        holds realizations of its target reservations only (see migration.progress). The cycle
        then grows the plan along the target (:meth:`_cover_as_planned`) instead of packing:
        a part of a valid plan is valid and fits where the whole plan fits, so the plan settles
        on the target however many cycles the one-new-per-hypervisor limit spreads it over."""
        if self.strategy not in (PACK, FOLLOW) or self.order or self.target is None or \
                FOLLOW not in STRATEGIES:
            return False
        if self.target_plan is None:
            self.target_plan = self.target(self._current_figures())
        targets, current = {}, {}
        for res in self.target_plan.reservations:
            targets.setdefault(res.az, []).append(res)
        for res in self.work.values():
            current.setdefault(self._zone_of(res), []).append(res)
        memory = {uuid: vm.memory_mb or 0 for uuid, vm in self.vms.items()}
        self.planned = {}
        for az in set(targets) | set(current):
            held = current.get(az, [])
            state = progress(targets.get(az, []), held, memory)
            if len(state.realized) < len(held):
                return False
            owner = {name: target for target, name in state.realized.items()}
            for res in held:
                for uuid in res.allocations:
                    if owner[res.name] not in state.targets.get(uuid, ()):
                        return False
            by_name = {res.name: res for res in targets.get(az, [])}
            for uuid, names in state.targets.items():
                self.planned[uuid] = ([by_name[name] for name in names], state.realized)
        return True

    def _cover_as_planned(self, vm, az, needs, picker):
        """Give ``vm`` the target reservations it does not hold yet: join the reservation
        realizing one (grown to the target's size when smaller), or create it on the target's
        hypervisor, unless that hypervisor already got a new reservation this cycle (with the
        limit): the VM then waits for a later cycle for that slot. Why it stays short, or
        None."""
        slots, realized = self.planned.get(vm.uuid, ([], {}))
        held = self.graph.reservations_of(vm.uuid)
        waits = False
        for res in slots:
            self._check_time()
            name = realized.get(res.name)
            if name is not None:
                if name in held:
                    continue
                if self._has_room(res.host, _growth(self.work[name], vm)) and \
                        self.graph.can_join(vm.uuid, name):
                    self._join(vm, name, grow=True)
                    self.result.reused += 1
                continue
            if picker.is_closed(res.host):
                waits = True
                continue
            if not self._has_room(res.host, reservation_size(res.resources)) or \
                    not self.graph.new_slot_allowed(vm.uuid, res.host):
                continue
            name = res.name if self.names.claim(res.name) else None
            realized[res.name] = self._create(vm, az, res.host, dict(res.resources), name)
            picker.used(res.host)
        if len(self.graph.reservations_of(vm.uuid)) >= self.required[vm.uuid]:
            return None
        return PLANNED_WAITING if waits else "short in the target"

    def _join(self, vm, name, grow):
        """Add ``vm`` to reservation ``name``, grown to fit it first when ``grow``."""
        res = self.work[name]
        if grow:
            self._grow(res, vm)
        res.allocations[vm.uuid] = vm.host
        self.graph.link(vm.uuid, name)
        self._reindex(name)
        self._touch(res)

    def _search(self, vm, missing, former, needs, index, picker, az):
        """Best sequence of at most ``missing`` slot options for ``vm`` (see search_slots).

        Each option is on a hypervisor of the VM's zone with its traits (or of a ``former``
        reservation) other than its own and its slot hosts (rules 1 and 2), so no sequence is
        longer than those hypervisors: the search looks for no more slots than that. Asked for
        more, it would find nothing longer, yet try every branch (up to BRANCH_LIMIT a slot)
        before giving up, in time exponential in the slots a zone cannot give. The sequence
        found is the same: the search keeps the first of the greatest length it reaches."""
        if missing > 2:  # a search of one or two slots stays as it is, however short
            missing = min(missing, self._hosts_left(vm, former, needs, az))
        return search_slots(missing,
                            lambda: self._options(vm, needs, index, picker, az, former),
                            lambda option: self._try(vm, option, picker),
                            lambda option: self._untry(vm, option, picker))

    def _hosts_left(self, vm, former, needs, az):
        """How many hypervisors might still hold a slot of ``vm`` (trait needs ``needs``, zone
        ``az``): those of its zone with its traits and those of its ``former`` reservations,
        less its own host and the hosts of the slots it holds."""
        key = (az, needs)
        hosts = self.trait_hosts.get(key)
        if hosts is None:
            hosts = self.trait_hosts[key] = frozenset(
                hv.name for hv in self.hv.values() if hv.az == az and host_satisfies(hv.traits, needs))
        left = set(hosts)
        left.update(self.work[name].host for name in former)
        left.discard(vm.host)
        left.difference_update(self.graph.slot_hosts(vm.uuid))
        return len(left)

    def _pair(self, vm, needs, index, picker, az):
        """Two existing reservations ``vm`` may take together (see placement.slot_pairs), or
        None."""
        return self._first_pair(vm, needs, list(itertools.islice(
            self._options(vm, needs, index, picker, az, (), new=False), PAIR_OPTIONS)), picker)

    def _first_pair(self, vm, needs, options, picker=None):
        """The first of ``options``' pairs (placement.slot_pairs) that ``vm`` may take together,
        or None; the graph and ledger are left as they were."""
        free_of_traits = not needs.required and not needs.forbidden
        for first, second in slot_pairs(options, lambda option: self.work[option[1]].host,
                                        lambda option: self.graph.hosts_at(option[1]),
                                        self._closes_a_triangle,
                                        lambda option: self.graph.pairs_closed(vm.host, option[1])):
            self._try(vm, first, picker)
            allowed = (self._may_join if second[0] == "share" else self._may_grow)(
                vm, second[1], needs, free_of_traits)
            self._untry(vm, first, picker)
            if allowed:
                return [first, second]
        return None

    def _closes_a_triangle(self, first, second):
        """True when options ``first`` and ``second`` each serve one VM alone and those two VMs
        share a third reservation. Such a pair is left to the slot search (the VM takes the
        first and a new one), as the reference system does: its case "5 VMs on 5 hosts with
        n=2" expects five reservations or more, where closing triangles holds four."""
        one, two = self.graph.members(first[1]), self.graph.members(second[1])
        if len(one) != 1 or len(two) != 1:
            return False
        (sole,), (other,) = one, two
        return not self.graph.reservations_of(sole).isdisjoint(self.graph.reservations_of(other))

    def _search_afresh(self, vm, required, former, needs, index, picker, az):
        """Like :meth:`_search` for ``required`` slots with ``vm`` out of ``former`` meanwhile."""
        for name in former:
            self.graph.unlink(vm.uuid, name)
        path = self._search(vm, required, former, needs, index, picker, az)
        for name in former:
            self.graph.link(vm.uuid, name)
        return path

    def _leave(self, vm, names):
        """Take ``vm`` out of reservations ``names``, deleting those left empty."""
        for name in names:
            res = self.work[name]
            self.graph.unlink(vm.uuid, name)
            self._apply_removals([Removal(name, vm.uuid, res.allocations[vm.uuid], REPLACED)])
            self._reindex_or_delete(name, EMPTY_MESSAGE)

    def _reindex_or_delete(self, name, message):
        """After VMs left reservation ``name``: index it again, or delete it (``message``) when
        none is left."""
        if self.work[name].allocations:
            self._reindex(name)
        else:
            self._delete(name, EMPTY, message)

    def _options(self, vm, needs, index, picker, az, former, new=True):
        """Choices for the VM's next slot, best first: ``former`` reservations (in order), then
        shared reservations, then (with ``new``) a new reservation.

        Packing offers those :meth:`_joinable` gives, then reservations of the VM's own kind
        that can grow to fit it, the least growth first (the plain greedy asks none:
        :meth:`_cover_plainly`)."""
        self._check_time()  # once per slot the search looks for, join questions or not
        free_of_traits = not needs.required and not needs.forbidden
        for name in former:
            if self._may_join(vm, name, needs, free_of_traits):
                yield "share", name
        for name in self._joinable(vm, needs, index, former):
            yield "share", name
        multi = self.multi[vm.uuid]
        for name in index.smaller(vm.memory_mb, spread=multi):
            if name not in former and self.serves_multi[name] == multi \
                    and self._may_grow(vm, name, needs, free_of_traits):
                yield "grow", name
        if not new:
            return
        host = picker.pick(vm, az, needs)
        if host is not None:
            yield "new", host

    def _joinable(self, vm, needs, index, skip):
        """Reservations of ``index`` that ``vm`` may join as it is under packing, best first,
        leaving out the names in ``skip``: the smallest size it fits first; within a size the
        most shared first for a one-slot VM; for the others the least shared of those already
        shared first (few sharers leave room for their next slot), single-member ones last.

        Those of the VM's own kind (serving VMs that require two or more slots, or not) come
        first: a one-slot VM shares with a VM of nearly every hypervisor, and constraint 5 would
        then bar the members of a reservation serving two-slot VMs from many second slots. A
        one-slot VM then gets the others: joining one as it is holds nothing more, where growing
        or opening one does.

        For a VM requiring two or more slots, the first BRANCH_LIMIT of these (the choices the
        slot search tries) are reordered, those closing the fewest pairs first
        (DependencyGraph.pairs_closed), so that pairs stay open for the VMs served after it."""
        free_of_traits = not needs.required and not needs.forbidden
        multi = self.multi[vm.uuid]
        kinds = (True, False) if multi else (False, True)
        names = (name for kind in kinds for name in index.fitting(vm.memory_mb or 0, spread=multi)
                 if name not in skip and self.serves_multi.get(name) == kind
                 and self._may_join(vm, name, needs, free_of_traits))
        if multi:
            first = list(itertools.islice(names, BRANCH_LIMIT))
            first.sort(key=lambda name: self.graph.pairs_closed(vm.host, name))
            yield from first
        yield from names

    def _count_check(self):
        self.checks += 1
        self._check_time()

    def _check_time(self):
        """Timeout once the cycle's deadline has passed (see PlanningDeadline)."""
        if self.clock is not None:
            self.clock.check()

    def _may_join(self, vm, name, needs, free_of_traits):
        """True when ``vm`` fits in ``name``, its host has the traits, and 1-5 keep holding."""
        self._count_check()
        res = self.work[name]
        return vm_fits(vm, res.resources) and (
            free_of_traits or host_satisfies(self.hv[res.host].traits, needs)) \
            and self.graph.can_join(vm.uuid, name)

    def _may_grow(self, vm, name, needs, free_of_traits):
        """True when ``name`` can grow to fit ``vm`` on its host and ``vm`` may then join it."""
        self._count_check()
        res = self.work[name]
        if resource_error(res.resources) or \
                not (free_of_traits or host_satisfies(self.hv[res.host].traits, needs)):
            return False
        more_cpu, more_mem = _growth(res, vm)
        free_cpu, free_mem = self.ledger.free(res.host)
        return more_cpu <= free_cpu and more_mem <= free_mem and self.graph.can_join(vm.uuid, name)

    def _grow(self, res, vm):
        more_cpu, more_mem = _growth(res, vm)
        self.ledger.take(res.host, more_cpu, more_mem)
        res.resources["cpu"] = res.resources.get("cpu", 0) + more_cpu
        res.resources["memory_mb"] = res.resources.get("memory_mb", 0) + more_mem

    def _try(self, vm, option, picker):
        kind, target = option
        if kind == "share":
            self.graph.link(vm.uuid, target)
        elif kind == "grow":
            self.graph.link(vm.uuid, target)
            self.ledger.take(self.work[target].host, *_growth(self.work[target], vm))
        else:
            self.graph.add_reservation(option, target)
            self.graph.link(vm.uuid, option)
            self.ledger.take(target, vm.vcpus, vm.memory_mb)
            picker.used(target)

    def _untry(self, vm, option, picker):
        kind, target = option
        if kind == "share":
            self.graph.unlink(vm.uuid, target)
        elif kind == "grow":
            self.graph.unlink(vm.uuid, target)
            self.ledger.give_back(self.work[target].host, *_growth(self.work[target], vm))
        else:
            self.graph.remove_reservation(option)
            self.ledger.give_back(target, vm.vcpus, vm.memory_mb)
            picker.unused(target)

    def _create(self, vm, az, host, resources=None, name=None):
        """A new reservation on ``host`` for ``vm``, of its size unless ``resources`` say,
        named ``name`` (already claimed) or a new name."""
        name = name or self.names.new_name(az, "%s/%s" % (vm.uuid, host))
        resources = resources or {"cpu": vm.vcpus, "memory_mb": vm.memory_mb}
        res = Reservation(
            name=name, host=host, az=az, resources=resources,
            allocations={vm.uuid: vm.host}, creator=self.settings.creator,
            last_changed=self.stamp, acknowledged_at=None,
            conditions=[make_condition(READY, True, ACTIVE_REASON, ACTIVE_MESSAGE, now=self.now)])
        self.work[name] = res
        self.graph.add_reservation(name, host)
        self.graph.link(vm.uuid, name)
        self.ledger.take(host, *reservation_size(resources))
        self.zones.setdefault(az, ZoneIndex()).add(name, reservation_size(resources)[1], 1)
        self.serves_multi[name] = self.multi[vm.uuid]
        self.result.created.append(name)
        if self.stop is not None:
            held = self._held(az)
            held[0] += reservation_size(resources)[1]
            held[1] += 1
        return name

    # -- consolidation: empty the least used reservations into others, then fit sizes to VMs.

    def _consolidate(self):
        """Move the VMs of the least used reservations into other reservations they fit in as
        they are, and delete the emptied ones, at most ``max_changes`` moves per cycle, in a
        cycle that gave no VM a slot (a settled plan). A VM holding two slots that has no other
        place for the one being emptied may move both (:meth:`_move_both`); its other
        reservation, left empty, is deleted too. A move gives the VM its new slot before taking
        the old one, in the same cycle's result.

        With a target, the reservations realizing it in the zones moving towards it (see
        :meth:`_moving_zones`) are left as they are; then each zone still moving once
        consolidated moves VMs towards it (:meth:`_migrate`) with the rest of the budget."""
        if self.result.created or self.result.reused:
            return  # the plan is still growing: consolidate it once a cycle leaves it settled
        budget = self.settings.max_changes
        moving = self._moving_zones() if self.target is not None and self.settled and budget \
            else {}
        self.protected = {name for _target, state in moving.values()
                          for name in state.realized.values()}
        order = sorted(self.work.values(), key=lambda r: (
            len(r.allocations), reservation_size(r.resources)[1], r.name))
        received = set()  # a reservation that took VMs this cycle is not emptied in it
        for res in order:
            self._check_time()
            members = sorted(res.allocations)
            if res.name not in self.work or res.name in received or not members or \
                    len(members) > budget or res.name in self.protected:
                continue
            if any(uuid not in self.vms for uuid in members):
                continue
            moves = self._plan_emptying(res, members, budget)
            if moves is None:
                continue
            budget -= len(moves)
            left = set()
            for uuid, source, target in moves:
                received.add(target)
                into, out = self.work[target], self.work[source]
                into.allocations[uuid] = out.allocations.pop(uuid)
                self._touch(into)
                self._reindex(target)
                self.result.removals.append(Removal(source, uuid, into.allocations[uuid],
                                                    CONSOLIDATED % target))
                if source != res.name:
                    left.add(source)
            self.result.moved += len(moves)
            self._delete(res.name, EMPTY, CONSOLIDATED_MESSAGE)
            for name in sorted(left):
                if self.work[name].allocations:
                    self._touch(self.work[name])
                    self._reindex(name)
                else:
                    self._delete(name, EMPTY, CONSOLIDATED_MESSAGE)
        if moving:
            created_on = set()
            for az, (target, state) in sorted(self._moving_zones().items()):
                if az in moving:  # still moving once consolidated
                    budget = self._migrate(az, target, state, budget, created_on)

    def _zone_of(self, res):
        hv = self.hv.get(res.host)
        return hv.az if hv is not None else None

    # -- migration: move a zone whose new plan holds less towards it (see migration).

    def _moving_zones(self):
        """{zone: (target reservations, migration.Progress)} of the zones that move towards
        the target: it leaves no slot of the zone missing, some VM has not moved yet, and it
        holds MIGRATION_GAIN less memory than the zone (once step 7 has shrunk its
        reservations), or the fleet holds more memory or more reservations than the plain
        greedy's plan, covering every VM, does and the zone holds more of either than the
        greedy's there. The target fits on the hypervisors as they are without the zone's
        reservations, so each target reservation finds room once the reservations realizing
        none are given back; until then a VM may wait."""
        current = {}
        for res in self.work.values():
            current.setdefault(self._zone_of(res), []).append(res)
        if self.target_plan is None:
            self.target_plan = self.target(self._current_figures())
        plan = self.target_plan
        targets = {}
        for res in plan.reservations:
            targets.setdefault(res.az, []).append(res)
        fitted = {az: self._fitted_memory(held) for az, held in current.items()}
        greedy = plan.greedy
        covered = not any(figures[2] for figures in greedy.values())
        worse = covered and (
            sum(fitted.values()) > sum(figures[0] for figures in greedy.values())
            or len(self.work) > sum(figures[1] for figures in greedy.values()))
        memory = {uuid: vm.memory_mb or 0 for uuid, vm in self.vms.items()}
        moving = {}
        for az in sorted(targets):
            target, now = targets[az], current.get(az, [])
            there = greedy.get(az, (0, 0, 0))
            if plan.missing.get(az) or (
                    _memory(target) > (1 - MIGRATION_GAIN) * fitted.get(az, 0)
                    and not (worse and (fitted.get(az, 0) > there[0] or len(now) > there[1]))):
                continue
            state = progress(target, now, memory)
            if state.pending:
                moving[az] = (target, state)
        return moving

    def _migrate(self, az, target, state, budget, created_on):
        """Move the VMs of zone ``az`` that have not moved towards ``target`` (``state``: its
        migration.Progress): largest first, a VM at a time with all its slots, at most
        ``budget`` moves; the rest of the budget is returned. A VM that cannot move now (its
        slots would break the one-new-per-hypervisor limit, its hypervisor lacks room until
        other VMs have moved, or the rest of the budget is too small) waits."""
        by_name = {res.name: res for res in target}
        for uuid in state.pending:
            self._check_time()
            slots = [by_name[name] for name in state.targets[uuid]]
            kept = {state.realized.get(res.name) for res in slots}
            held = sorted(self.graph.reservations_of(uuid))
            leave = [name for name in held if name not in kept]
            if uuid in self.vms and 0 < len(leave) <= budget and self._move_to_target(
                    self.vms[uuid], az, leave,
                    [res for res in slots if state.realized.get(res.name) not in held],
                    state.realized, created_on):
                budget -= len(leave)
        return budget

    def _fitted_memory(self, reservations):
        """Memory ``reservations`` hold once step 7 has shrunk each to the largest VM it serves."""
        total = 0
        for res in reservations:
            held = reservation_size(res.resources)[1]
            if all(uuid in self.vms for uuid in res.allocations):
                held = min(held, max((self.vms[uuid].memory_mb or 0 for uuid in res.allocations),
                                     default=held))
            total += held
        return total

    def _has_room(self, host, need):
        free = self.ledger.free(host)
        return free is not None and need[0] <= free[0] and need[1] <= free[1]

    def _move_to_target(self, vm, az, held, slots, realized, created_on):
        """Move ``vm`` out of ``held`` into the reservations realizing ``slots`` (its target
        reservations it holds no realization of), creating those not realized yet; it keeps the
        realizations it holds. False (nothing changed) when a slot's
        hypervisor already got a new reservation this cycle (with the limit) or lacks room, or
        when the VM may not take the slots together (rules 1-5)."""
        limit = self.settings.limit_one_new_per_hypervisor
        for res in slots:
            name = realized.get(res.name)
            if name is None:
                if (limit and res.host in created_on) or \
                        not self._has_room(res.host, reservation_size(res.resources)):
                    return False
            elif not self._has_room(res.host, _growth(self.work[name], vm)):
                return False
        for name in held:
            self.graph.unlink(vm.uuid, name)
        tried = []
        for res in slots:
            name = realized.get(res.name)
            if name is None:
                name = ("target", res.name)
                allowed = self.graph.new_slot_allowed(vm.uuid, res.host)
                if allowed:
                    self.graph.add_reservation(name, res.host)
            else:
                allowed = self.graph.can_join(vm.uuid, name)
            if not allowed:
                break
            self.graph.link(vm.uuid, name)
            tried.append(name)
        for name in reversed(tried):
            self.graph.unlink(vm.uuid, name)
            if isinstance(name, tuple):
                self.graph.remove_reservation(name)
        if len(tried) < len(slots):
            for name in held:
                self.graph.link(vm.uuid, name)
            return False
        into = []
        for res in slots:
            name = realized.get(res.name)
            if name is None:
                name = res.name if self.names.claim(res.name) else None
                name = self._create(vm, az, res.host, dict(res.resources), name)
                realized[res.name] = name
                created_on.add(res.host)
            else:
                self.serves_multi[name] = self.serves_multi.get(name) or self.multi[vm.uuid]
                self._join(vm, name, grow=True)
            into.append(name)
        for name, target in zip(held, into + [None] * len(held)):
            self._apply_removals([Removal(name, vm.uuid, self.work[name].allocations[vm.uuid],
                                          CONSOLIDATED % target if target else REPLACED)])
            self.result.moved += 1
            self._reindex_or_delete(name, CONSOLIDATED_MESSAGE)
        return True

    def _plan_emptying(self, res, members, budget):
        """[(vm uuid, from reservation, to reservation)] moving every member of ``res``
        elsewhere in at most ``budget`` moves, applied to the graph; None (the graph as it was)
        when one of them has nowhere to go."""
        index = self.zones.get(self.hv[res.host].az) if res.host in self.hv else None
        if index is None:
            return None
        moves = []
        for uuid in members:
            vm = self.vms[uuid]
            needs = trait_needs(vm.extra_specs)
            self.graph.unlink(uuid, res.name)
            target = next(self._joinable(vm, needs, index, self.protected | {res.name}), None)
            self.graph.link(uuid, res.name)
            found = [(res.name, target)] if target is not None else \
                self._move_both(vm, res.name, needs, index)
            if found is None or len(moves) + len(found) > budget:
                for moved, source, into in reversed(moves):
                    self.graph.unlink(moved, into)
                    self.graph.link(moved, source)
                return None
            for source, into in found:
                self.graph.unlink(uuid, source)
                self.graph.link(uuid, into)
                moves.append((uuid, source, into))
        return moves

    def _move_both(self, vm, name, needs, index):
        """[(from, to), (from, to)]: ``vm``, holding ``name`` and one other reservation, takes
        two other existing reservations together instead (placement.slot_pairs, as they are);
        None when it holds another count or no pair qualifies."""
        held = sorted(self.graph.reservations_of(vm.uuid))
        if len(held) != 2:
            return None
        for old in held:
            self.graph.unlink(vm.uuid, old)
        options = [("share", other) for other in itertools.islice(
            self._joinable(vm, needs, index, self.protected.union(held)), PAIR_OPTIONS)]
        found = self._first_pair(vm, needs, options)
        for old in held:
            self.graph.link(vm.uuid, old)
        if found is None:
            return None
        other = held[1] if held[0] == name else held[0]
        return [(name, found[0][1]), (other, found[1][1])]

    def _fit_sizes(self):
        """Shrink reservations larger than the largest VM they serve (all VMs known)."""
        for name in sorted(self.work):
            res = self.work[name]
            if not res.allocations or resource_error(res.resources) or \
                    any(uuid not in self.vms for uuid in res.allocations):
                continue
            cpu = max(self.vms[uuid].vcpus or 0 for uuid in res.allocations)
            mem = max(self.vms[uuid].memory_mb or 0 for uuid in res.allocations)
            held_cpu, held_mem = reservation_size(res.resources)
            if (cpu, mem) == (held_cpu, held_mem) or cpu > held_cpu or mem > held_mem:
                continue
            self.ledger.give_back(res.host, held_cpu - cpu, held_mem - mem)
            res.resources["cpu"], res.resources["memory_mb"] = cpu, mem
            self._touch(res)
            self.result.resized += 1


def _memory(reservations):
    return sum(reservation_size(res.resources)[1] for res in reservations)


def _growth(res, vm):
    """(cpu, memory_mb) that ``res`` must grow by to fit ``vm``."""
    cpu, mem = reservation_size(res.resources)
    return max(0, (vm.vcpus or 0) - cpu), max(0, (vm.memory_mb or 0) - mem)


def plain_greedy(hypervisors, vms, settings, now):
    """The plain greedy's plan for the fleet from nothing, in one cycle (see
    :meth:`_Cycle._cover_plainly`): the plan every cycle's is compared with."""
    return _Cycle(hypervisors, vms, [], settings, now, 0, {}, GREEDY).run()
