"""Requirement counts: the limits a count is checked against, and planning times that do not grow
with the count (the bound's reservations for pairs in closed form, the slot search no deeper than
the hypervisors a VM may use, and every planning loop within the cycle's deadline)."""
import contextlib
import json
import random
import signal

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._failover import joining, reconcile
from ansible_collections.resilient.virt.plugins.module_utils._failover.bounds import (
    lower_bound, reservations_for_pairs)
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    MAX_REQUIRED, check_requirements_met, validate_requirements)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import VM, Hypervisor
from ansible_collections.resilient.virt.plugins.module_utils._failover.reconcile import run_cycle
from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import FailoverSettings
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, Timeout

from .oracle import vm_keeps_the_rules

NOW = 1.8e9


@contextlib.contextmanager
def _within(seconds, cpu=False):
    """Fail the test once the block has run ``seconds`` (the code under test may never return):
    of wall-clock time, or with ``cpu`` of this process's CPU time, which a loaded machine
    does not stretch (for the checks that a search is not exponential)."""
    def expire(_signum, _frame):
        raise AssertionError("still running after %g s%s" % (seconds, " of CPU" if cpu else ""))

    sig, timer = (signal.SIGPROF, signal.ITIMER_PROF) if cpu else \
        (signal.SIGALRM, signal.ITIMER_REAL)
    previous = signal.signal(sig, expire)
    signal.setitimer(timer, seconds)
    try:
        yield
    finally:
        signal.setitimer(timer, 0)
        signal.signal(sig, previous)


def _counted(pairs):
    """The fewest reservations giving ``pairs`` pairs, counted up one by one (the old loop)."""
    count = 0
    while count * (count - 1) // 2 < pairs:
        count += 1
    return count


def test_reservations_for_pairs_is_the_count_found_one_by_one():
    for pairs in range(0, 5000):
        assert reservations_for_pairs(pairs) == _counted(pairs), pairs


