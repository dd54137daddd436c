"""How much a plan holds: never more than a plain greedy's, never below the lower bound, grown
and shrunk to the VMs it serves, and packed over cycles without a VM losing a slot."""
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.resilient.virt.plugins.module_utils._failover.bounds import lower_bound
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    DependencyGraph, host_satisfies, required_count, trait_needs)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    VM, Hypervisor, Reservation)
from ansible_collections.resilient.virt.plugins.module_utils._failover import reconcile
from ansible_collections.resilient.virt.plugins.module_utils._failover.reconcile import run_cycle
from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import (
    FailoverSettings)

from .oracle import vm_keeps_the_rules
from .test_properties import (
    NOW, PROFILE, REQUIREMENTS, _memory, check_evacuations, check_result, fleets)


def plain_greedy(hypervisors, vms, requirements):
    """(slots missing, memory held, reservations) of the plain greedy, written here from its
    description: largest VM first (then by uuid); each slot in the reservation serving the most
    VMs that the VM may join as it is (zone, traits, size, rules; the oldest on a tie), else a
    new one sized to the VM on the least loaded hypervisor (memory in use / memory, then by
    name) of its zone that it may use and that has room. The rules are the oracle's."""
    by_name = {hv.name: hv for hv in hypervisors}
    free = {hv.name: [hv.cpu - hv.used_cpu, hv.memory_mb - hv.used_memory_mb] for hv in hypervisors}
    host_of = {vm.uuid: vm.host for vm in vms}
    slots = {vm.uuid: [] for vm in vms}
    res_host = {}
    held = []  # [name, host, cpu, memory, members]

    def keeps_rules(uuid, reservation):
        slots[uuid].append(reservation[0])
        reservation[4].append(uuid)
        kept = all(vm_keeps_the_rules(member, host_of, res_host, slots) for member in reservation[4])
        slots[uuid].pop()
        reservation[4].pop()
        return kept

    missing = 0
    for vm in sorted(vms, key=lambda v: (-v.memory_mb, v.uuid)):
        needs = trait_needs(vm.extra_specs)
        for _slot in range(required_count(vm.flavor, requirements)):
            shared = [r for r in held if by_name[r[1]].az == vm.az and r[2] >= vm.vcpus
                      and r[3] >= vm.memory_mb and host_satisfies(by_name[r[1]].traits, needs)
                      and vm.uuid not in r[4] and keeps_rules(vm.uuid, r)]
            if shared:
                best = min(shared, key=lambda r: (-len(r[4]), held.index(r)))
                best[4].append(vm.uuid)
                slots[vm.uuid].append(best[0])
                continue
            name = "g%d" % len(held)
            hosts = []
            for hv in sorted(hypervisors, key=lambda h: h.name):
                if hv.az != vm.az or not host_satisfies(hv.traits, needs) or \
                        free[hv.name][0] < vm.vcpus or free[hv.name][1] < vm.memory_mb:
                    continue
                res_host[name] = hv.name
                if keeps_rules(vm.uuid, [name, hv.name, 0, 0, []]):
                    hosts.append(((hv.memory_mb - free[hv.name][1]) / hv.memory_mb, hv.name))
                del res_host[name]
            if not hosts:
                missing += 1
                continue
            host = min(hosts)[1]
            res_host[name] = host
            slots[vm.uuid].append(name)
            free[host][0] -= vm.vcpus
            free[host][1] -= vm.memory_mb
            held.append([name, host, vm.vcpus, vm.memory_mb, [vm.uuid]])
    return missing, sum(r[3] for r in held), len(held)


def no_worse_than(result, greedy):
    """The plan leaves fewer slots missing than the greedy's (``plain_greedy``'s figures), or
    as many holding no more memory and no more reservations."""
    missing, memory, count = greedy
    ours = result.summary
    return ours["slots_missing"] < missing or (
        ours["slots_missing"] == missing and _memory(result.reservations) <= memory
        and len(result.reservations) <= count)


def _settings(limit, **more):
    return FailoverSettings(requirements=dict(REQUIREMENTS), limit_one_new_per_hypervisor=limit,
                            **more)


