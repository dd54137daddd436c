"""The target plan kept between cycles: a cycle on an unchanged fleet reuses it, a changed
fleet has it built again, and the state store keeps it beside the reservations."""
import json
import random
from dataclasses import replace

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._failover import reconcile
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import VM, Hypervisor
from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import (
    FailoverSettings)
from ansible_collections.resilient.virt.plugins.module_utils._failover.storage import (
    NAMESPACE, ReservationBook)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

GIB = 1024
NOW = 1.8e9
SETTINGS = FailoverSettings(requirements={"hana_*": 2, "*": 1})


def _fleet():
    """Ten hypervisors in two zones, thirty VMs, a fifth of them requiring two slots."""
    rng = random.Random(45)
    hypervisors = [Hypervisor("h%d" % i, "az-%d" % (i % 2), 64, 256 * GIB) for i in range(10)]
    vms = []
    for i in range(30):
        host = hypervisors[rng.randrange(10)]
        flavor, memory = ("hana_s", 32 * GIB) if i % 5 == 0 else ("m1", rng.choice((2, 4, 8)) * GIB)
        vms.append(VM("vm-%02d" % i, host.name, host.az, flavor, 2, memory))
    return hypervisors, vms


@pytest.fixture
def builds(monkeypatch):
    """How many times a cycle built the target (reconcile._new_plan, still run)."""
    count = []
    real = reconcile._new_plan

    def counted(*args, **kwargs):
        count.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(reconcile, "_new_plan", counted)
    return count


def _settled(hypervisors, vms):
    """The settled plan's reservations and the target its last cycle kept (as JSON keeps it)."""
    reservations, stored = [], None
    for cycle in range(20):
        result = reconcile.run_cycle(hypervisors, vms, reservations, SETTINGS,
                                     now=NOW + 60 * cycle, cycle=cycle, stored=stored)
        reservations, stored = result.reservations, json.loads(json.dumps(result.target))
        if not result.changed_anything:
            return reservations, stored, cycle + 1
    raise AssertionError("the plan did not settle in 20 cycles")


def _again(hypervisors, vms, reservations, cycle, stored):
    return reconcile.run_cycle(hypervisors, vms, reservations, SETTINGS, now=NOW + 60 * cycle,
                               cycle=cycle, stored=stored)


def _plan(result):
    return [res.to_dict() for res in result.reservations], result.summary


def test_a_cycle_on_an_unchanged_fleet_reuses_the_stored_target(builds):
    hypervisors, vms = _fleet()
    reservations, stored, cycles = _settled(hypervisors, vms)
    assert stored is not None and stored["reservations"], "the settled cycle kept no target"

    builds.clear()
    built = _again(hypervisors, vms, reservations, cycles, None)
    assert len(builds) == 1, "a settled cycle without a stored target needs none"
    builds.clear()
    reused = _again(hypervisors, vms, reservations, cycles, stored)
    assert builds == [], "the stored target was built again on an unchanged fleet"
    assert reused.target == stored
    assert _plan(reused) == _plan(built), "reusing the target changed the cycle's plan"


@pytest.mark.parametrize("change", ["vm memory", "vm host", "hypervisor memory", "new vm",
                                    "requirements"])
def test_a_changed_fleet_builds_the_target_again(builds, change):
    hypervisors, vms = _fleet()
    reservations, stored, cycles = _settled(hypervisors, vms)
    settings = SETTINGS
    if change == "vm memory":
        vms[1] = replace(vms[1], memory_mb=vms[1].memory_mb + GIB)
    elif change == "vm host":
        vms[1] = replace(vms[1], host="h9" if vms[1].host != "h9" else "h7", az="az-1")
    elif change == "hypervisor memory":
        hypervisors[0] = replace(hypervisors[0], memory_mb=200 * GIB)
    elif change == "new vm":
        vms.append(VM("vm-99", "h3", "az-1", "m1", 2, 4 * GIB))
    else:
        settings = replace(SETTINGS, requirements={"hana_*": 2, "m1": 1})
    builds.clear()
    result = reconcile.run_cycle(hypervisors, vms, reservations, settings,
                                 now=NOW + 60 * cycles, cycle=cycles, stored=stored)
    rebuilt = reconcile.run_cycle(hypervisors, vms, reservations, settings,
                                  now=NOW + 60 * cycles, cycle=cycles)
    assert len(builds) == 2, "a changed fleet reused the target of the fleet before"
    assert result.target["fingerprint"] != stored["fingerprint"]
    assert _plan(result) == _plan(rebuilt)


def test_the_store_keeps_the_target_beside_the_reservations(tmp_path, builds):
    hypervisors, vms = _fleet()
    store = open_store("sqlite:///%s" % (tmp_path / "state.db"), environ={})
    book, given = ReservationBook(store, "alpha"), []

    def cycle(reservations, counter, now, target):
        given.append(target)
        return reconcile.run_cycle(hypervisors, vms, reservations, SETTINGS, now, counter,
                                   stored=target)

    try:
        for _cycle in range(20):
            result = book.reconcile(cycle, {}, {}, keeps_target=True)[0]
            if not result.changed_anything:
                break
        kept = store.get(NAMESPACE, "alpha")["target"]
        builds.clear()
        book.reconcile(cycle, {}, {}, keeps_target=True)
        assert given[0] is None and given[-1] == kept
        assert builds == [], "the target the store kept was built again"
        assert book.load().target == kept
    finally:
        store.close()


def test_a_target_whose_greedy_stopped_elsewhere_is_built_again(builds):
    # the target's greedy stops at the plan's figures: another plan, another target
    hypervisors, vms = _fleet()
    reservations, stored, cycles = _settled(hypervisors, vms)
    assert not stored["finished"], "the target's greedy ran to the end on this fleet"
    zone = sorted(stored["stop"])[0]
    stored["stop"][zone][0] += GIB  # as if built for a plan holding 1 GiB more there
    builds.clear()
    result = _again(hypervisors, vms, reservations, cycles, stored)
    assert len(builds) == 1, "a target built for another plan was reused"
    assert _plan(result) == _plan(_again(hypervisors, vms, reservations, cycles, None))
