# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Step 5 of a cycle: giving the VMs short of slots their missing slots, by packing, by the plain
greedy, or along the target plan."""
import hashlib

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    VMStatus, reservation_size)
from ansible_collections.resilient.virt.plugins.module_utils._failover.slots import (
    HostPicker, Need, ZoneIndex, select_window)
from ansible_collections.resilient.virt.plugins.module_utils._failover.cycle_state import (
    FOLLOW, GREEDY, PACK, growth)
from ansible_collections.resilient.virt.plugins.module_utils._failover.joining import (
    may_join, pair, search)
from ansible_collections.resilient.virt.plugins.module_utils._failover.towards_target import (
    move_to_target)


WAITING = ("waiting for a later cycle: VM %s, served before it in its zone with the same trait "
           "needs, found the hypervisors it could use already given a new reservation this cycle "
           "(limit_one_new_per_hypervisor)")
PLANNED_WAITING = ("waiting for a later cycle: the hypervisor of a slot planned for it already got "
                   "a new reservation this cycle (limit_one_new_per_hypervisor)")


class Dominated(Exception):
    """The plain greedy, planning from nothing, already holds in every zone at least the memory
    and reservations, and misses at least the slots, of the figures it was given: it can only
    hold more. ``figures``: its own so far, {zone: [memory_mb, reservations, slots missing]}."""

    def __init__(self, figures):
        super().__init__()
        self.figures = figures


def within(figures, than):
    """True when ``figures`` ({zone: [memory, reservations, missing]}) are nowhere above
    ``than``'s, in any zone and any of the three."""
    return all(a <= b for zone, held in figures.items()
               for a, b in zip(held, than.get(zone, (0, 0, 0))))


def assign(state):
    needs, status = [], {}
    for uuid in state.fleet.by_size:  # the needs in the order select_window expects
        vm = state.vms[uuid]
        required = state.required[uuid]
        held = len(state.graph.reservations_of(uuid))
        if required > held or (state.follows and state.interim and not state.graph.reservations_of(
                uuid).isdisjoint(state.interim)):
            needs.append(Need(vm, required, held))
        elif required or held:
            status[uuid] = new_status(state, vm, required, held)
    selected, deferred = select_window(needs, state.settings.max_vms_to_process, state.cycle)
    if state.strategy in (PACK, FOLLOW):
        selected.sort(key=lambda need: hardest_first(state, need))
    for need in deferred:
        status[need.vm.uuid] = new_status(state, need.vm, need.required, need.held)
        status[need.vm.uuid].why = ("waiting for a later cycle (max_vms_to_process=%d)"
                                    % state.settings.max_vms_to_process)
        state.held_in(status[need.vm.uuid].az)[2] += need.required - need.held
    state.zones = state.index_zones()
    picker = HostPicker(state.hv.values(), state.ledger, state.graph,
                        state.settings.limit_one_new_per_hypervisor)
    waiting = {}  # (zone, trait needs) -> the VM requiring 2+ slots the limit left short there
    if state.follows:
        state.hold_target_room()
    for need in selected:
        state.check_time()
        vm_status = status[need.vm.uuid] = new_status(state, need.vm, need.required, need.held)
        pool = (vm_status.az, state.fleet.trait_needs[need.vm.uuid])
        if pool in waiting and state.multi[need.vm.uuid]:
            vm_status.why = WAITING % waiting[pool]
            continue
        vm_status.why = cover(state, need, vm_status.az, pool[1], picker)
        vm_status.held = len(state.graph.reservations_of(need.vm.uuid))
        if state.stop is not None:
            state.held_in(vm_status.az)[2] += vm_status.short_by
            if within(state.stop, state.held):
                raise Dominated(state.held)
        if vm_status.why is not None and limit_left_short(state, need.vm, pool, picker):
            waiting[pool] = need.vm.uuid
    if state.follows:
        state.release_target_room()
    if state.follows and not state.interim and all(status[need.vm.uuid].why != PLANNED_WAITING
                                                   for need in selected):
        pack_the_rest(state, selected, status, picker)
    state.result.processed = len(selected)
    state.result.deferred = len(deferred)
    state.status = status


def new_status(state, vm, required, held):
    """A new VMStatus of ``vm``. Those of the VMs a cycle serves are made as it serves each:
    the plain greedy, stopped early (Dominated), makes few."""
    return VMStatus(vm.uuid, vm.host, state.fleet.zone[vm.uuid], vm.flavor, required, held)


def pack_the_rest(state, selected, status, picker):
    """Following the target, in the cycle where no VM waits any more for a target slot: pack
    the slots the target leaves missing (only then, so that they take no room a target slot
    needs and the plan stays part of the target while it grows)."""
    state.strategy = PACK
    for need in selected:
        vm_status = status[need.vm.uuid]
        if vm_status.why is None or vm_status.why == PLANNED_WAITING:
            continue
        held = len(state.graph.reservations_of(need.vm.uuid))
        vm_status.why = cover(state, Need(need.vm, need.required, held), vm_status.az,
                              state.fleet.trait_needs[need.vm.uuid], picker)
        vm_status.held = len(state.graph.reservations_of(need.vm.uuid))
    state.strategy = FOLLOW