@settings(**PROFILE)
@given(fleets())
def test_never_holds_more_than_the_plain_greedy(fleet):
    hypervisors, vms, limit = fleet
    if limit:
        return  # the plain greedy opens as many reservations per host as it likes
    ours = run_cycle(hypervisors, vms, [], _settings(limit), now=NOW)
    greedy = plain_greedy(hypervisors, vms, REQUIREMENTS)
    assert no_worse_than(ours, greedy), (ours.summary, greedy)


@settings(**PROFILE)
@given(fleets())
def test_no_covering_plan_holds_less_than_the_lower_bound(fleet):
    hypervisors, vms, limit = fleet
    bound = lower_bound(vms, REQUIREMENTS, lambda vm: vm.az)
    result = run_cycle(hypervisors, vms, [], _settings(limit), now=NOW)
    if result.summary["slots_missing"] == 0:
        assert _memory(result.reservations) >= bound.memory_mb >= bound.failure_memory_mb
        assert len(result.reservations) >= bound.reservations >= bound.failure_reservations
    missing, memory, _count = plain_greedy(hypervisors, vms, REQUIREMENTS)
    if missing == 0:
        assert memory >= bound.memory_mb


def test_lower_bound_by_hand():
    gib = 1024
    vms = [VM("a1", "h1", "z", "one", 1, 8 * gib), VM("a2", "h1", "z", "one", 1, 2 * gib),
           VM("b1", "h2", "z", "one", 1, 4 * gib),
           VM("c1", "h3", "z", "two", 1, 16 * gib), VM("d1", "h4", "z", "two", 1, 16 * gib),
           VM("e1", "h5", "z", "two", 1, 4 * gib), VM("x", "h6", "y", "none", 1, 64 * gib)]
    bound = lower_bound(vms, {"one": 1, "two": 2}, lambda vm: vm.az)
    # failure: singles h1 [8, 2], h3 [16], h4 [16], h5 [4]; pairs of two-slot hosts
    # h3+h4 [16, 16], h3+h5 [16, 4], h4+h5 [16, 4]  ->  m = [16, 16]
    assert (bound.failure_memory_mb, bound.failure_reservations) == (32 * gib, 2)
    # sharing: 2 VMs of 16 GiB need 3 reservations of 16 GiB (1 pair only for 2 reservations),
    # the third two-slot VM needs no more (3 reservations give 3 pairs); at 2 GiB a1 and a2 of h1
    # hold two reservations no VM may hold together: 3 pairs + 1 barred need a 4th (the least
    # plan, by brute force: 4 reservations, 52 GiB)
    assert (bound.memory_mb, bound.reservations) == (48 * gib + 2 * gib, 4)
    # per size: 3 of at least 16 GiB, still 3 with a1 (8 GiB) and with b1 and e1 (4 GiB, 3 pairs
    # for 3 reservations), 4 with a2; zone y's VM requires no slot
    assert bound.counts == {"z": [(16 * gib, 3), (8 * gib, 3), (4 * gib, 3), (2 * gib, 4)]}


HOSTS = [Hypervisor("h%d" % i, "z", 16, 32 * 1024, frozenset(), 2, 4096) for i in range(6)]


def test_a_reservation_grows_rather_than_a_new_one_opens():
    small = VM("small", "h0", "z", "one.small", 1, 1024)
    big = VM("big", "h1", "z", "one.big", 2, 4096)
    held = Reservation("r", "h2", "z", {"cpu": 1, "memory_mb": 1024}, {"small": "h0"}, "c")
    result = run_cycle(HOSTS, [small, big], [held], _settings(False), now=NOW)
    [res] = result.reservations
    assert res.resources == {"cpu": 2, "memory_mb": 4096}
    assert res.allocations == {"small": "h0", "big": "h1"} and result.created == []


def test_a_two_slot_vm_joins_a_one_slot_vms_reservation_rather_than_open_one(monkeypatch):
    """Packing alone: big (one slot, 8 GiB) opens a reservation on h3; pair (two slots, 4 GiB)
    takes it as it is and opens one more, 12 GiB in two reservations, where keeping the two kinds
    apart opened two of its own (16 GiB in three). VMs of both kinds share sizes on most fleets
    that are not the bench's."""
    monkeypatch.setattr(reconcile, "STRATEGIES", (reconcile.PACK,))
    hosts = [Hypervisor("h%d" % i, "z", 16, 32 * 1024, frozenset(), 1, used)
             for i, used in ((1, 4096), (2, 8192), (3, 0), (4, 1024))]
    vms = [VM("big", "h1", "z", "one.big", 1, 8192), VM("pair", "h2", "z", "two.small", 1, 4096)]
    result = run_cycle(hosts, vms, [], _settings(False), now=NOW)
    check_result(hosts, vms, result)
    assert (len(result.reservations), _memory(result.reservations)) == (2, 12 * 1024)
    [shared] = [r for r in result.reservations if len(r.allocations) == 2]
    assert shared.host == "h3" and set(shared.allocations) == {"big", "pair"}


