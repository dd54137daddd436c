"""Evacuation plans: a distinct own reservation on a surviving host for each failed-over VM."""
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.resilient.virt.plugins.module_utils._failover.evacuation import (
    plan_evacuation)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import VM, Reservation

from .oracle import max_assignment, plan_errors

SLOT = {"cpu": 4, "memory_mb": 8192}


def vm(uuid, host, mem=4096):
    return VM(uuid, host, "az-a", "m1", 2, mem)


def res(name, host, *vms, resources=None):
    return Reservation(name, host, "az-a", dict(SLOT if resources is None else resources),
                       {v.uuid: v.host for v in vms})


def test_vm_moves_to_its_reservation_on_a_surviving_host():
    a = vm("a", "h1")
    plan = plan_evacuation(["h1"], [a, vm("b", "h2")], [res("r1", "h3", a)])
    assert plan.complete
    assert plan.moves == [{"vm": "a", "from_host": "h1", "reservation": "r1", "to_host": "h3", "priority": 0}]
    assert plan.to_dict()["affected"] == 1


def test_augmenting_path_finds_the_assignment_greedy_would_miss():
    # "big" is placed first and would take r1, leaving "small" (which only holds r1) without.
    big, small = vm("big", "h1", mem=8192), vm("small", "h2", mem=1024)
    reservations = [res("r1", "h5", big, small), res("r2", "h6", big)]
    plan = plan_evacuation(["h1", "h2"], [small, big], reservations)
    assert plan.complete
    assert {m["vm"]: m["reservation"] for m in plan.moves} == {"big": "r2", "small": "r1"}


def test_long_augmenting_paths_do_not_hit_recursion_limits():
    # v_i holds r_i and r_i+1; "last" holds r_0 only and comes last, so every v_i must shift.
    count = 1500
    chain = [vm("v%04d" % i, "h1") for i in range(count)]
    last = vm("x-last", "h1", mem=1024)
    reservations = [res("r%04d" % i, "h2", *chain[max(0, i - 1):i + 1]) for i in range(count + 1)]
    reservations[0].allocations[last.uuid] = "h1"
    plan = plan_evacuation(["h1"], chain + [last], reservations)
    assert plan.complete
    moves = {m["vm"]: m["reservation"] for m in plan.moves}
    assert moves["x-last"] == "r0000" and moves["v1499"] == "r1500"


def test_unplaced_vms_say_why():
    a, b, c, d = vm("a", "h1"), vm("b", "h1"), vm("c", "h1"), vm("d", "h1")
    moved = VM("e", "h1", "az-a", "m1", 2, 4096)
    reservations = [res("r-shared", "h3", a, b), res("r-dead", "h2", c),
                    Reservation("r-stale", "h3", "az-a", dict(SLOT), {"e": "h9"}),
                    res("r-small", "h4", d, resources={"cpu": 1, "memory_mb": 1024})]
    plan = plan_evacuation(["h1", "h2"], [a, b, c, d, moved, vm("f", "h1")], reservations)
    reasons = {u["vm"]: u["reason"] for u in plan.unplaced}
    placed = [m["vm"] for m in plan.moves]
    assert placed == ["a"] and not plan.complete
    assert "taken by other evacuated VMs" in reasons["b"] and "r-shared" in reasons["b"]
    assert reasons["c"] == "all its reservations are on failed hosts (h2)"
    assert "large enough" in reasons["d"] and "records it on h1" in reasons["e"]
    assert reasons["f"] == "holds no failover reservation"


def test_same_input_same_plan():
    vms = [vm("v%d" % i, "h%d" % (i % 3)) for i in range(12)]
    reservations = [res("r%d" % i, "h%d" % (3 + i % 4), *vms[i::5]) for i in range(8)]
    first = plan_evacuation(["h0", "h1"], vms, reservations).to_dict()
    again = plan_evacuation(["h1", "h0"], list(reversed(vms)), list(reversed(reservations)))
    assert again.to_dict() == first and first["failed_hosts"] == ["h0", "h1"]


@st.composite
def holdings(draw):
    """Random VMs and reservations, each reservation listing random VMs (with their host or, now
    and then, a stale one) and random sizes: inputs the planner would never produce too."""
    hosts = ["h%d" % i for i in range(draw(st.integers(2, 6)))]
    vms = [VM("v%02d" % i, draw(st.sampled_from(hosts)), "az-a", "m1", draw(st.integers(1, 4)),
              draw(st.sampled_from([512, 1024, 4096]))) for i in range(draw(st.integers(0, 10)))]
    reservations = []
    for index in range(draw(st.integers(0, 8))):
        members = draw(st.lists(st.sampled_from(vms), unique_by=lambda v: v.uuid, max_size=4)) \
            if vms else []
        allocations = {v.uuid: v.host if draw(st.integers(0, 9)) else "stale" for v in members}
        reservations.append(Reservation(
            "r%d" % index, draw(st.sampled_from(hosts)), "az-a",
            {"cpu": draw(st.integers(1, 4)), "memory_mb": draw(st.sampled_from([512, 2048, 4096]))},
            allocations))
    return hosts, vms, reservations


@settings(max_examples=300, deadline=None)
@given(holdings())
def test_every_plan_agrees_with_an_independent_matching(case):
    """Whatever the input, the plan names every affected VM once, uses only moves the VM may
    make, no reservation twice, and leaves a VM unplaced only when no distinct assignment of all
    of them exists (the oracle's own matching decides)."""
    hosts, vms, reservations = case
    for size in (1, 2):
        for failed in itertools.combinations(hosts, size):
            plan = plan_evacuation(failed, vms, reservations).to_dict()
            assert plan_errors(plan, vms, reservations, failed) == [], plan
            placed = max_assignment([v for v in vms if v.host in failed], reservations, set(failed))
            assert plan["placed"] == len(placed)  # as many as a maximum matching places
