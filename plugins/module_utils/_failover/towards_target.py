# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Moving towards the target plan (the plan built from nothing without the limit per hypervisor):
whether the plan is part of it, which zones move towards it, and one VM's move."""

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    Removal, reservation_size)
from ansible_collections.resilient.virt.plugins.module_utils._failover.target_progress import (
    progress)
from ansible_collections.resilient.virt.plugins.module_utils._failover.cycle_state import (
    CONSOLIDATED, CONSOLIDATED_MESSAGE, FOLLOW, REPLACED, growth)


MIGRATION_GAIN = 0.10
"""A zone is moved towards the plan built from nothing only when that plan holds at least 10 %
less memory than the zone holds: moving churns reservations, and the zone holds more on the way.
At 5 %, settled plans this planner built from nothing moved too, on some benchmark seeds, for a
little less memory in the end and far more on the way."""


def _memory(reservations):
    return sum(reservation_size(res.resources)[1] for res in reservations)


def follows_target(state):
    """True, when following the target, if the plan (after steps 1-4) is part of the target
    but for interim reservations: every other reservation realizes one of the target's and
    serves only VMs that hold realizations of their own target reservations, every interim
    one (cycle_state.is_interim) serves only VMs holding interim ones alone, and the
    hypervisors keep free the room of the target reservations still to open. The cycle then
    grows the plan along the target (packing.follow): a part of a valid plan is valid and fits
    where the whole plan fits, so the plan settles on the target however many cycles the
    one-new-per-hypervisor limit spreads it over. Sets ``planned``, ``target_room``,
    ``opening`` and ``busiest``."""
    if state.strategy != FOLLOW or state.target is None or not state.may_follow:
        return False
    if state.target_plan is None:
        state.target_plan = state.target(state.current_figures())
    targets, current, interim_vms = {}, {}, set()
    for res in state.target_plan.reservations:
        targets.setdefault(res.az, []).append(res)
    for res in state.work.values():
        if res.name in state.interim:
            interim_vms.update(res.allocations)
        else:
            current.setdefault(state.zone_of(res), []).append(res)
    memory = {uuid: vm.memory_mb or 0 for uuid, vm in state.vms.items()}
    state.planned, room, needed, opens = {}, {}, {}, {}
    for az in set(targets) | set(current):
        held = current.get(az, [])
        moved = progress(targets.get(az, []), held, memory)
        if len(moved.realized) < len(held):
            return False
        owner = {name: target for target, name in moved.realized.items()}
        for res in held:
            for uuid in res.allocations:
                if uuid in interim_vms or owner[res.name] not in moved.targets.get(uuid, ()):
                    return False
        by_name = {res.name: res for res in targets.get(az, [])}
        for uuid, names in moved.targets.items():
            state.planned[uuid] = ([by_name[name] for name in names], moved.realized)
        for res in targets.get(az, []):
            cpu, memory_mb = reservation_size(res.resources)
            name = moved.realized.get(res.name)
            if name is not None:
                held_cpu, held_memory = reservation_size(state.work[name].resources)
                cpu, memory_mb = max(0, cpu - held_cpu), max(0, memory_mb - held_memory)
            room[res.name] = (res.host, cpu, memory_mb)
            if name is None:
                opens[res.host] = opens.get(res.host, 0) + 1
                first = state.opening.get(res.host)
                if state.settings.limit_one_new_per_hypervisor and (
                        first is None or _opens_before(res, first)):
                    state.opening[res.host] = res
            total = needed.setdefault(res.host, [0, 0])
            total[0] += cpu
            total[1] += memory_mb
    for host, (cpu, memory_mb) in needed.items():
        free = state.ledger.free(host)
        if free is None or free[0] < cpu or free[1] < memory_mb:
            return False
    state.target_room = room
    most = {}
    for host, count in opens.items():
        az = state.hv[host].az
        most[az] = max(most.get(az, 0), count)
    state.busiest = {host for host, count in opens.items() if count == most[state.hv[host].az]}
    return True


def _opens_before(res, other):
    """True when target reservation ``res`` opens before ``other`` on their hypervisor under
    the limit when no VM is covered for now: the one serving the most VMs first (most VMs
    covered this cycle), then the larger, then by name."""
    return (-len(res.allocations), -reservation_size(res.resources)[1], res.name) < \
        (-len(other.allocations), -reservation_size(other.resources)[1], other.name)