def limit_left_short(state, vm, pool, picker):
    """True, when packing, if ``vm`` requires two or more slots and, still short, would have
    got a new reservation on a hypervisor the one-new-per-hypervisor limit closed this cycle:
    the VMs requiring two or more slots after it with the same zone and trait needs
    (``pool``) then wait for the next cycle (step 5 of docs/failover.md says why)."""
    return state.strategy == PACK and state.multi[vm.uuid] and vm.vcpus is not None \
        and vm.memory_mb is not None and bool(pool[0]) \
        and picker.closed_to(vm, pool[0], pool[1])


def hardest_first(state, need):
    """Largest first; among VMs of one size, those on the hypervisors running the most VMs
    that require two or more slots (rules 4 and 5 keep those VMs' slots apart, so they
    have the fewest choices left when served late); then by uuid, or for another order by a
    hash of order and uuid."""
    vm = need.vm
    last = vm.uuid if not state.order else hashlib.sha256(
        ("%d %s" % (state.order, vm.uuid)).encode()).digest()
    return -(vm.memory_mb or 0), -state.multi_on_host.get(vm.host, 0), last


def cover(state, need, az, needs, picker):
    """Give ``need.vm`` (trait needs ``needs``) its missing slots; returns why it stays
    short, or None."""
    vm = need.vm
    if vm.vcpus is None or vm.memory_mb is None:
        return "the VM's vcpus or memory_mb is unknown"
    if not az:
        return "the VM's availability zone is unknown"
    state.graph.add_vm(vm.uuid, vm.host)
    index = state.zones.setdefault(az, ZoneIndex())
    missing = need.required - need.held
    if state.strategy == GREEDY:
        return cover_plainly(state, vm, missing, az, needs, index, picker)
    if state.strategy == FOLLOW:
        return follow(state, need, az, needs, picker)
    path = None
    if missing == 2 and state.strategy in (PACK, FOLLOW):
        path = pair(state, vm, needs, index, picker, az)
    if path is None:
        path = search(state, vm, missing, (), needs, index, picker, az)
    complete = len(path) == missing
    former = sorted(state.graph.reservations_of(vm.uuid))
    if not complete and former:
        fresh = search_afresh(state, vm, need.required, former, needs, index, picker, az)
        if len(fresh) == need.required:
            kept = [("share", name) for name in former if ("share", name) in fresh]
            state.leave(vm, [name for name in former if ("share", name) not in kept])
            path, complete = [option for option in fresh if option not in kept], True
    for kind, target in path:
        if kind == "new":
            state.create(vm, az, target)
            picker.used(target)
            continue
        state.join(vm, target, grow=kind == "grow")
        state.result.reused += 1
    return None if complete else picker.explain(vm, az, needs)


def cover_plainly(state, vm, missing, az, needs, index, picker):
    """The plain greedy: each of ``vm``'s ``missing`` slots in the reservation serving the
    most VMs that it may join as it is (the oldest on a tie), else in a new one on the
    least loaded hypervisor it may use (HostPicker.least_loaded); why it stays short, or
    None."""
    free_of_traits = not needs.required and not needs.forbidden
    for _slot in range(missing):
        state.check_time()
        name = next((name for name in index.shared()
                     if may_join(state, vm, name, needs, free_of_traits)), None)
        if name is not None:
            state.join(vm, name, grow=False)
            state.result.reused += 1
            continue
        host = picker.least_loaded(vm, az, needs)
        if host is None:
            return picker.explain(vm, az, needs)
        state.create(vm, az, host)
        picker.used(host)
    return None


def follow(state, need, az, needs, picker):
    """Following the target. A VM whose target reservations give it all its slots and that
    holds none of them yet takes them all at once (:func:`take_target_slots`) when it holds
    interim reservations, or when it holds nothing and all of them exist already or no limit
    per hypervisor applies; a VM holding nothing is otherwise covered for now
    (:func:`cover_for_now`) and takes its target slots only when that leaves it short (a new
    reservation covers more VMs as an interim one than as a target one, whose VMs wait for
    each other). A VM holding target slots, one the target leaves short, and every VM when
    none is covered for now (reconcile.FOR_NOW), takes those it lacks
    (:func:`cover_as_planned`). Why it stays short, or None."""
    vm = need.vm
    slots, realized = state.planned.get(vm.uuid, ([], {}))
    held = state.graph.reservations_of(vm.uuid)
    if len(slots) < need.required or (held and held.isdisjoint(state.interim)) or \
            not state.for_now:
        return cover_as_planned(state, vm, az, needs, picker)
    if held or not state.settings.limit_one_new_per_hypervisor or \
            all(res.name in realized for res in slots):
        if take_target_slots(state, vm, az, sorted(held), slots, realized, picker):
            return None
        if held:
            return cover_for_now(state, Need(vm, need.required, len(held)), az, needs, picker)
    why = cover_for_now(state, need, az, needs, picker)
    held = state.graph.reservations_of(vm.uuid)
    if why is None or take_target_slots(state, vm, az, sorted(held), slots, realized, picker):
        return None
    return why if held else cover_as_planned(state, vm, az, needs, picker)


