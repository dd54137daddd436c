# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One reconcile cycle of failover reservations, as a pure function of its inputs: the steps in
their order, and the choice among the plans a cycle makes.

Steps (docs/failover.md says why each is as it is):
  1-4. drop stale allocations, VMs that broke the rules, invalid and empty reservations
       (upkeep);
  5.   give the VMs short of slots their missing slots: by packing, by the plain greedy, or
       along the target plan (packing, joining);
  6.   in a cycle that gave no VM a slot, consolidate, and move zones towards the target
       (consolidation, towards_target);
  7.   shrink reservations to the largest VM they serve (consolidation).
A cycle plans by packing, in other orders (ORDERS) and as the plain greedy, and keeps the
plan no worse than the greedy's that holds the least memory per slot (:func:`run_cycle`).
The same inputs give the same result; ``now`` and ``cycle`` are inputs for that reason.
"""
import time
from dataclasses import replace
from typing import NamedTuple

from ansible_collections.resilient.virt.plugins.module_utils._failover.bounds import lower_bound
from ansible_collections.resilient.virt.plugins.module_utils._failover.consolidation import consolidate, fit_sizes
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import DependencyGraph
from ansible_collections.resilient.virt.plugins.module_utils._failover.cycle_state import (
    ACTIVE_REASON, CONSOLIDATED, EMPTY, FOLLOW, GREEDY, INTERIM, PACK, REPLACED, CycleState)
from ansible_collections.resilient.virt.plugins.module_utils._failover.fleet_index import FleetIndex
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import reservation_size
from ansible_collections.resilient.virt.plugins.module_utils._failover.packing import (
    PLANNED_WAITING, WAITING, Dominated, assign)
from ansible_collections.resilient.virt.plugins.module_utils._failover.slots import CapacityLedger
from ansible_collections.resilient.virt.plugins.module_utils._failover import stored_target
from ansible_collections.resilient.virt.plugins.module_utils._failover.towards_target import follows_target
from ansible_collections.resilient.virt.plugins.module_utils._failover.upkeep import (
    HOST_NOT_FOUND, INVALID_RESOURCES, VM_DOES_NOT_FIT, drop_empty, drop_ineligible, drop_stale,
    empty_reservations, find_problem, is_due, revalidate, stale_allocations)
from ansible_collections.resilient.virt.plugins.module_utils.errors import Timeout

__all__ = ("stale_allocations", "empty_reservations", "is_due", "find_problem",
           "INVALID_RESOURCES", "HOST_NOT_FOUND", "VM_DOES_NOT_FIT", "run_cycle", "ACTIVE_REASON",
           "EMPTY", "REPLACED", "CONSOLIDATED", "WAITING", "PLANNED_WAITING", "PACK", "GREEDY",
           "FOLLOW", "PlanningDeadline", "plain_greedy", "Target", "plan_cycle")

STRATEGIES = (FOLLOW, PACK, GREEDY)

SPREAD, ANYWHERE, NONE = "spread", "anywhere", "none"
FOR_NOW = (SPREAD, ANYWHERE, NONE)
"""Following the target, VMs that cannot take their target slots yet are covered for now by
interim reservations (packing.cover_for_now) that leave the hypervisors with the most target
reservations to open (SPREAD: the cycles the plan takes to reach the target are theirs), or
anywhere (ANYWHERE), or not at all (NONE: they wait). Every cycle follows SPREAD; one planning
from nothing also tries the others and keeps the plan leaving the fewest slots missing."""


ORDERS = (4, 40000)
"""A plan built from nothing is packed again in up to 4 other orders among VMs of one size (ties
of ``packing.hardest_first``, broken by a hash of order and uuid instead of the uuid) while all
its packings together ask at most 40,000 join questions: on the benchmark's fleets of 1,000 VMs
some other order often holds less, while from 5,000 VMs on the first order held least on every
seed tried and each packing costs a cycle's time (make bench). A cycle on an existing plan packs
in the first order only, as a reference case expects (conformance: "5 hosts with existing
reservations", at least 4 reservations where another order finds 3)."""


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


def run_cycle(hypervisors, vms, reservations, settings, now, cycle=0, running=None,
              deadline=None, stored=None):
    """Run one cycle and return a :class:`CycleResult`; the inputs are not modified.

    hypervisors: [Hypervisor]; vms: [VM]; reservations: [Reservation]; settings:
    FailoverSettings; now: epoch seconds; cycle: counter that moves the processing window;
    running: {vm uuid: host} that hypervisors report running (keeps allocations of VMs the
    VM list lacks); deadline: seconds the whole cycle may plan for (every strategy, order and
    the target), None for no limit: past it the cycle raises Timeout (see PlanningDeadline);
    stored: the target as the last cycle kept it (``result.target``, see stored_target).

    With every VM processed each cycle, the plan built from nothing without the limit per
    hypervisor is the cycle's target (:func:`_new_plan`). A plan that is part of it grows along
    it (FOLLOW) unless packing covers every VM now holding no more than the plain greedy; other
    plans are packed, again in other orders (ORDERS) and as the plain greedy, and the cheapest
    no worse than the greedy's kept (:func:`_cheapest`). A cycle that gives no VM a slot and
    leaves none short consolidates and may move zones towards the target
    (:func:`consolidation.consolidate`, :func:`towards_target.moving_zones`). The target is
    reused from ``stored`` when it was built from the same inputs, else built; either way
    ``result.target`` keeps it for the next cycle (None when the fleet has none yet).
    """
    clock = None if deadline is None else PlanningDeadline(deadline)
    fleet = FleetIndex(hypervisors, vms, settings.requirements, running or {})

    def plan(strategy, order=0, stop=None, target=None, for_now=SPREAD):
        return plan_cycle(fleet, reservations, settings, now, cycle, strategy, stop, order,
                          target, clock, for_now)

    target, built, key = None, [], None
    if not settings.max_vms_to_process:
        key = stored_target.fingerprint(hypervisors, vms, settings, running)

        def target(current):
            if not built:  # the same for every plan of the cycle
                reused = stored_target.reuse(stored, key, current)
                built.append((Target(*reused), stored) if reused else _new_plan(
                    fleet, settings, now, clock, current, key))
            return built[0][0]
    best = _cheapest(plan, reservations, target)
    if built:
        best.target = built[0][1]
    elif key is not None and isinstance(stored, dict) and stored.get("fingerprint") == key:
        best.target = stored  # not needed this cycle, still the fleet's
    zones = {hv.name: hv.az for hv in hypervisors}
    best.lower_bound = lower_bound(vms, settings.requirements,
                                   lambda vm: vm.az or zones.get(vm.host, ""))
    return best


def _cheapest(plan, reservations, target=None):
    """The plan a cycle keeps: of the packings (given ``target``, see :func:`plan_cycle`; in other
    orders, see ORDERS) and, planning from nothing, the plain greedy, those no worse than the
    greedy (:func:`_no_worse`), and of those the least :func:`_cost` (the first planned on a
    tie, the greedy last). ``plan(strategy, order=, stop=, target=)`` gives (state, result).
    A settled packing is the only plan. Otherwise, when the plan is part of the target, it
    grows along it unless the first packing gives every VM its slots holding no more than the
    plain greedy (planning from nothing) or than the target (on a plan grown part way). It
    grows in as many orders as packed and, from nothing, also with interim reservations
    anywhere and with none (FOR_NOW); the plan leaving the fewest slots missing is kept (then
    the least :func:`_cost`, the first planned on a tie)."""
    packs, greedy, settled = _candidates(plan, reservations, target)
    if target is not None and FOLLOW in STRATEGIES and not settled \
            and not (greedy and _complete_and_no_worse(packs[0], greedy)):
        state, followed = plan(FOLLOW, target=target)
        if followed is not None and (greedy or not _complete_and_no_worse(
                packs[0], _by_zone(state.target_plan, ""))):
            grown = [followed] + [plan(FOLLOW, order, target=target)[1]
                                  for order in range(1, len(packs))]
            if not reservations:
                grown += [plan(FOLLOW, order, target=target, for_now=for_now)[1]
                          for for_now in FOR_NOW[1:] for order in range(len(packs))]
            return min(grown, key=lambda result: (result.summary["slots_missing"],
                                                  _cost(result)))
    if greedy is None:
        return min(packs, key=_cost)
    fleet = {"": [sum(figures[i] for figures in greedy.values()) for i in range(3)]}
    return min([result for result in packs if _no_worse(_by_zone(result, ""), fleet)] or packs,
               key=_cost)


def _candidates(plan, reservations, target=None, current=None, seen=None):
    """([results], the greedy's {zone: figures} (see :func:`_by_zone`), settled): the
    packings', then the greedy's when it ran to the end; only packing's when it settled (gave
    no VM a slot and left none short). The greedy plans only from nothing (no
    ``reservations``), and stops once it holds, in every zone, at least what the best packing
    holds and what ``current`` ({zone: figures}) does (see :class:`Dominated`): its figures
    so far are then given. None for the greedy when it did not run. ``seen``: a dict given
    the best packing's figures (``packed``), the greedy's ``stop`` and whether it ran to the
    end (``finished``)."""
    planner, result = plan(PACK, target=target)
    if planner.settled and not planner.had_interim:
        return [result], None, True
    packs = [result] + [plan(PACK, order)[1] for order
                        in range(1, 1 + _other_orders(planner, reservations))]
    if GREEDY not in STRATEGIES or reservations:
        return packs, None, False
    packed = _by_zone(min(packs, key=_cost))
    stop = stored_target.stop_at(packed, current)
    seen = {} if seen is None else seen
    seen.update(packed=packed, stop=stop, finished=False)
    try:
        greedy = plan(GREEDY, stop=stop)[1]
    except Dominated as stopped:
        return packs, stopped.figures, False
    seen["finished"] = True
    return packs + [greedy], _by_zone(greedy), False


def _complete_and_no_worse(result, greedy):
    """True when ``result`` leaves no VM short and holds, over the fleet, no more memory and
    no more reservations than the plain greedy's figures ``greedy`` ({zone: figures})."""
    summary = result.summary
    return not summary["slots_missing"] and \
        summary["reserved_memory_mb"] <= sum(figures[0] for figures in greedy.values()) and \
        summary["reservations"] <= sum(figures[1] for figures in greedy.values())


def _by_zone(result, only=None):
    """{zone: [memory_mb, reservations, slots missing]} of ``result`` (a CycleResult or a
    Target); with ``only``, the whole fleet under that key."""
    figures = {}
    for res in result.reservations:
        held = figures.setdefault(res.az if only is None else only, [0, 0, 0])
        held[0] += reservation_size(res.resources)[1]
        held[1] += 1
    for status in getattr(result, "vm_status", ()):
        figures.setdefault(status.az if only is None else only, [0, 0, 0])[2] += status.short_by
    return figures


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
    missing; its figures so far when it stopped, see :class:`Dominated`)."""

    reservations: list
    missing: dict
    greedy: dict


def _new_plan(fleet, settings, now, clock=None, current=None, key=None):
    """(:class:`Target`, its stored_target record under ``key``): the target for the fleet
    built from nothing, every VM at once and without the limit per hypervisor, within the
    cycle's ``clock`` (a PlanningDeadline or None): in each zone the part of the packings' or
    the greedy's plan of least :func:`_cost` among those no worse there than the greedy's.
    ``fleet``: the cycle's FleetIndex; ``current``: {zone: figures} of the plan now."""
    free = replace(settings, limit_one_new_per_hypervisor=False, max_vms_to_process=0)

    def plan(strategy, order=0, stop=None, target=None):
        return plan_cycle(fleet, [], free, now, 0, strategy, stop, order, clock=clock)

    seen = {}
    results, greedy, _settled = _candidates(plan, [], current=current, seen=seen)
    figures = [_by_zone(result) for result in results]
    greedy = greedy or figures[0]
    slots = []
    for result in results:
        given = slots.append({}) or slots[-1]
        for status in result.vm_status:
            given[status.az] = given.get(status.az, 0) + min(status.held, status.required)
    reservations, missing = [], {}
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
    target = Target(reservations, missing, greedy)
    return target, stored_target.record(key, seen.get("packed"), seen.get("stop"),
                                        seen.get("finished", True), target)


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