@pytest.mark.parametrize("pairs", [10 ** 6, 10 ** 12 - 1, 10 ** 12, 10 ** 12 + 1, 10 ** 17 * 5,
                                   (10 ** 9) * (10 ** 9 - 1) // 2, 2 ** 200 + 12345])
def test_reservations_for_pairs_is_the_least_count_giving_that_many_pairs(pairs):
    count = reservations_for_pairs(pairs)
    assert count * (count - 1) // 2 >= pairs > (count - 1) * (count - 2) // 2


def test_the_bound_of_a_billion_slots_is_found_at_once():
    # one VM requiring 10^9 slots holds 10^9 (10^9 - 1) / 2 pairs: 10^9 reservations
    vms = [VM("vm-1", "h1", "az1", "web", 4, 8192)]
    with _within(5, cpu=True):
        bound = lower_bound(vms, {"web": 10 ** 9}, lambda vm: vm.az)
    assert bound.reservations == 10 ** 9 and bound.memory_mb == 10 ** 9 * 8192


# -- refusals: a count above MAX_REQUIRED, or one no VM could hold in the fleet

@pytest.mark.parametrize("count", [MAX_REQUIRED + 1, 10 ** 8, 10 ** 9, 10 ** 30])
def test_a_count_above_the_maximum_is_refused_naming_the_pattern(count):
    with pytest.raises(InvalidSpec) as caught:
        validate_requirements({"*": 1, "web": count})
    assert str(caught.value).startswith("requirements['web']: ")
    assert caught.value.details["errors"][0]["path"] == "requirements['web']"
    assert "give at most %d" % MAX_REQUIRED in str(caught.value)
    assert validate_requirements({"web": MAX_REQUIRED}) == {"web": MAX_REQUIRED}


def test_the_modules_settings_name_the_top_level_option():
    with pytest.raises(InvalidSpec, match=r"^requirements\['web'\]: the count 1000000000 "):
        FailoverSettings.from_dict({"requirements": {"web": 10 ** 9}}, path="")


TWO = [Hypervisor("h1", "az1", 32, 131072), Hypervisor("h2", "az1", 32, 131072)]


def test_more_slots_than_the_other_hypervisors_is_refused():
    vms = [VM("vm-1", "h1", "az1", "web", 4, 8192)]
    with pytest.raises(InvalidSpec) as caught:
        check_requirements_met({"web": 2}, TWO, vms)
    assert caught.value.details["errors"][0]["path"] == "requirements['web']"
    assert "vm-1" in str(caught.value) and "give at most 1" in str(caught.value)
    assert check_requirements_met({"web": 1}, TWO, vms) == {"web": 1}


def test_the_pattern_giving_the_count_is_named():
    vms = [VM("vm-1", "h1", "az1", "web", 4, 8192), VM("vm-2", "h2", "az1", "db", 4, 8192)]
    # web gets the highest match, 3 from "w*"; "db" is met
    with pytest.raises(InvalidSpec, match=r"^requirements\['w\*'\]: VM vm-1 .* requires 3 slots"):
        check_requirements_met({"*": 1, "w*": 3, "web": 2}, TWO, vms)
    # a count no VM takes is not a VM's requirement; an unlisted host leaves both others
    assert check_requirements_met({"hana_*": 5, "*": 1}, TWO, vms)
    assert check_requirements_met({"*": 2}, TWO, [VM("vm-3", "elsewhere", "az1", "web", 1, 1)])


def test_a_zone_too_small_is_planned_short_not_refused():
    # az1 has two hypervisors, az2 one: a VM of az1 may hold one slot, the fleet has two others
    hypervisors = TWO + [Hypervisor("h3", "az2", 32, 131072)]
    vms = [VM("vm-1", "h1", "az1", "web", 4, 8192)]
    assert check_requirements_met({"web": 2}, hypervisors, vms)
    result = run_cycle(hypervisors, vms, [], FailoverSettings(requirements={"web": 2}), NOW)
    (status,) = result.vm_status
    assert (status.required, status.held) == (2, 1) and status.why


# -- the slot search goes no deeper than the hypervisors a VM may still use

def _fleet(hosts, per_host, zone="az1"):
    hypervisors = [Hypervisor("h%d" % i, zone, 64, 1 << 20) for i in range(hosts)]
    vms = [VM("vm-%d-%d" % (i, j), "h%d" % i, zone, "web", 1, 1024 * (1 + (i * per_host + j) % 3))
           for i in range(hosts) for j in range(per_host)]
    return hypervisors, vms


def _cycles(hypervisors, vms, requirements, count, deadline=None, limit=True):
    settings = FailoverSettings(requirements=requirements, limit_one_new_per_hypervisor=limit)
    limits = {} if deadline is None else {"deadline": deadline}
    reservations, results = [], []
    for cycle in range(count):
        result = run_cycle(hypervisors, vms, reservations, settings, NOW + cycle * 60, cycle,
                           **limits)
        reservations = result.reservations
        results.append(json.dumps(result.to_dict(), sort_keys=True))
    return results, result


def test_a_count_the_zone_cannot_meet_is_searched_no_deeper_than_its_hypervisors():
    # each VM may use 7 hypervisors, and requires 8 slots: searching every branch for the 8th
    # took 4 s in the second cycle and 10 s in the third
    hypervisors, vms = _fleet(8, 3)
    with _within(5, cpu=True):
        _results, last = _cycles(hypervisors, vms, {"web": 8}, 3)
    res_host = {res.name: res.host for res in last.reservations}
    host_of = {vm.uuid: vm.host for vm in vms}
    slots = {vm.uuid: [res.name for res in last.reservations if vm.uuid in res.allocations]
             for vm in vms}
    for vm in vms:
        assert len(slots[vm.uuid]) <= 7
        assert vm_keeps_the_rules(vm.uuid, host_of, res_host, slots)


def test_the_shallower_search_finds_the_same_plans(monkeypatch):
    rng = random.Random(11)
    requirements = {"f1": 1, "f3": 3, "f4": 4, "f5": 5}
    for _case in range(25):
        zones = ["a", "b"][:rng.randint(1, 2)]
        count = rng.randint(2, 6)
        hypervisors = [Hypervisor("h%d" % i, zones[i % len(zones)], 16, 65536,
                                  frozenset(["T"]) if rng.random() < 0.3 else frozenset())
                       for i in range(count)]
        vms = [VM("v%02d" % i, "h%d" % rng.randrange(count), "", rng.choice(sorted(requirements)),
                  1, 1024 * rng.randint(1, 3), {"trait:T": "required"} if rng.random() < 0.2 else {})
               for i in range(rng.randint(1, 8))]
        limit = rng.random() < 0.5
        shallow, _last = _cycles(hypervisors, vms, requirements, 2, limit=limit)
        with monkeypatch.context() as patch:  # as deep as the VM's missing slots
            patch.setattr(joining, "hosts_left", lambda *args: 10 ** 9)
            deep, _last = _cycles(hypervisors, vms, requirements, 2, limit=limit)
        assert shallow == deep


# -- the cycle's deadline

def test_a_deadline_long_enough_changes_nothing():
    hypervisors, vms = _fleet(5, 2)
    assert _cycles(hypervisors, vms, {"web": 2}, 2, deadline=600)[0] == \
        _cycles(hypervisors, vms, {"web": 2}, 2)[0]


def test_planning_past_the_deadline_stops_with_timeout(monkeypatch):
    hypervisors, vms = _fleet(8, 3)
    with pytest.raises(Timeout) as caught:
        run_cycle(hypervisors, vms, [], FailoverSettings(requirements={"web": 2}), NOW, deadline=0)
    assert "resilience.deadline (0s)" in str(caught.value)
    assert caught.value.details == {"deadline": 0.0}
    # a search that would run for minutes (every branch, as deep as the missing slots) stops;
    # packing alone, as a plan grown along its target searches only once no VM waits
    monkeypatch.setattr(joining, "hosts_left", lambda *args: 10 ** 9)
    monkeypatch.setattr(reconcile, "STRATEGIES", (reconcile.PACK, reconcile.GREEDY))
    settings = FailoverSettings(requirements={"web": 8})
    reservations = run_cycle(hypervisors, vms, [], settings, NOW).reservations
    with _within(10), pytest.raises(Timeout, match=r"resilience.deadline \(0.5s\)"):
        run_cycle(hypervisors, vms, reservations, settings, NOW + 60, 1, deadline=0.5)