def test_two_missing_slots_close_the_graph_rather_than_open_a_reservation():
    """u holds a and b, w holds a and c (x, a one-slot VM, holds c too). The most shared a has no
    partner for v (u and w use both pairs it is in), so taking a first opens a new reservation;
    v takes b and c together instead, and the plan holds no more than before."""
    hosts = [Hypervisor("h%d" % i, "z", 16, 32 * 1024, frozenset(), 2, 4096) for i in range(1, 8)]
    vms = [VM("u", "h1", "z", "two.a", 1, 1024), VM("w", "h2", "z", "two.a", 1, 1024),
           VM("v", "h3", "z", "two.a", 1, 1024), VM("x", "h4", "z", "one.a", 1, 1024)]
    size = {"cpu": 1, "memory_mb": 1024}
    held = [Reservation("a", "h5", "z", dict(size), {"u": "h1", "w": "h2"}, "c"),
            Reservation("b", "h6", "z", dict(size), {"u": "h1"}, "c"),
            Reservation("c", "h7", "z", dict(size), {"w": "h2", "x": "h4"}, "c")]
    result = run_cycle(hosts, vms, held, _settings(False), now=NOW)
    check_result(hosts, vms, result)
    check_evacuations(hosts, vms, result.reservations)
    assert result.created == []
    assert sorted(r.name for r in result.reservations if "v" in r.allocations) == ["b", "c"]


def test_a_reservation_grows_only_within_its_hypervisors_room():
    small = VM("small", "h0", "z", "one.small", 1, 1024)
    big = VM("big", "h1", "z", "one.big", 2, 4096)
    full = Hypervisor("h2", "z", 16, 32 * 1024, frozenset(), 15, 31 * 1024)  # room for r only
    hosts = [hv if hv.name != "h2" else full for hv in HOSTS]
    held = Reservation("r", "h2", "z", {"cpu": 1, "memory_mb": 1024}, {"small": "h0"}, "c")
    result = run_cycle(hosts, [small, big], [held], _settings(False), now=NOW)
    check_result(hosts, [small, big], result)
    by_name = result.reservations_by_name()
    assert by_name["r"].resources == {"cpu": 1, "memory_mb": 1024}
    [new] = result.created
    assert by_name[new].allocations == {"big": "h1"} and by_name[new].host != "h2"


def test_a_reservation_shrinks_when_its_largest_vm_leaves():
    small = VM("small", "h0", "z", "one.small", 1, 1024)
    held = Reservation("r", "h2", "z", {"cpu": 2, "memory_mb": 4096},
                       {"small": "h0", "gone": "h1"}, "c")
    result = run_cycle(HOSTS, [small], [held], _settings(False), now=NOW)
    [res] = result.reservations
    assert res.resources == {"cpu": 1, "memory_mb": 1024} and result.summary["resized"] == 1


@st.composite
def bloated(draw):
    """(hypervisors, vms, reservations): one-slot and two-slot VMs, each with private
    reservations (a two-slot VM's two on two other hosts)."""
    host_count = draw(st.integers(3, 7))
    hosts = ["h%d" % i for i in range(host_count)]
    vms = [VM("vm-%02d" % i, hosts[draw(st.integers(0, host_count - 1))], "z",
              draw(st.sampled_from(("one.small", "one.small", "two.small"))), 1, 1024)
           for i in range(draw(st.integers(2, 12)))]
    reservations = []
    for vm in vms:
        others = [h for h in hosts if h != vm.host]
        slots = draw(st.permutations(others))[:2 if vm.flavor == "two.small" else 1]
        for number, host in enumerate(slots):
            reservations.append(Reservation("p%d-%s" % (number, vm.uuid), host, "z",
                                            {"cpu": 1, "memory_mb": 1024}, {vm.uuid: vm.host},
                                            "c"))
    hypervisors = []
    for name in hosts:
        used = sum(1 for vm in vms if vm.host == name)
        hypervisors.append(Hypervisor(name, "z", used + 16, (used + 16) * 1024, frozenset(), used,
                                      used * 1024))
    return hypervisors, vms, reservations, draw(st.integers(1, 3))


