# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which reservations a VM may join or grow for its next slot, best first, and the search of a
VM's missing slots over them (one at a time, or two existing ones together)."""
import itertools

from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    host_satisfies)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    resource_error, vm_fits)
from ansible_collections.resilient.virt.plugins.module_utils._failover.slots import (
    BRANCH_LIMIT, PAIR_OPTIONS, search_slots, slot_pairs)
from ansible_collections.resilient.virt.plugins.module_utils._failover.cycle_state import growth


def search(state, vm, missing, former, needs, index, picker, az):
    """Best sequence of at most ``missing`` slot options for ``vm`` (see slots.search_slots),
    looking for no more slots than the hypervisors that could hold one (:func:`hosts_left`):
    asked for more, the search finds nothing longer, in time exponential in the slots the zone
    cannot give."""
    if missing > 2:  # a search of one or two slots stays as it is, however short
        missing = min(missing, hosts_left(state, vm, former, needs, az))
    return search_slots(missing,
                        lambda: options(state, vm, needs, index, picker, az, former),
                        lambda option: try_option(state, vm, option, picker),
                        lambda option: untry_option(state, vm, option, picker))


def hosts_left(state, vm, former, needs, az):
    """How many hypervisors might still hold a slot of ``vm`` (trait needs ``needs``, zone
    ``az``): those of its zone with its traits and those of its ``former`` reservations,
    less its own host and the hosts of the slots it holds."""
    key = (az, needs)
    hosts = state.trait_hosts.get(key)
    if hosts is None:
        hosts = state.trait_hosts[key] = frozenset(
            hv.name for hv in state.hv.values() if hv.az == az and host_satisfies(hv.traits, needs))
    left = set(hosts)
    left.update(state.work[name].host for name in former)
    left.discard(vm.host)
    left.difference_update(state.graph.slot_hosts(vm.uuid))
    return len(left)


def pair(state, vm, needs, index, picker, az):
    """Two existing reservations ``vm`` may take together (see slots.slot_pairs), or
    None."""
    return first_pair(state, vm, needs, list(itertools.islice(
        options(state, vm, needs, index, picker, az, (), new=False), PAIR_OPTIONS)), picker)


def first_pair(state, vm, needs, options, picker=None):
    """The first of ``options``' pairs (slots.slot_pairs) that ``vm`` may take together,
    or None; the graph and ledger are left as they were."""
    free_of_traits = not needs.required and not needs.forbidden
    for first, second in slot_pairs(options, lambda option: state.work[option[1]].host,
                                    lambda option: state.graph.hosts_at(option[1]),
                                    lambda one, two: closes_a_triangle(state, one, two),
                                    lambda option: state.graph.pairs_closed(vm.host, option[1])):
        try_option(state, vm, first, picker)
        allowed = (may_join if second[0] == "share" else may_grow)(
            state, vm, second[1], needs, free_of_traits)
        untry_option(state, vm, first, picker)
        if allowed:
            return [first, second]
    return None


def closes_a_triangle(state, first, second):
    """True when options ``first`` and ``second`` each serve one VM alone and those two VMs
    share a third reservation. Such a pair is left to the slot search (the VM takes the
    first and a new one), as the reference system does: its case "5 VMs on 5 hosts with
    n=2" expects five reservations or more, where closing triangles holds four."""
    one, two = state.graph.members(first[1]), state.graph.members(second[1])
    if len(one) != 1 or len(two) != 1:
        return False
    (sole,), (other,) = one, two
    return not state.graph.reservations_of(sole).isdisjoint(state.graph.reservations_of(other))


