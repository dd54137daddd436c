# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Step 5 of a cycle: giving the VMs short of slots their missing slots, by packing, by the plain
greedy, or along the target plan."""
import hashlib

from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    trait_needs)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    VMStatus, reservation_size)
from ansible_collections.resilient.virt.plugins.module_utils._failover.slots import (
    HostPicker, Need, ZoneIndex, select_window)
from ansible_collections.resilient.virt.plugins.module_utils._failover.cycle_state import (
    FOLLOW, GREEDY, PACK, growth)
from ansible_collections.resilient.virt.plugins.module_utils._failover.joining import (
    may_join, pair, search)


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
    for uuid in sorted(state.vms):
        vm = state.vms[uuid]
        required = state.required[uuid]
        held = len(state.graph.reservations_of(uuid))
        if required or held:
            status[uuid] = VMStatus(uuid, vm.host, state.zone(vm), vm.flavor, required, held)
        if required > held:
            needs.append(Need(vm, required, held))
    selected, deferred = select_window(needs, state.settings.max_vms_to_process, state.cycle)
    if state.strategy in (PACK, FOLLOW):
        selected.sort(key=lambda need: hardest_first(state, need))
    for need in deferred:
        status[need.vm.uuid].why = ("waiting for a later cycle (max_vms_to_process=%d)"
                                    % state.settings.max_vms_to_process)
        state.held_in(status[need.vm.uuid].az)[2] += need.required - need.held
    state.zones = state.index_zones()
    picker = HostPicker(state.hv.values(), state.ledger, state.graph,
                        state.settings.limit_one_new_per_hypervisor)
    waiting = {}  # (zone, trait needs) -> the VM requiring 2+ slots the limit left short there
    for need in selected:
        state.check_time()
        vm_status = status[need.vm.uuid]
        pool = (vm_status.az, trait_needs(need.vm.extra_specs))
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
    if state.strategy == FOLLOW and all(status[need.vm.uuid].why != PLANNED_WAITING
                                        for need in selected):
        pack_the_rest(state, selected, status, picker)
    state.result.processed = len(selected)
    state.result.deferred = len(deferred)
    state.status = status


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
                              trait_needs(need.vm.extra_specs), picker)
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
        return cover_as_planned(state, vm, az, needs, picker)
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


def cover_as_planned(state, vm, az, needs, picker):
    """Give ``vm`` the target reservations it does not hold yet: join the reservation
    realizing one (grown to the target's size when smaller), or create it on the target's
    hypervisor; with the limit, only the reservation that opens first there this cycle
    (towards_target.follows_target), else the VM waits for a later cycle for that slot. Why it
    stays short, or None."""
    slots, realized = state.planned.get(vm.uuid, ([], {}))
    held = state.graph.reservations_of(vm.uuid)
    waits = False
    for res in slots:
        state.check_time()
        name = realized.get(res.name)
        if name is not None:
            if name in held:
                continue
            if state.has_room(res.host, growth(state.work[name], vm)) and \
                    state.graph.can_join(vm.uuid, name):
                state.join(vm, name, grow=True)
                state.result.reused += 1
            continue
        if picker.is_closed(res.host) or (state.settings.limit_one_new_per_hypervisor
                                          and state.opening[res.host].name != res.name):
            waits = True
            continue
        if not state.has_room(res.host, reservation_size(res.resources)) or \
                not state.graph.new_slot_allowed(vm.uuid, res.host):
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