@settings(**PROFILE)
@given(bloated())
def test_consolidation_packs_within_max_changes_and_settles(case):
    hypervisors, vms, reservations, max_changes = case
    settings_ = _settings(True, max_changes=max_changes)
    held = {vm.uuid: 2 if vm.flavor == "two.small" else 1 for vm in vms}
    start = _memory(reservations)
    for cycle in range(3 * len(vms) + 2):
        result = run_cycle(hypervisors, vms, reservations, settings_, now=NOW + 60 * cycle,
                           cycle=cycle)
        check_result(hypervisors, vms, result)
        check_evacuations(hypervisors, vms, result.reservations)
        moves = [r for r in result.removals if r.reason.startswith("Consolidated")]
        assert len(moves) <= max_changes
        assert all(s.held >= held[s.uuid] for s in result.vm_status)
        if not result.created:  # only moving towards the plan built from nothing creates
            assert _memory(result.reservations) <= _memory(reservations)
        if not result.changed_anything:
            break
        reservations = result.reservations
    assert not result.changed_anything and _memory(result.reservations) <= start


def test_consolidation_empties_private_reservations_into_shared_ones():
    # four VMs on h0 and h1, each with a private reservation on h2 or h3: two reservations
    # (one per rank: a VM of h0 beside a VM of h1) are enough, and each cycle moves at most one
    vms = [VM("a1", "h0", "z", "one.small", 1, 1024), VM("a2", "h0", "z", "one.small", 1, 1024),
           VM("b1", "h1", "z", "one.small", 1, 1024), VM("b2", "h1", "z", "one.small", 1, 1024)]
    reservations = [Reservation("p-" + vm.uuid, "h2" if vm.uuid.endswith("1") else "h3", "z",
                                {"cpu": 1, "memory_mb": 1024}, {vm.uuid: vm.host}, "c")
                    for vm in vms]
    settings_ = _settings(True, max_changes=1)
    counts = []
    for cycle in range(6):
        result = run_cycle(HOSTS, vms, reservations, settings_, now=NOW + 60 * cycle, cycle=cycle)
        check_result(HOSTS, vms, result)
        counts.append(len(result.reservations))
        reservations = result.reservations
    assert counts == [3, 2, 2, 2, 2, 2]
    assert sorted(sorted(r.allocations.values()) for r in reservations) == [["h0", "h1"]] * 2


def _two_slot_plan():
    """t (h1, two slots) holds m on h5 and n on h6; o1 (h2, one slot) holds s on h4."""
    size = {"cpu": 1, "memory_mb": 4096}
    return [Reservation("m", "h5", "z", dict(size), {"t": "h1"}, "c"),
            Reservation("n", "h6", "z", dict(size), {"t": "h1"}, "c"),
            Reservation("s", "h4", "z", {"cpu": 1, "memory_mb": 1024}, {"o1": "h2"}, "c")]


def test_a_one_slot_vm_joins_a_two_slot_vms_reservation_rather_than_open_one():
    """o2 runs on h2 like o1, so it may not share s (rule 3); it joins m as it is (t on h1,
    m on h5 and n on h6 all keep the rules) instead of opening a reservation. o3, on h3, still
    takes s, the one-slot VMs' own reservation, first."""
    hosts = [Hypervisor("h%d" % i, "z", 16, 32 * 1024, frozenset(), 2, 4096) for i in range(1, 7)]
    vms = [VM("t", "h1", "z", "two.big", 1, 4096), VM("o1", "h2", "z", "one.small", 1, 1024),
           VM("o2", "h2", "z", "one.small", 1, 1024), VM("o3", "h3", "z", "one.small", 1, 1024)]
    result = run_cycle(hosts, vms, _two_slot_plan(), _settings(False), now=NOW)
    check_result(hosts, vms, result)
    check_evacuations(hosts, vms, result.reservations)
    assert result.created == []
    members = {r.name: sorted(r.allocations) for r in result.reservations}
    assert members == {"m": ["o2", "t"], "n": ["t"], "s": ["o1", "o3"]}
    assert _memory(result.reservations) == 4096 + 4096 + 1024


