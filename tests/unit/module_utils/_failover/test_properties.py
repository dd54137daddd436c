"""Properties of the failover cycle on random fleets, checked by brute force."""
import itertools
import random
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.resilient.virt.plugins.module_utils._failover.evacuation import (
    plan_evacuation)
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import DependencyGraph
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import VM, Hypervisor
from ansible_collections.resilient.virt.plugins.module_utils._failover.reconcile import (
    EMPTY, REPLACED, run_cycle)
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    required_count)
from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import (
    DEFAULT_MAX_CHANGES, FailoverSettings)
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    host_satisfies, trait_needs)

from .oracle import guarantee_breaches, plan_errors, vm_keeps_the_rules
from .reference import would_be_eligible

REQUIREMENTS = {"one.*": 1, "two.*": 2, "none": 0}
FLAVORS = ("one.small", "one.big", "two.small", "two.big", "none")
SIZES = {"small": (1, 1024), "big": (2, 4096)}
NOW = 1.8e9
PROFILE = dict(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def fleets(draw):
    """(hypervisors, vms, limit_one_new_per_hypervisor) with no host over capacity."""
    zones = ["az-a", "az-b"][:draw(st.integers(1, 2))]
    host_count = draw(st.integers(2, 9))
    hosts = [("h%d" % i, zones[i % len(zones)], draw(st.booleans()) and i % 3 == 0)
             for i in range(host_count)]
    vms = []
    for index in range(draw(st.integers(0, 16))):
        name, zone, dummy = hosts[draw(st.integers(0, host_count - 1))]
        flavor = draw(st.sampled_from(FLAVORS))
        cpu, mem = SIZES[flavor.split(".")[-1]] if "." in flavor else (1, 512)
        specs = {"trait:FAST": draw(st.sampled_from(["required", "forbidden", "none"]))}
        vms.append(VM("vm-%02d" % index, name, zone, flavor, cpu, mem,
                      {k: v for k, v in specs.items() if v != "none"}))
    hypervisors = []
    for name, zone, fast in hosts:
        used_cpu = sum(v.vcpus for v in vms if v.host == name)
        used_mem = sum(v.memory_mb for v in vms if v.host == name)
        hypervisors.append(Hypervisor(
            name, zone, used_cpu + draw(st.integers(0, 8)),
            used_mem + 1024 * draw(st.integers(0, 16)),
            frozenset(["FAST"]) if fast else frozenset(), used_cpu, used_mem))
    return hypervisors, vms, draw(st.booleans())


def _settings(limit):
    return FailoverSettings(requirements=dict(REQUIREMENTS), limit_one_new_per_hypervisor=limit)


def constraint_violations(reservations, vm_host):
    """Every breach of constraints 1-5, found the slow, obvious way."""
    found = []
    slots = {}
    for res in reservations:
        hosts = [vm_host[u] for u in res.allocations]
        if len(hosts) != len(set(hosts)):
            found.append(("3", res.name))
        for uuid in res.allocations:
            slots.setdefault(uuid, []).append(res)
    for uuid, held in slots.items():
        own = vm_host[uuid]
        slot_hosts = [r.host for r in held]
        if own in slot_hosts:
            found.append(("1", uuid))
        if len(set(slot_hosts)) != len(slot_hosts):
            found.append(("2", uuid))
        others = Counter(u for r in held for u in r.allocations if u != uuid)
        for other, count in others.items():
            if vm_host[other] == own or vm_host[other] in slot_hosts:
                found.append(("4", uuid, other))
            if count > 1:
                found.append(("5", uuid, other))
        other_hosts = [vm_host[o] for o in others]
        if len(other_hosts) != len(set(other_hosts)):
            found.append(("5", uuid))
    return found


def check_result(hypervisors, vms, result):
    by_host = {hv.name: hv for hv in hypervisors}
    by_uuid = {vm.uuid: vm for vm in vms}
    vm_host = {vm.uuid: vm.host for vm in vms}
    assert constraint_violations(result.reservations, vm_host) == []
    for res in result.reservations:
        hv = by_host[res.host]
        assert res.allocations, res.name
        for uuid, host in res.allocations.items():
            vm = by_uuid[uuid]
            assert host == vm.host and res.host != vm.host and hv.az == vm.az
            assert vm.vcpus <= res.resources["cpu"] and vm.memory_mb <= res.resources["memory_mb"]
            assert host_satisfies(hv.traits, trait_needs(vm.extra_specs))
    for hv in hypervisors:
        on_host = [r for r in result.reservations if r.host == hv.name]
        assert hv.used_cpu + sum(r.resources["cpu"] for r in on_host) <= hv.cpu
        assert hv.used_memory_mb + sum(r.resources["memory_mb"] for r in on_host) <= hv.memory_mb
    held = Counter(u for r in result.reservations for u in r.allocations)
    for vm in vms:
        assert held[vm.uuid] <= required_count(vm.flavor, REQUIREMENTS)
    status = {s.uuid: s for s in result.vm_status}
    for vm in vms:
        if held[vm.uuid] or required_count(vm.flavor, REQUIREMENTS):
            assert status[vm.uuid].held == held[vm.uuid]
            assert (status[vm.uuid].why is None) == (status[vm.uuid].short_by == 0)


def check_evacuations(hypervisors, vms, reservations):
    """For k failed hosts, every VM there that requires and holds >= k slots gets one of them:
    judged by the oracle's own matching, then the evacuation plan judged against it."""
    held = Counter(u for r in reservations for u in r.allocations)
    hosts = [hv.name for hv in hypervisors]
    covered = {vm.uuid: min(held[vm.uuid], required_count(vm.flavor, REQUIREMENTS)) for vm in vms}
    assert guarantee_breaches(hosts, vms, reservations, covered) == []
    for size in (1, 2):
        protected = [vm for vm in vms if covered[vm.uuid] >= size]
        for failed in itertools.combinations(hosts, size):
            plan = plan_evacuation(failed, protected, reservations).to_dict()
            assert plan_errors(plan, protected, reservations, failed) == [], plan
            assert plan["complete"] and not plan["unplaced"], plan


@settings(**PROFILE)
@given(fleets())
def test_cycle_keeps_every_rule_and_survives_failures(fleet):
    hypervisors, vms, limit = fleet
    result = run_cycle(hypervisors, vms, [], _settings(limit), now=NOW)
    check_result(hypervisors, vms, result)
    check_evacuations(hypervisors, vms, result.reservations)


@settings(**PROFILE)
@given(fleets())
def test_same_input_same_plan(fleet):
    hypervisors, vms, limit = fleet
    first = run_cycle(hypervisors, vms, [], _settings(limit), now=NOW, cycle=3)
    again = run_cycle(list(reversed(hypervisors)), list(reversed(vms)), [], _settings(limit),
                      now=NOW, cycle=3)
    assert first.to_dict() == again.to_dict()


@settings(**PROFILE)
@given(fleets())
def test_second_cycle_keeps_every_slot_and_only_packs(fleet):
    hypervisors, vms, limit = fleet
    first = run_cycle(hypervisors, vms, [], _settings(limit), now=NOW)
    second = run_cycle(hypervisors, vms, first.reservations, _settings(limit), now=NOW + 60, cycle=1)
    check_result(hypervisors, vms, second)
    held_before = {s.uuid: s.held for s in first.vm_status}
    status = {s.uuid: s for s in second.vm_status}
    moved = Counter()
    for removal in second.removals:
        if removal.reason.startswith("Consolidated: moved to "):
            # a move: the VM holds the target in the same result, so it keeps its count
            target = removal.reason[len("Consolidated: moved to "):]
            assert second.reservations_by_name()[target].allocations[removal.vm] == removal.host
            moved[removal.vm] += 1
            continue
        # otherwise only a VM short after the first cycle leaves a slot, and only for a full set
        assert removal.reason == REPLACED and status[removal.vm].short_by == 0
        assert held_before[removal.vm] < status[removal.vm].required
    assert sum(moved.values()) <= DEFAULT_MAX_CHANGES
    assert all(deletion.reason == EMPTY for deletion in second.deleted)
    assert all(status[uuid].held >= held for uuid, held in held_before.items())
    if first.summary["coverage_ratio"] == 1.0:
        assert second.summary["coverage_ratio"] == 1.0
        if not second.created:  # packed; moving towards the plan built from nothing creates
            assert _memory(second.reservations) <= _memory(first.reservations)
    check_evacuations(hypervisors, vms, second.reservations)


def _memory(reservations):
    return sum(r.resources["memory_mb"] for r in reservations)


def _kept(reservations):
    """What a plan holds: each reservation's host, size and VMs."""
    return sorted((r.name, r.host, sorted(r.resources.items()), sorted(r.allocations.items()))
                  for r in reservations)


def _interim(reservations):
    """How many reservations carry the Interim condition."""
    return sum(any(c.get("type") == "Interim" and c.get("status") in (True, "True")
                   for c in r.conditions) for r in reservations)


@settings(**PROFILE)
@given(fleets())
def test_repeated_cycles_take_no_slot_from_a_vm_and_settle(fleet):
    # Every cycle that changes something adds a slot somewhere or packs the plan, holding
    # less: a slot or a packing per slot required, and one more, settle the fleets drawn here.
    hypervisors, vms, limit = fleet
    bound = 2 * sum(required_count(vm.flavor, REQUIREMENTS) for vm in vms) + 1
    reservations, held = [], {}
    for cycle in range(bound):
        result = run_cycle(hypervisors, vms, reservations, _settings(limit), now=NOW + 60 * cycle,
                           cycle=cycle)
        check_result(hypervisors, vms, result)
        now_held = {s.uuid: s.held for s in result.vm_status}
        assert all(now_held[uuid] >= count for uuid, count in held.items())
        if not result.changed_anything:
            break
        reservations, held = result.reservations, now_held
    assert not result.changed_anything and result.removals == []
    again = run_cycle(hypervisors, vms, result.reservations, _settings(limit),
                      now=NOW + 60 * bound, cycle=bound)
    assert not again.changed_anything and again.removals == []


def _random_valid_graph(rng):
    """A graph grown by exact eligibility checks, with its (vm -> host) map."""
    hosts = ["h%d" % i for i in range(rng.randint(3, 8))]
    vm_host = {"v%d" % i: rng.choice(hosts) for i in range(rng.randint(1, 12))}
    graph = DependencyGraph()
    for uuid, host in vm_host.items():
        graph.add_vm(uuid, host)
    names = []
    for index in range(rng.randint(1, 8)):
        names.append("r%d" % index)
        graph.add_reservation(names[-1], rng.choice(hosts))
    for _dummy in range(rng.randint(0, 40)):
        uuid, name = rng.choice(sorted(vm_host)), rng.choice(names)
        if would_be_eligible(graph, uuid, name):
            graph.link(uuid, name)
    return graph, vm_host, hosts, names


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10 ** 9))
def test_fast_join_check_matches_the_exact_one(seed):
    rng = random.Random(seed)
    graph, vm_host, hosts, names = _random_valid_graph(rng)
    assert all(graph.vm_ok(u) for u in vm_host)
    for _dummy in range(6):
        if rng.random() < 0.5:
            uuid, name = rng.choice(sorted(vm_host)), rng.choice(names)
            graph.unlink(uuid, name)
        for uuid in sorted(vm_host):
            for name in names:
                assert graph.can_join(uuid, name) == would_be_eligible(graph, uuid, name)
            for host in hosts:
                probe = ("probe", host)
                graph.add_reservation(probe, host)
                exact = would_be_eligible(graph, uuid, probe)
                graph.remove_reservation(probe)
                assert graph.new_slot_allowed(uuid, host) == exact


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10 ** 9))
def test_vm_check_matches_the_rules_on_any_graph(seed):
    """vm_ok on graphs that break the rules in every way (links made without checks, VMs moved,
    reservations deleted) agrees with the rules read from plain maps."""
    rng = random.Random(seed)
    hosts = ["h%d" % i for i in range(rng.randint(2, 6))]
    vm_host = {"v%d" % i: rng.choice(hosts + ([None] if rng.random() < 0.1 else [])) for i in range(rng.randint(1, 8))}
    res_host = {"r%d" % i: rng.choice(hosts) for i in range(rng.randint(1, 6))}
    uses = {uuid: set() for uuid in vm_host}
    graph = DependencyGraph()
    for uuid, host in vm_host.items():
        graph.add_vm(uuid, host)
    for name, host in res_host.items():
        graph.add_reservation(name, host)
    for _dummy in range(rng.randint(1, 30)):
        uuid, name, roll = rng.choice(sorted(vm_host)), rng.choice(sorted(res_host)), rng.random()
        if roll < 0.7:
            graph.link(uuid, name)
            uses[uuid].add(name)
        elif roll < 0.85:
            graph.unlink(uuid, name)
            uses[uuid].discard(name)
        elif roll < 0.95:
            vm_host[uuid] = rng.choice(hosts)
            graph.add_vm(uuid, vm_host[uuid])
        else:
            graph.remove_reservation(name)
            graph.add_reservation(name, res_host[name])
            for held in uses.values():
                held.discard(name)
        for other in sorted(vm_host):
            assert graph.vm_ok(other) == vm_keeps_the_rules(other, vm_host, res_host, uses), other