class _Opened:
    """The hypervisors that got a new reservation this cycle, as towards_target.move_to_target
    reads and adds them, kept by the cycle's HostPicker."""

    def __init__(self, picker):
        self.picker = picker

    def __contains__(self, host):
        return self.picker.is_closed(host)

    def add(self, host):
        self.picker.used(host)


def take_target_slots(state, vm, az, interim, slots, realized, picker):
    """Give ``vm`` all its target reservations ``slots`` in one step, leaving the ``interim``
    ones it holds (towards_target.move_to_target); False (nothing changed) when a hypervisor
    lacks room, already got a new reservation this cycle, or the rules forbid it."""
    names = [res.name for res in slots]
    kept = {name: state.target_room[name] for name in names if name in state.target_room}
    state.release_target_room(names)
    joins = sum(1 for res in slots if res.name in realized)
    if move_to_target(state, vm, az, interim, slots, realized, _Opened(picker)):
        state.result.reused += joins
        for res in slots:
            hold_growth(state, res, realized[res.name])
        return True
    for name, held in kept.items():
        state.target_room[name] = held
        state.ledger.take(*held)
    return False


def hold_growth(state, res, name):
    """Hold again the room that reservation ``name`` (None: not created) still needs to grow
    to its target ``res``."""
    cpu, memory = reservation_size(res.resources)
    held_cpu, held_memory = (0, 0) if name is None else \
        reservation_size(state.work[name].resources)
    if cpu > held_cpu or memory > held_memory:
        state.target_room[res.name] = (res.host, max(0, cpu - held_cpu),
                                       max(0, memory - held_memory))
        state.ledger.take(*state.target_room[res.name])


def cover_for_now(state, need, az, needs, picker):
    """Pack ``need.vm``'s missing slots into interim reservations (shared with VMs holding
    interim ones only, in the room the target reservations still to open leave free), so it
    is covered until it can take its target slots; why it stays short, or None. No new one
    opens on the hypervisors of the zone with the most target reservations still to open (the
    cycles the plan takes to reach the target are theirs)."""
    state.strategy, state.packing_interim = PACK, True
    busy = [host for host in sorted(state.busiest) if not picker.is_closed(host)]
    for host in busy:
        picker.used(host)
    try:
        return cover(state, need, az, needs, picker)
    finally:
        state.strategy, state.packing_interim = FOLLOW, False
        for host in busy:
            picker.unused(host)


def cover_as_planned(state, vm, az, needs, picker):
    """Give ``vm`` the target reservations it does not hold yet: join the reservation
    realizing one (grown to the target's size when smaller), or create it on the target's
    hypervisor unless that hypervisor already got a new reservation this cycle (with the
    limit) or, with no interim reservations, opens another first
    (towards_target.follows_target), else the VM waits for a later cycle for that slot. Why it stays short, or None."""
    slots, realized = state.planned.get(vm.uuid, ([], {}))
    held = state.graph.reservations_of(vm.uuid)
    waits = False
    for res in slots:
        state.check_time()
        name = realized.get(res.name)
        if name is not None:
            if name in held:
                continue
            state.release_target_room([res.name])
            if state.has_room(res.host, growth(state.work[name], vm)) and \
                    state.graph.can_join(vm.uuid, name):
                state.join(vm, name, grow=True)
                state.result.reused += 1
            hold_growth(state, res, name)
            continue
        if picker.is_closed(res.host) or (not state.for_now and state.opening.get(
                res.host, res).name != res.name):
            waits = True
            continue
        state.release_target_room([res.name])
        if not state.has_room(res.host, reservation_size(res.resources)) or \
                not state.graph.new_slot_allowed(vm.uuid, res.host):
            hold_growth(state, res, None)
            continue
        name = res.name if state.names.claim(res.name) else None
        realized[res.name] = state.create(vm, az, res.host, dict(res.resources), name)
        picker.used(res.host)
    if len(state.graph.reservations_of(vm.uuid)) >= state.required[vm.uuid]:
        return None
    return PLANNED_WAITING if waits else "short in the target"


def search_afresh(state, vm, required, former, needs, index, picker, az):
    """Like :func:`search` for ``required`` slots with ``vm`` out of ``former`` meanwhile."""
    for name in former:
        state.graph.unlink(vm.uuid, name)
    path = search(state, vm, required, former, needs, index, picker, az)
    for name in former:
        state.graph.link(vm.uuid, name)
    return path