def test_consolidation_moves_a_one_slot_vm_into_a_two_slot_vms_reservation():
    """A settled plan: o1's private s empties into m (its only possible target) and is deleted;
    t's two slots stay where they are."""
    hosts = [Hypervisor("h%d" % i, "z", 16, 32 * 1024, frozenset(), 2, 4096) for i in range(1, 7)]
    vms = [VM("t", "h1", "z", "two.big", 1, 4096), VM("o1", "h2", "z", "one.small", 1, 1024)]
    result = run_cycle(hosts, vms, _two_slot_plan(), _settings(False), now=NOW)
    check_result(hosts, vms, result)
    check_evacuations(hosts, vms, result.reservations)
    assert {r.name: sorted(r.allocations) for r in result.reservations} == {
        "m": ["o1", "t"], "n": ["t"]}
    assert [(r.reservation, r.vm, r.reason) for r in result.removals] == [
        ("s", "o1", "Consolidated: moved to m")]


def test_consolidation_moves_both_slots_of_a_two_slot_vm_to_empty_a_reservation():
    """t (h1) holds X (on h3) alone and Y (on h4) with v (h5; trait T, which only h4 has).
    u (h5, two cpus) holds P and P2, x (h4, 2 GiB) Q and Q2. Beside Y, t may take no P (u runs
    on h5 like v: rule 5) and no Q (x runs on h4, Y's host: rule 4), so X cannot be emptied
    one slot at a time; but t may take P and Q together. No other reservation can be emptied:
    only P and P2 fit u, only Q and Q2 fit x, and only Y has trait T for v. So t moves both
    slots, X is deleted and Y keeps v."""
    hosts = [Hypervisor("h%d" % i, "z", 16, 32 * 1024, frozenset(["T"] if i == 4 else []), 2, 4096)
             for i in range(1, 9)]
    vms = [VM("t", "h1", "z", "two.small", 1, 1024),
           VM("v", "h5", "z", "one.small", 1, 1024, {"trait:T": "required"}),
           VM("u", "h5", "z", "two.small", 2, 1024), VM("x", "h4", "z", "two.small", 1, 2048)]
    small, wide, long_ = ({"cpu": 1, "memory_mb": 1024}, {"cpu": 2, "memory_mb": 1024},
                          {"cpu": 1, "memory_mb": 2048})
    plan = [Reservation("X", "h3", "z", dict(small), {"t": "h1"}, "c"),
            Reservation("Y", "h4", "z", dict(small), {"t": "h1", "v": "h5"}, "c"),
            Reservation("P", "h6", "z", dict(wide), {"u": "h5"}, "c"),
            Reservation("P2", "h7", "z", dict(wide), {"u": "h5"}, "c"),
            Reservation("Q", "h2", "z", dict(long_), {"x": "h4"}, "c"),
            Reservation("Q2", "h8", "z", dict(long_), {"x": "h4"}, "c")]
    result = run_cycle(hosts, vms, plan, _settings(False), now=NOW)
    check_result(hosts, vms, result)
    check_evacuations(hosts, vms, result.reservations)
    assert {r.name: sorted(r.allocations) for r in result.reservations} == {
        "P": ["t", "u"], "P2": ["u"], "Q": ["t", "x"], "Q2": ["x"], "Y": ["v"]}
    assert sorted((r.reservation, r.vm, r.reason) for r in result.removals) == [
        ("X", "t", "Consolidated: moved to P"), ("Y", "t", "Consolidated: moved to Q")]
    assert [d.reservation.name for d in result.deleted] == ["X"]
    assert result.created == [] and result.moved == 2
    again = run_cycle(hosts, vms, result.reservations, _settings(False), now=NOW + 60, cycle=1)
    assert not again.changed_anything