def options(state, vm, needs, index, picker, az, former, new=True):
    """Choices for the VM's next slot, best first: ``former`` reservations (in order), then
    shared reservations, then (with ``new``) a new reservation.

    Packing offers those :func:`joinable` gives, then reservations of the VM's own kind
    that can grow to fit it, the least growth first (the plain greedy asks none:
    :func:`cover_plainly`)."""
    state.check_time()  # once per slot the search looks for, join questions or not
    free_of_traits = not needs.required and not needs.forbidden
    for name in former:
        if may_join(state, vm, name, needs, free_of_traits):
            yield "share", name
    for name in joinable(state, vm, needs, index, former):
        yield "share", name
    multi = state.multi[vm.uuid]
    for name in index.smaller(vm.memory_mb, spread=multi):
        if name not in former and state.serves_multi[name] == multi and may_share(state, name) \
                and may_grow(state, vm, name, needs, free_of_traits):
            yield "grow", name
    if not new:
        return
    host = picker.pick(vm, az, needs)
    if host is not None:
        yield "new", host


def joinable(state, vm, needs, index, skip):
    """Reservations of ``index`` that ``vm`` may join as it is under packing, best first,
    leaving out ``skip``: those of the VM's own kind (serving VMs requiring two or more
    slots, or not) before the others; the smallest size it fits first; within a size the most
    shared first for a one-slot VM, the least shared of those shared first for the others. For
    a VM requiring two or more slots the first BRANCH_LIMIT are reordered, those closing the
    fewest pairs first (docs/failover.md, "How much a plan holds", says why)."""
    free_of_traits = not needs.required and not needs.forbidden
    multi = state.multi[vm.uuid]
    kinds = (True, False) if multi else (False, True)
    kind_of = state.serves_multi.get
    names = (name for kind in kinds for name in index.fitting(vm.memory_mb or 0, spread=multi)
             if kind_of(name) == kind and name not in skip
             and may_share(state, name) and may_join(state, vm, name, needs, free_of_traits))
    if multi:
        first = list(itertools.islice(names, BRANCH_LIMIT))
        first.sort(key=lambda name: state.graph.pairs_closed(vm.host, name))
        yield from first
    yield from names


def may_share(state, name):
    """True unless, following the target, ``name`` is of the other kind than the slots packed
    now: interim reservations take only VMs covered for now (packing.cover_for_now), the
    others none of those."""
    return not state.follows or (name in state.interim) == state.packing_interim


def may_join(state, vm, name, needs, free_of_traits):
    """True when ``vm`` fits in ``name``, its host has the traits, and 1-5 keep holding."""
    state.count_check()
    res = state.work[name]
    return vm_fits(vm, res.resources) and (
        free_of_traits or host_satisfies(state.hv[res.host].traits, needs)) \
        and state.graph.can_join(vm.uuid, name)


def may_grow(state, vm, name, needs, free_of_traits):
    """True when ``name`` can grow to fit ``vm`` on its host and ``vm`` may then join it."""
    state.count_check()
    res = state.work[name]
    if resource_error(res.resources) or \
            not (free_of_traits or host_satisfies(state.hv[res.host].traits, needs)):
        return False
    more_cpu, more_mem = growth(res, vm)
    free_cpu, free_mem = state.ledger.free(res.host)
    return more_cpu <= free_cpu and more_mem <= free_mem and state.graph.can_join(vm.uuid, name)


def try_option(state, vm, option, picker):
    kind, target = option
    if kind == "share":
        state.graph.link(vm.uuid, target)
    elif kind == "grow":
        state.graph.link(vm.uuid, target)
        state.ledger.take(state.work[target].host, *growth(state.work[target], vm))
    else:
        state.graph.add_reservation(option, target)
        state.graph.link(vm.uuid, option)
        state.ledger.take(target, vm.vcpus, vm.memory_mb)
        picker.used(target)


def untry_option(state, vm, option, picker):
    kind, target = option
    if kind == "share":
        state.graph.unlink(vm.uuid, target)
    elif kind == "grow":
        state.graph.unlink(vm.uuid, target)
        state.ledger.give_back(state.work[target].host, *growth(state.work[target], vm))
    else:
        state.graph.remove_reservation(option)
        state.ledger.give_back(target, vm.vcpus, vm.memory_mb)
        picker.unused(target)