@st.composite
def roomy_fleets(draw):
    """(hypervisors, vms, limit): each zone has max requirement + 2 hosts or more, and every host
    has room for every VM's slots (capacity never decides)."""
    zones = ["az-a", "az-b"][:draw(st.integers(1, 2))]
    per_zone = draw(st.integers(max(REQUIREMENTS.values()) + 2, 6))
    hosts = [("h%d" % i, zones[i % len(zones)]) for i in range(per_zone * len(zones))]
    vms = []
    for index in range(draw(st.integers(1, 10))):
        name, zone = draw(st.sampled_from(hosts))
        flavor = draw(st.sampled_from(FLAVORS))
        cpu, mem = SIZES[flavor.split(".")[-1]] if "." in flavor else (1, 512)
        vms.append(VM("vm-%02d" % index, name, zone, flavor, cpu, mem, {}))
    cpu_room = sum(v.vcpus for v in vms) * max(REQUIREMENTS.values())
    mem_room = sum(v.memory_mb for v in vms) * max(REQUIREMENTS.values())
    hypervisors = []
    for name, zone in hosts:
        used_cpu = sum(v.vcpus for v in vms if v.host == name)
        used_mem = sum(v.memory_mb for v in vms if v.host == name)
        hypervisors.append(Hypervisor(name, zone, used_cpu + cpu_room, used_mem + mem_room,
                                      frozenset(), used_cpu, used_mem))
    return hypervisors, vms, draw(st.booleans())