def _private_plan():
    """v0 (h0), v1 and v2 (both h3) require two slots each, every slot a reservation of its own
    (six of 1 GiB on h0 to h3), and no VM may move a slot or both: settled and packed as far as
    moves go."""
    hosts = [Hypervisor("h%d" % i, "z", 64, 64 * 1024, frozenset(), 2 if i in (0, 3) else 0,
                        2048 if i in (0, 3) else 0) for i in range(4)]
    vms = [VM("v0", "h0", "z", "two.small", 1, 1024), VM("v1", "h3", "z", "two.small", 1, 1024),
           VM("v2", "h3", "z", "two.small", 1, 1024)]
    slots = [("r0", "h2", "v0"), ("r1", "h3", "v0"), ("r2", "h0", "v1"), ("r3", "h1", "v1"),
             ("r4", "h0", "v2"), ("r5", "h2", "v2")]
    plan = [Reservation(name, host, "z", {"cpu": 1, "memory_mb": 1024},
                        {uuid: "h0" if uuid == "v0" else "h3"}, "c") for name, host, uuid in slots]
    return hosts, vms, plan


def _cycles_until_settled(hosts, vms, plan, settings_, most=6):
    """The results of cycles from ``plan`` until one changes nothing (``most`` at most), each
    checked: rules 1-5 and the failure guarantee hold, no VM holds fewer slots than before, a
    move's target holds the VM, at most ``max_changes`` moves, and under the limit at most one
    new reservation per hypervisor."""
    results, held = [], {vm.uuid: 0 for vm in vms}
    for res in plan:
        for uuid in res.allocations:
            held[uuid] += 1
    for cycle in range(most):
        result = run_cycle(hosts, vms, plan, settings_, now=NOW + 60 * cycle, cycle=cycle)
        check_result(hosts, vms, result)
        check_evacuations(hosts, vms, result.reservations)
        assert all(s.held >= held[s.uuid] for s in result.vm_status)
        held = {s.uuid: s.held for s in result.vm_status}
        kept = result.reservations_by_name()
        for removal in result.removals:
            assert removal.reason.startswith("Consolidated: moved to ")
            assert removal.vm in kept[removal.reason[len("Consolidated: moved to "):]].allocations
        assert len(result.removals) <= settings_.max_changes
        created_on = [kept[name].host for name in result.created]
        if settings_.limit_one_new_per_hypervisor:
            assert len(created_on) == len(set(created_on))
        results.append(result)
        if not result.changed_anything:
            return results
        plan = result.reservations
    raise AssertionError("not settled in %d cycles" % most)


def test_a_settled_plan_moves_towards_the_plan_built_from_nothing():
    """v1 and v2 run on h3: their four slots are distinct reservations (rules 2 and 3), and v0
    holds at most one of them (rule 5), so five is the least any valid plan holds. No single
    move or pair of moves packs the six private reservations, but the plan built from nothing
    holds five, more than 10 % less: the VMs move towards it, with or without the limit per
    hypervisor, and the plan settles at five (each slot moved at most once)."""
    hosts, vms, plan = _private_plan()
    for limit in (False, True):
        results = _cycles_until_settled(hosts, vms, plan, _settings(limit))
        final = results[-1].reservations
        assert len(final) == 5 and _memory(final) == 5 * 1024
        assert any(result.created for result in results)
        assert sum(result.moved for result in results) <= 6


def test_moving_towards_the_plan_built_from_nothing_keeps_max_changes():
    """max_changes 0 turns moving off, as it does consolidation; with 1, one slot moves a
    cycle (a VM with two slots to move would wait for a budget of 2)."""
    hosts, vms, plan = _private_plan()
    result = run_cycle(hosts, vms, plan, _settings(False, max_changes=0), now=NOW)
    assert not result.changed_anything and result.moved == 0
    results = _cycles_until_settled(hosts, vms, plan, _settings(False, max_changes=1), most=8)
    assert all(result.moved <= 1 for result in results)
    assert len(results[-1].reservations) == 5


def _limited_fleet():
    """h1 runs a and b (two slots, 4 GiB), h2 c (two slots, 1 GiB), h3 d and e (one slot,
    1 GiB; e requires trait X, which only h5 has, with room for 2 GiB). h2 to h4 have equal room,
    so new reservations go to h2, h3, h4 in that order."""
    hosts = [Hypervisor("h%d" % i, "z", 16, 32 * 1024, frozenset(), 2, 4096) for i in range(1, 5)]
    hosts.append(Hypervisor("h5", "z", 4, 8 * 1024, frozenset(["X"]), 2, 6 * 1024))
    vms = [VM("a", "h1", "z", "two.big", 1, 4096), VM("b", "h1", "z", "two.big", 1, 4096),
           VM("c", "h2", "z", "two.small", 1, 1024), VM("d", "h3", "z", "one.small", 1, 1024),
           VM("e", "h3", "z", "one.small", 1, 1024, {"trait:X": "required"})]
    return hosts, vms