def plan_cycle(fleet, reservations, settings, now, cycle, strategy, stop=None, order=0,
               target=None, clock=None, for_now=SPREAD):
    """(state, result): one plan of the cycle by ``strategy`` (PACK, GREEDY or FOLLOW), the
    steps in their order, over ``fleet`` (a FleetIndex of the fleet's hypervisors, VMs and
    the VMs hypervisors report running). ``stop``: {zone: figures} past which the plain
    greedy stops (see :class:`packing.Dominated`); ``order``: the order among VMs of one size
    (ORDERS);
    ``target``: (figures now) -> the :class:`Target`, built when needed; ``clock``: a
    PlanningDeadline or None; ``for_now``: following the target, where VMs are covered for
    now (FOR_NOW)."""
    state = CycleState(fleet, reservations, settings, now, cycle, strategy, stop, order, target,
                       clock, FOLLOW in STRATEGIES)
    drop_stale(state)
    state.graph = DependencyGraph.from_reservations(list(state.work.values()), state.hosts)
    state.ledger = CapacityLedger(state.hv.values(), fleet.vm_use, state.work.values())
    drop_ineligible(state)
    revalidate(state)
    drop_empty(state)
    if strategy == FOLLOW:
        state.follows = follows_target(state)
        if for_now != SPREAD:
            state.busiest = set()
        state.for_now = for_now != NONE
        if not state.follows:
            return state, None  # not part of the target: the packings plan this cycle
    else:
        end_interim(state)
    assign(state)
    state.settled = not (state.result.created or state.result.reused or state.result.moved) \
        and not state.interim and all(
        len(state.graph.reservations_of(uuid)) >= status.required
        for uuid, status in state.status.items())
    consolidate(state)
    fit_sizes(state)
    for uuid, vm_status in state.status.items():
        vm_status.held = len(state.graph.reservations_of(uuid))
    result = state.result
    result.vm_status = [state.status[u] for u in sorted(state.status)]
    created = set(result.created)
    result.changed = sorted(n for n in state.changed if n in state.work and n not in created)
    result.reservations = [state.work[n] for n in sorted(state.work)]
    return state, result


def end_interim(state):
    """Planning by packing or the greedy: interim reservations become ordinary ones."""
    for name in sorted(state.interim):
        res = state.work[name]
        res.conditions = [c for c in res.conditions if c.get("type") != INTERIM]
        state.touch(res)
    state.interim = set()


def plain_greedy(hypervisors, vms, settings, now):
    """The plain greedy's plan for the fleet from nothing, in one cycle (see
    :func:`packing.cover_plainly`): the plan every cycle's is compared with."""
    return plan_cycle(FleetIndex(hypervisors, vms, settings.requirements, {}), [], settings, now,
                      0, GREEDY)[1]