def _cycles_until_covered(hypervisors, vms, limit, most):
    """(result, cycles run): cycles from no reservations until full coverage, ``most`` at most."""
    result = None
    for cycle in range(most):
        result = run_cycle(hypervisors, vms, result.reservations if result else [],
                           _settings(limit), now=NOW + 60 * cycle, cycle=cycle)
        check_result(hypervisors, vms, result)
        if result.summary["coverage_ratio"] == 1.0:
            return result, cycle + 1
    return result, most


@settings(**PROFILE)
@given(roomy_fleets())
def test_roomy_fleet_converges_to_full_coverage_and_stays(fleet):
    hypervisors, vms, limit = fleet
    result, cycles = _cycles_until_covered(hypervisors, vms, limit, 10)
    assert result.summary["coverage_ratio"] == 1.0, result.to_dict()["vm_status"]
    again = run_cycle(hypervisors, vms, result.reservations, _settings(limit),
                      now=NOW + 60 * cycles, cycle=cycles)
    covered_at, most = _memory(result.reservations), cycles + 2 * len(vms) + 4
    while again.changed_anything and cycles < most:
        # a covered plan is packed: a cycle that creates nothing holds less, or only makes its
        # interim reservations ordinary ones (the plan they waited for is given up: that
        # happens once, the Interim condition is never added back without a creation); one
        # moving VMs towards the plan built from nothing may hold more meanwhile, never a VM
        # fewer slots
        check_result(hypervisors, vms, again)
        assert again.summary["coverage_ratio"] == 1.0
        held = {s.uuid: s.held for s in result.vm_status}
        assert all(s.held >= held.get(s.uuid, 0) for s in again.vm_status)
        if not again.created and _kept(result.reservations) != _kept(again.reservations):
            assert _memory(again.reservations) < _memory(result.reservations)
        elif not again.created:
            assert _interim(again.reservations) < _interim(result.reservations)
        cycles += 1
        result, again = again, run_cycle(hypervisors, vms, again.reservations, _settings(limit),
                                         now=NOW + 60 * cycles, cycle=cycles)
    assert not again.changed_anything and again.removals == [] and again.reused == 0
    assert _memory(again.reservations) <= covered_at  # then it stays, holding no more
    assert {r.name: r.allocations for r in again.reservations} == \
        {r.name: r.allocations for r in result.reservations}