def test_under_the_limit_smaller_vms_wait_for_a_larger_one_the_limit_left_short(monkeypatch):
    """The packing plan alone (here the plain greedy's, giving c and d slots in b's reservation
    at once, would be kept). a opens reservations on h2 and h3. b, on a's host, may share
    neither (rule 3): it opens one on h4 and would open its second on h2 or h3, which already got
    one this cycle. So c (two slots), after b in zone z with no trait needs, waits for the next
    cycle instead of taking the reservations built for a and b; d, requiring one slot, does not
    wait, and neither does e, needing trait X (it opens one on h5)."""
    monkeypatch.setattr(reconcile, "STRATEGIES", (reconcile.PACK,))
    hosts, vms = _limited_fleet()
    first = run_cycle(hosts, vms, [], _settings(True), now=NOW)
    check_result(hosts, vms, first)
    status = {s.uuid: s for s in first.vm_status}
    assert (status["a"].held, status["b"].held, status["d"].held, status["e"].held) == (2, 1, 1, 1)
    assert "already got a new reservation this cycle" in status["b"].why
    assert status["d"].why is None and status["e"].why is None
    assert status["c"].held == 0 and all("c" not in r.allocations for r in first.reservations)
    assert status["c"].why.startswith("waiting for a later cycle: VM b,")
    assert "limit_one_new_per_hypervisor" in status["c"].why
    result, cycles = first, 1
    while result.changed_anything and cycles < 6:  # later cycles serve them, keeping every rule
        result = run_cycle(hosts, vms, result.reservations, _settings(True),
                           now=NOW + 60 * cycles, cycle=cycles)
        check_result(hosts, vms, result)
        check_evacuations(hosts, vms, result.reservations)
        cycles += 1
    assert result.summary["slots_missing"] == 0 and not result.changed_anything


def test_without_the_limit_no_vm_waits(monkeypatch):
    monkeypatch.setattr(reconcile, "STRATEGIES", (reconcile.PACK,))
    hosts, vms = _limited_fleet()
    result = run_cycle(hosts, vms, [], _settings(False), now=NOW)
    check_result(hosts, vms, result)
    check_evacuations(hosts, vms, result.reservations)
    assert result.summary["slots_missing"] == 0
    assert all(s.why is None for s in result.vm_status)


def test_a_vm_short_for_want_of_room_holds_no_other_vm(monkeypatch):
    """Packing alone (the plain greedy has no waiting rule): no hypervisor has room for big's
    4 GiB (h1 is its own host): big stays short, and small, after it in the same zone with the
    same trait needs, still gets its two slots."""
    monkeypatch.setattr(reconcile, "STRATEGIES", (reconcile.PACK,))
    hosts = [Hypervisor("h1", "z", 16, 32 * 1024, frozenset(), 2, 4096)]
    hosts += [Hypervisor("h%d" % i, "z", 4, 6 * 1024, frozenset(), 1, 4096) for i in (2, 3, 4)]
    vms = [VM("big", "h1", "z", "two.big", 1, 4096), VM("small", "h2", "z", "two.small", 1, 1024)]
    result = run_cycle(hosts, vms, [], _settings(True), now=NOW)
    check_result(hosts, vms, result)
    status = {s.uuid: s for s in result.vm_status}
    assert status["big"].held == 0 and "without room" in status["big"].why
    assert status["small"].held == 2 and status["small"].why is None


def _closing_fleet(reservations, vms):
    """Hosts h1-h14 with room to spare; s, a one-slot VM on v's host h1, holds x on h9."""
    hosts = [Hypervisor("h%d" % i, "z", 16, 64 * 1024, frozenset(), 2, 4096) for i in range(1, 15)]
    vms = [VM("v", "h1", "z", "two.big", 1, 2048), VM("s", "h1", "z", "one.small", 1, 1024)] + vms
    held = [Reservation("x", "h9", "z", {"cpu": 1, "memory_mb": 1024}, {"s": "h1"}, "c")]
    held += [Reservation(name, host, "z", {"cpu": 1, "memory_mb": 2048}, members, "c")
             for name, host, members in reservations]
    return hosts, vms, held


