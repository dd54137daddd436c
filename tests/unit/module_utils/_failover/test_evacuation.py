"""Evacuation plans: a distinct own reservation on a surviving host for each failed-over VM."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.evacuation import (
    plan_evacuation)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import VM, Reservation

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
    assert plan.moves == [{"vm": "a", "from_host": "h1", "reservation": "r1", "to_host": "h3"}]
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