def moving_zones(state):
    """{zone: (target reservations, target_progress.Progress)} of the zones that move towards
    the target: it leaves no slot of the zone missing, some VM has not moved yet, and it
    holds MIGRATION_GAIN less memory than the zone (once step 7 has shrunk its
    reservations), or the fleet holds more memory or more reservations than the plain
    greedy's plan, covering every VM, does and the zone holds more of either than the
    greedy's there. The target fits on the hypervisors as they are without the zone's
    reservations, so each target reservation finds room once the reservations realizing
    none are given back; until then a VM may wait."""
    current = {}
    for res in state.work.values():
        current.setdefault(state.zone_of(res), []).append(res)
    if state.target_plan is None:
        state.target_plan = state.target(state.current_figures())
    plan = state.target_plan
    targets = {}
    for res in plan.reservations:
        targets.setdefault(res.az, []).append(res)
    fitted = {az: state.fitted_memory(held) for az, held in current.items()}
    greedy = plan.greedy
    covered = not any(figures[2] for figures in greedy.values())
    worse = covered and (
        sum(fitted.values()) > sum(figures[0] for figures in greedy.values())
        or len(state.work) > sum(figures[1] for figures in greedy.values()))
    memory = {uuid: vm.memory_mb or 0 for uuid, vm in state.vms.items()}
    moving = {}
    for az in sorted(targets):
        target, now = targets[az], current.get(az, [])
        there = greedy.get(az, (0, 0, 0))
        if plan.missing.get(az) or (
                _memory(target) > (1 - MIGRATION_GAIN) * fitted.get(az, 0)
                and not (worse and (fitted.get(az, 0) > there[0] or len(now) > there[1]))):
            continue
        moved = progress(target, now, memory)
        if moved.pending:
            moving[az] = (target, moved)
    return moving


def migrate(state, az, target, moved, budget, created_on):
    """Move the VMs of zone ``az`` that have not moved towards ``target`` (``moved``: its
    target_progress.Progress): largest first, a VM at a time with all its slots, at most
    ``budget`` moves; the rest of the budget is returned. A VM that cannot move now (its
    slots would break the one-new-per-hypervisor limit, its hypervisor lacks room until
    other VMs have moved, or the rest of the budget is too small) waits."""
    by_name = {res.name: res for res in target}
    for uuid in moved.pending:
        state.check_time()
        slots = [by_name[name] for name in moved.targets[uuid]]
        kept = {moved.realized.get(res.name) for res in slots}
        held = sorted(state.graph.reservations_of(uuid))
        leave = [name for name in held if name not in kept]
        if uuid not in state.vms or not 0 < len(leave) <= budget:
            continue
        into = [res for res in slots if moved.realized.get(res.name) not in held]
        if move_to_target(state, state.vms[uuid], az, leave, into, moved.realized, created_on):
            budget -= len(leave)
    return budget


def move_to_target(state, vm, az, held, slots, realized, created_on):
    """Move ``vm`` out of ``held`` into the reservations realizing ``slots`` (its target
    reservations it holds no realization of), creating those not realized yet; it keeps the
    realizations it holds. False (nothing changed) when a slot's
    hypervisor already got a new reservation this cycle (with the limit) or lacks room, or
    when the VM may not take the slots together (rules 1-5)."""
    limit = state.settings.limit_one_new_per_hypervisor
    for res in slots:
        name = realized.get(res.name)
        if name is None:
            if (limit and res.host in created_on) or \
                    not state.has_room(res.host, reservation_size(res.resources)):
                return False
        elif not state.has_room(res.host, growth(state.work[name], vm)):
            return False
    for name in held:
        state.graph.unlink(vm.uuid, name)
    tried = []
    for res in slots:
        name = realized.get(res.name)
        if name is None:
            name = ("target", res.name)
            allowed = state.graph.new_slot_allowed(vm.uuid, res.host)
            if allowed:
                state.graph.add_reservation(name, res.host)
        else:
            allowed = state.graph.can_join(vm.uuid, name)
        if not allowed:
            break
        state.graph.link(vm.uuid, name)
        tried.append(name)
    for name in reversed(tried):
        state.graph.unlink(vm.uuid, name)
        if isinstance(name, tuple):
            state.graph.remove_reservation(name)
    if len(tried) < len(slots):
        for name in held:
            state.graph.link(vm.uuid, name)
        return False
    into = []
    for res in slots:
        name = realized.get(res.name)
        if name is None:
            name = res.name if state.names.claim(res.name) else None
            name = state.create(vm, az, res.host, dict(res.resources), name)
            realized[res.name] = name
            created_on.add(res.host)
        else:
            state.serves_multi[name] = state.serves_multi.get(name) or state.multi[vm.uuid]
            state.join(vm, name, grow=True)
        into.append(name)
    for name, target in zip(held, into + [None] * len(held)):
        state.apply_removals([Removal(name, vm.uuid, state.work[name].allocations[vm.uuid],
                                      CONSOLIDATED % target if target else REPLACED)])
        state.result.moved += 1
        state.reindex_or_delete(name, CONSOLIDATED_MESSAGE)
    return True