def test_pairs_closed_by_hand():
    """A VM on h1 joining a closes the pairs a-x and a-y: s and s3, VMs on h1, use x (on h9)
    and y (on h13), and no host is at a and x, or a and y, yet. With x, each of the others is
    closed already: c is on h9 like x (rule 2), d has a VM on h8 like x, and f is on h8, where a
    VM of x runs. e has a VM on h13, where y is placed, so only e-x closes. Nothing runs on h4
    or is placed there; x and c are placed on h9."""
    graph = DependencyGraph()
    for uuid, host in (("s", "h1"), ("s2", "h8"), ("s3", "h1"), ("p", "h2"), ("q", "h11"),
                       ("t", "h8"), ("w", "h13"), ("v", "h1")):
        graph.add_vm(uuid, host)
    for name, host, members in (("x", "h9", ("s", "s2")), ("a", "h5", ("p",)),
                                ("c", "h9", ("q",)), ("d", "h7", ("t",)),
                                ("y", "h13", ("s3",)), ("e", "h6", ("w",)), ("f", "h8", ())):
        graph.add_reservation(name, host)
        for uuid in members:
            graph.link(uuid, name)
    assert graph.pairs_closed("h1", "a") == 2  # a-x and a-y
    assert graph.pairs_closed("h1", "c") == 1  # c-y only
    assert graph.pairs_closed("h1", "d") == 1  # d-y only
    assert graph.pairs_closed("h1", "e") == 1  # e-x only
    assert graph.pairs_closed("h1", "f") == 1  # f-y only
    assert graph.pairs_closed("h4", "a") == 0  # nothing runs on h4 or is placed there
    assert graph.pairs_closed("h9", "a") == 2  # x and c are placed on h9


def test_a_two_slot_vm_takes_the_pair_that_closes_no_other_pair():
    """v may take a and b, or c and d: a and b are shared by more hosts (the order before), but
    v joining them would close a-x and b-x, as s, in x, runs on v's host. c is on h9 like x, and
    d has a VM on h8 like x, so c-x and d-x were closed already: v takes c and d."""
    hosts, vms, held = _closing_fleet(
        [("a", "h5", {"p1": "h2", "p2": "h3"}), ("b", "h6", {"p3": "h4", "p4": "h10"}),
         ("c", "h9", {"p5": "h11"}), ("d", "h7", {"p6": "h12", "t": "h8"})],
        [VM(uuid, host, "z", "two.small", 1, 1024) for uuid, host in (
            ("p1", "h2"), ("p2", "h3"), ("p3", "h4"), ("p4", "h10"), ("p5", "h11"), ("p6", "h12"))]
        + [VM("t", "h8", "z", "one.small", 1, 1024), VM("s2", "h8", "z", "one.small", 1, 1024)])
    held[0].allocations["s2"] = "h8"
    result = run_cycle(hosts, vms, held, _settings(False), now=NOW)
    check_result(hosts, vms, result)
    check_evacuations(hosts, vms, result.reservations)
    assert sorted(r.name for r in result.reservations if "v" in r.allocations) == ["c", "d"]


def test_a_two_slot_vm_short_of_a_pair_takes_the_reservation_that_closes_no_other_pair():
    """No two of a and c take v together (p2 and p5 both run on h3), so v takes one of them and
    a new one: c, on h9 like x, closes no pair, where a (shared by more hosts) would close a-x."""
    hosts, vms, held = _closing_fleet(
        [("a", "h5", {"p1": "h2", "p2": "h3"}), ("c", "h9", {"p5": "h3"})],
        [VM(uuid, host, "z", "two.small", 1, 1024) for uuid, host in (
            ("p1", "h2"), ("p2", "h3"), ("p5", "h3"))])
    result = run_cycle(hosts, vms, held, _settings(False), now=NOW)
    check_result(hosts, vms, result)
    check_evacuations(hosts, vms, result.reservations)
    mine = sorted(r.name for r in result.reservations if "v" in r.allocations)
    assert mine[0] == "c" and mine[1] in result.created
