"""Evacuation priorities: VMs placed and moved highest priority first, and when not all fit, no
VM is left unplaced for one of lower priority (judged by a brute force of the test's own)."""
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.resilient.virt.plugins.module_utils._failover.evacuation import (
    plan_evacuation)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import VM, Reservation
from ansible_collections.resilient.virt.plugins.module_utils._failover.priorities import (
    priority_of, validate_priorities)
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec

from .oracle import plan_errors, usable

SLOT = {"cpu": 4, "memory_mb": 8192}


def test_a_small_vm_of_higher_priority_takes_the_only_reservation():
    # largest first would give r1 to "web"; the database's priority wins it
    web, db = VM("web", "h1", "az", "m1", 2, 4096), VM("db", "h1", "az", "m1", 1, 1024)
    shared = Reservation("r1", "h2", "az", dict(SLOT), {"web": "h1", "db": "h1"})
    plan = plan_evacuation(["h1"], [web, db], [shared], {"db": 100})
    assert [m["vm"] for m in plan.moves] == ["db"] and plan.moves[0]["priority"] == 100
    assert [(u["vm"], u["priority"]) for u in plan.unplaced] == [("web", 0)]
    assert [m["vm"] for m in plan_evacuation(["h1"], [web, db], [shared]).moves] == ["web"]


def test_moves_are_listed_highest_priority_first():
    vms = [VM("v%d" % i, "h1", "az", "m1", 1, 512 * (i + 1)) for i in range(4)]
    reservations = [Reservation("r%d" % i, "h2", "az", dict(SLOT), {vm.uuid: "h1"}) for i, vm in enumerate(vms)]
    plan = plan_evacuation(["h1"], vms, reservations, {"v0": 5, "v2": 5, "v1": -1})
    # priority first, then the larger memory
    assert [m["vm"] for m in plan.moves] == ["v2", "v0", "v3", "v1"]


@pytest.mark.parametrize("name, expected", [("db-1", 100), ("db-web", 100), ("web-1", 10),
                                            ("cache", 0), ("db/1", 0)])
def test_the_highest_matching_priority_is_the_vms(name, expected):
    checked = validate_priorities([{"match": "web-*", "priority": 10}, {"match": "db-*", "priority": 100},
                                   {"match": "*web*", "priority": 5}])
    assert priority_of(name, checked) == expected


@pytest.mark.parametrize("bad, path", [
    ("db-*", "priorities"),
    (["db-*"], "priorities[0]"),
    ([{"match": "db-*"}], "priorities[0].priority"),
    ([{"match": "db-*", "priority": True}], "priorities[0].priority"),
    ([{"match": "", "priority": 1}], "priorities[0].match"),
    ([{"match": "db-[", "priority": 1}], "priorities[0].match"),
    ([{"match": "a", "priority": 1}, {"match": "b", "priority": 1, "order": 2}], "priorities[1].order"),
])
def test_a_bad_entry_names_its_field(bad, path):
    with pytest.raises(InvalidSpec) as info:
        validate_priorities(bad)
    assert path in str(info.value)


def _most_placed_at_or_above(affected, reservations, failed, rank, threshold):
    """Brute force: the most VMs of priority >= threshold that distinct usable reservations can
    take at once, over every assignment of them."""
    wanted = [vm for vm in affected if rank.get(vm.uuid, 0) >= threshold]
    best = 0
    for choice in itertools.product(*[[None] + [r.name for r in reservations if usable(vm, r, failed)]
                                      for vm in wanted]):
        taken = [name for name in choice if name is not None]
        if len(taken) == len(set(taken)):
            best = max(best, len(taken))
    return best


@st.composite
def ranked_holdings(draw):
    hosts = ["h%d" % i for i in range(draw(st.integers(2, 4)))]
    vms = [VM("v%d" % i, draw(st.sampled_from(hosts)), "az", "m1", 1, draw(st.sampled_from([512, 4096])))
           for i in range(draw(st.integers(0, 6)))]
    reservations = []
    for index in range(draw(st.integers(0, 5))):
        members = draw(st.lists(st.sampled_from(vms), unique_by=lambda v: v.uuid, max_size=3)) if vms else []
        reservations.append(Reservation("r%d" % index, draw(st.sampled_from(hosts)), "az",
                                        {"cpu": 2, "memory_mb": draw(st.sampled_from([1024, 8192]))},
                                        {v.uuid: v.host for v in members}))
    rank = {vm.uuid: draw(st.integers(-1, 3)) for vm in vms if draw(st.booleans())}
    return hosts, vms, reservations, rank


@settings(max_examples=150, deadline=None)
@given(ranked_holdings())
def test_no_vm_is_left_for_one_of_lower_priority(case):
    """At every priority level, the plan places as many VMs of that priority or higher as any
    assignment could; its moves run in priority order; and it stays a valid plan."""
    hosts, vms, reservations, rank = case
    failed = {hosts[0]}
    plan = plan_evacuation(sorted(failed), vms, reservations, rank).to_dict()
    assert plan_errors(plan, vms, reservations, failed) == [], plan
    priorities = [move["priority"] for move in plan["moves"]]
    assert priorities == sorted(priorities, reverse=True)
    affected = [vm for vm in vms if vm.host in failed]
    for threshold in sorted(set(rank.get(vm.uuid, 0) for vm in affected)):
        placed = sum(1 for move in plan["moves"] if move["priority"] >= threshold)
        assert placed == _most_placed_at_or_above(affected, reservations, failed, rank, threshold), (threshold, plan)
