# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Steps 6 and 7 of a cycle: empty the least used reservations into others, then shrink each
reservation to the largest VM it serves."""
import itertools

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    Removal, reservation_size, resource_error)
from ansible_collections.resilient.virt.plugins.module_utils._failover.slots import PAIR_OPTIONS
from ansible_collections.resilient.virt.plugins.module_utils._failover.cycle_state import (
    CONSOLIDATED, CONSOLIDATED_MESSAGE, EMPTY)
from ansible_collections.resilient.virt.plugins.module_utils._failover.joining import (
    first_pair, joinable)
from ansible_collections.resilient.virt.plugins.module_utils._failover.towards_target import (
    migrate, moving_zones)


def consolidate(state):
    """In a cycle that gave no VM a slot: move the VMs of the least used reservations into
    others they fit in as they are (both slots of a VM when one will not do,
    :func:`move_both`) and delete the emptied ones, at most ``max_changes`` moves. The
    reservations realizing the target in the zones moving towards it are left as they are;
    those zones then move towards it with the rest of the budget (towards_target)."""
    if state.result.created or state.result.reused or state.result.moved or state.interim:
        return  # the plan is still growing: consolidate it once a cycle leaves it settled
    budget = state.settings.max_changes
    moving = moving_zones(state) if state.target is not None and state.settled and budget \
        else {}
    state.protected = {name for _target, moved in moving.values()
                       for name in moved.realized.values()}
    order = sorted(state.work.values(), key=lambda r: (
        len(r.allocations), reservation_size(r.resources)[1], r.name))
    received = set()  # a reservation that took VMs this cycle is not emptied in it
    for res in order:
        state.check_time()
        members = sorted(res.allocations)
        if res.name not in state.work or res.name in received or not members or \
                len(members) > budget or res.name in state.protected:
            continue
        if any(uuid not in state.vms for uuid in members):
            continue
        moves = plan_emptying(state, res, members, budget)
        if moves is None:
            continue
        budget -= len(moves)
        left = set()
        for uuid, source, target in moves:
            received.add(target)
            into, out = state.work[target], state.work[source]
            into.allocations[uuid] = out.allocations.pop(uuid)
            state.touch(into)
            state.reindex(target)
            state.result.removals.append(
                Removal(source, uuid, into.allocations[uuid], CONSOLIDATED % target))
            if source != res.name:
                left.add(source)
        state.result.moved += len(moves)
        state.delete(res.name, EMPTY, CONSOLIDATED_MESSAGE)
        for name in sorted(left):
            if state.work[name].allocations:
                state.touch(state.work[name])
                state.reindex(name)
            else:
                state.delete(name, EMPTY, CONSOLIDATED_MESSAGE)
    if moving:
        created_on = set()
        for az, (target, moved) in sorted(moving_zones(state).items()):
            if az in moving:  # still moving once consolidated
                budget = migrate(state, az, target, moved, budget, created_on)


def plan_emptying(state, res, members, budget):
    """[(vm uuid, from reservation, to reservation)] moving every member of ``res``
    elsewhere in at most ``budget`` moves, applied to the graph; None (the graph as it was)
    when one of them has nowhere to go."""
    index = state.zones.get(state.hv[res.host].az) if res.host in state.hv else None
    if index is None:
        return None
    moves = []
    for uuid in members:
        vm = state.vms[uuid]
        needs = state.fleet.trait_needs[uuid]
        state.graph.unlink(uuid, res.name)
        target = next(joinable(state, vm, needs, index, state.protected | {res.name}), None)
        state.graph.link(uuid, res.name)
        found = [(res.name, target)] if target is not None else \
            move_both(state, vm, res.name, needs, index)
        if found is None or len(moves) + len(found) > budget:
            for moved, source, into in reversed(moves):
                state.graph.unlink(moved, into)
                state.graph.link(moved, source)
            return None
        for source, into in found:
            state.graph.unlink(uuid, source)
            state.graph.link(uuid, into)
            moves.append((uuid, source, into))
    return moves


def move_both(state, vm, name, needs, index):
    """[(from, to), (from, to)]: ``vm``, holding ``name`` and one other reservation, takes
    two other existing reservations together instead (slots.slot_pairs, as they are);
    None when it holds another count or no pair qualifies."""
    held = sorted(state.graph.reservations_of(vm.uuid))
    if len(held) != 2:
        return None
    for old in held:
        state.graph.unlink(vm.uuid, old)
    options = [("share", other) for other in itertools.islice(
        joinable(state, vm, needs, index, state.protected.union(held)), PAIR_OPTIONS)]
    found = first_pair(state, vm, needs, options)
    for old in held:
        state.graph.link(vm.uuid, old)
    if found is None:
        return None
    other = held[1] if held[0] == name else held[0]
    return [(name, found[0][1]), (other, found[1][1])]


def fit_sizes(state):
    """Shrink reservations larger than the largest VM they serve (all VMs known)."""
    for name in sorted(state.work):
        res = state.work[name]
        if not res.allocations or resource_error(res.resources) or \
                any(uuid not in state.vms for uuid in res.allocations):
            continue
        cpu = max(state.vms[uuid].vcpus or 0 for uuid in res.allocations)
        mem = max(state.vms[uuid].memory_mb or 0 for uuid in res.allocations)
        held_cpu, held_mem = reservation_size(res.resources)
        if (cpu, mem) == (held_cpu, held_mem) or cpu > held_cpu or mem > held_mem:
            continue
        state.ledger.give_back(res.host, held_cpu - cpu, held_mem - mem)
        res.resources["cpu"], res.resources["memory_mb"] = cpu, mem
        state.touch(res)
        state.result.resized += 1
